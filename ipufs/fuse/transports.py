# The transports a mount may serve over, one row each (a TransportKind,
# ipufs/fuse/transport.py), most preferred first; the last has no switch
# and serves wherever no other is chosen. The mount settings of their
# switches (ipufs/daemon/settings.py), the daemon's choice and the name of
# the transport in force are made from this table: the daemon knows no
# transport by name. Adding one is its module and a row here
# (docs/architecture.md, "Adding a transport").
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ipufs.fuse import devfuse, uring
from ipufs.fuse.transport import Switch, Transport, TransportKind

#: Every transport, in the order a mount prefers them.
TRANSPORTS: tuple[TransportKind, ...] = (uring.KIND, devfuse.KIND)
#: What each switch may say.
MODES = ("auto", "on", "off")
#: The switches, by their setting's key.
SWITCHES: dict[str, Switch] = {t.switch.key: t.switch for t in TRANSPORTS if t.switch is not None}
if (len(SWITCHES) != len(TRANSPORTS) - 1 or TRANSPORTS[-1].switch is not None
        or any(s.default not in MODES for s in SWITCHES.values())):  # fail at import
    raise ImportError("every transport but the last needs a switch of its own, and the last none")
#: Where a transport serves that fell back at INIT.
FALLBACK = TRANSPORTS[-1]


def check(switches: Mapping[str, str]) -> None:
    """ValueError, in one line, for a switch that is not one or says
    something else than auto, on or off."""
    for key, mode in switches.items():
        if key not in SWITCHES:
            raise ValueError(f"{key} switches no transport (known: {', '.join(SWITCHES)})")
        if mode not in MODES:
            raise ValueError(f"{SWITCHES[key].flag} must be one of {', '.join(MODES)}, not {mode!r}")


@dataclass(frozen=True, slots=True)
class Choice:
    """The transport a mount serves over, and why."""

    kind: TransportKind
    reason: str

    def in_force(self, transport: Transport | None) -> str:
        """How requests reach the mount now, and why, given the transport
        its server runs (None: not running)."""
        if self.kind.in_force(transport):
            return f"{self.kind.name} ({self.reason})"
        return f"{FALLBACK.name} (the kernel did not agree to it at INIT)"


def choose(switches: Mapping[str, str]) -> Choice:
    """The first transport whose switch is not off and that can serve here
    (a switch not given says its default). ValueError, in one line, for a
    switch on where its transport cannot serve."""
    check(switches)
    passed: list[str] = []  # why each before it was not chosen
    for kind in TRANSPORTS:
        switch = kind.switch
        if switch is None:
            return Choice(kind, "; ".join(passed))
        mode = switches.get(switch.key, switch.default)
        if mode == "off":
            passed.append(f"{switch.flag} off")
            continue
        why = kind.unavailable()
        if why is None:
            return Choice(kind, f"{switch.flag} {mode}" + (f": {kind.offered}" if kind.offered else ""))
        if mode == "on":
            raise ValueError(f"{switch.flag} on: {kind.name} is unavailable: {why}")
        passed.append(why)
    raise AssertionError("the last transport has no switch")  # checked at import
