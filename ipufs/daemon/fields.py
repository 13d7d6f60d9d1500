# What test authors send to the daemon, checked at the edge: the typed
# fields of control operations, fault kinds and fault plans (integers in a
# range, seconds, probabilities, names from a table, u32 words, flags). A
# value of the wrong type (a bool is not an integer), NaN, an infinity or a
# number out of range is refused with a message naming the field and what it
# takes, so nothing unchecked reaches the model or the daemon's timers
# (docs/control.md, docs/faults.md). No numpy, no model: the CLI builds its
# options from the same fields.
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ipufs.model.profile import Profile

#: Every register is a little-endian u32 (ipufs/abi/registers.py): the
#: widest value a fault may leave in one.
U32_MAX = 0xFFFF_FFFF
#: The largest count or seed a plan takes (TOML integers are signed 64-bit).
I64_MAX = (1 << 63) - 1
#: The longest duration a fault or plan may name: a day.
MAX_SECONDS = 86_400.0


class Invalid(ValueError):
    """A field's value is refused; the message names the field and what it takes."""


@dataclass(frozen=True, slots=True)
class Limits:
    """What device-dependent ranges depend on: the profile of the IPUs."""

    ipus: int
    tiles: int
    contexts: int  # the supervisor (0) and the workers (1..N)
    #: the tile addresses that are memory: every 21-bit one where they alias (ipu1)
    first_address: int = 0
    last_address: int = (1 << 21) - 1

    @classmethod
    def of(cls, profile: Profile, ipus: int) -> Limits:
        """The limits of ``ipus`` IPUs of ``profile``."""
        first, last = 0, (1 << 21) - 1
        if not profile.aliasing:
            first, last = profile.tile_memory_base, profile.tile_memory_base + profile.sram_per_tile - 1
        return cls(ipus=ipus, tiles=profile.tiles, contexts=profile.workers_per_tile + 1, first_address=first,
                   last_address=last)


#: A bound of a range: a number, or one read from the device's limits.
Bound = int | Callable[[Limits], int]
MISSING: Any = object()


def shown(value: Any) -> str:
    """A value as a refusal quotes it: short, whatever was sent."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass(frozen=True)
class Field:
    """One named value of a request. ``default`` MISSING with ``optional``
    False means the field is required; ``optional`` means it may be absent
    (the value is then None). ``option`` is the `ipufs inject` option that
    sets it (None: a positional argument)."""

    name: str
    help: str
    default: Any = MISSING
    optional: bool = False
    option: str | None = None
    metavar: str | None = None

    @property
    def required(self) -> bool:
        return self.default is MISSING and not self.optional

    def takes(self, limits: Limits | None = None) -> str:
        """What the field takes, for messages, help and docs."""
        raise NotImplementedError

    def check(self, value: Any, limits: Limits | None = None) -> Any:
        """The value, normalised; raises Invalid. Without limits, bounds read
        from the device are not checked (the daemon checks them)."""
        raise NotImplementedError

    def from_text(self, text: str) -> Any:
        """The value of a command-line argument (ValueError when it is not)."""
        return self.check(text)

    def refuse(self, value: Any, limits: Limits | None) -> Invalid:
        return Invalid(f"{self.name} must be {self.takes(limits)}, got {shown(value)}")


def _bound(bound: Bound, limits: Limits | None) -> int | None:
    if callable(bound):
        return None if limits is None else bound(limits)
    return bound


@dataclass(frozen=True)
class Integer(Field):
    """An integer in lo..hi (either bound may depend on the device). With
    ``scale``, the command line takes a decimal in ``unit`` and sends it
    times ``scale``, rounded (°C as milli-degrees)."""

    lo: Bound = 0
    hi: Bound = U32_MAX
    hi_text: str = ""  # the upper bound in words, where it depends on the device
    scale: int = 1
    unit: str = ""

    def takes(self, limits: Limits | None = None) -> str:
        lo, hi = _bound(self.lo, limits), _bound(self.hi, limits)
        upper = str(hi) if hi is not None else self.hi_text
        if hi == U32_MAX:
            upper = "0xffffffff (u32)" if lo == 0 else f"{U32_MAX}"
        return f"an integer {lo}..{upper}"

    def check(self, value: Any, limits: Limits | None = None) -> int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.refuse(value, limits)
        lo, hi = _bound(self.lo, limits), _bound(self.hi, limits)
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise self.refuse(value, limits)
        return value

    def from_text(self, text: str) -> int:
        if self.scale == 1:
            try:
                value = int(text, 0)
            except ValueError:
                raise ValueError(f"{text!r} is not an integer (decimal, or 0x hex)") from None
        else:
            number = float(text)  # ValueError names the text
            if not math.isfinite(number):
                raise ValueError(f"{text!r} is not a number of {self.unit}")
            value = round(number * self.scale)
        lo, hi = _bound(self.lo, None), _bound(self.hi, None)
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            if self.scale != 1:
                lo_text = f"{lo / self.scale:.10g}" if lo is not None else "?"
                hi_text = f"{hi / self.scale:.10g}" if hi is not None else "?"
                raise ValueError(f"{text} {self.unit} is out of range {lo_text}..{hi_text}")
            raise ValueError(f"{text} is out of range {lo}..{hi}")
        return value


@dataclass(frozen=True)
class Seconds(Field):
    """A duration or a time in seconds: a finite number 0..hi."""

    hi: float = MAX_SECONDS

    def takes(self, limits: Limits | None = None) -> str:
        return f"seconds 0..{self.hi:g}"

    def check(self, value: Any, limits: Limits | None = None) -> float:
        if (not isinstance(value, (int, float)) or isinstance(value, bool)
                or not math.isfinite(value) or not 0 <= value <= self.hi):
            raise self.refuse(value, limits)
        return float(value)

    def from_text(self, text: str) -> float:
        number = text.strip()
        scale = 1.0
        for suffix, factor in (("ms", 1e-3), ("s", 1.0), ("m", 60.0)):
            if number.endswith(suffix):
                number, scale = number[: -len(suffix)], factor
                break
        try:
            value = float(number) * scale
        except ValueError:
            raise ValueError(f"{text!r} is not a duration: give seconds like 2s, 500ms, 1m or 1.5") from None
        if not math.isfinite(value) or not 0 <= value <= self.hi:
            raise ValueError(f"{text!r} is out of range: give 0..{self.hi:g} seconds")
        return value


@dataclass(frozen=True)
class Fraction(Field):
    """A probability: a finite number 0..1."""

    def takes(self, limits: Limits | None = None) -> str:
        return "a number 0..1"

    def check(self, value: Any, limits: Limits | None = None) -> float:
        if (not isinstance(value, (int, float)) or isinstance(value, bool)
                or not math.isfinite(value) or not 0 <= value <= 1):
            raise self.refuse(value, limits)
        return float(value)


def _key(name: str) -> str:
    return name.lower().replace("-", "_")


@dataclass(frozen=True)
class Choice(Field):
    """A name from a table (any case; - and _ alike), or its number. The
    value is the table's name."""

    names: Mapping[str, int] = field(default_factory=dict)

    def takes(self, limits: Limits | None = None) -> str:
        return f"one of {', '.join(self.names)} (or its number)"

    def check(self, value: Any, limits: Limits | None = None) -> str:
        if isinstance(value, str):
            for name in self.names:
                if _key(name) == _key(value):
                    return name
        elif isinstance(value, int) and not isinstance(value, bool):
            for name, number in self.names.items():
                if number == value:
                    return name
        raise self.refuse(value, limits)

    def from_text(self, text: str) -> str:
        return self.check(int(text) if text.isdigit() else text)


@dataclass(frozen=True)
class Words(Field):
    """``count`` u32 words."""

    count: int = 5

    def takes(self, limits: Limits | None = None) -> str:
        return f"a list of {self.count} u32 (0..0xffffffff)"

    def check(self, value: Any, limits: Limits | None = None) -> list[int]:
        if not (isinstance(value, list) and len(value) == self.count
                and all(isinstance(w, int) and not isinstance(w, bool) and 0 <= w <= U32_MAX for w in value)):
            raise self.refuse(value, limits)
        return list(value)

    def from_text(self, text: str) -> int:
        """One word of the command line."""
        try:
            word = int(text, 0)
        except ValueError:
            raise ValueError(f"{text!r} is not an integer (decimal, or 0x hex)") from None
        if not 0 <= word <= U32_MAX:
            raise ValueError(f"{text} does not fit a u32 (0..0xffffffff)")
        return word


@dataclass(frozen=True)
class NameList(Field):
    """A list of names from ``names`` (each at most once)."""

    names: tuple[str, ...] = ()

    def takes(self, limits: Limits | None = None) -> str:
        return f"a list of names among {', '.join(self.names)}"

    def check(self, value: Any, limits: Limits | None = None) -> list[str]:
        if not (isinstance(value, list) and all(isinstance(n, str) and n in self.names for n in value)):
            raise self.refuse(value, limits)
        return list(dict.fromkeys(value))


@dataclass(frozen=True)
class Flag(Field):
    """true or false."""

    def takes(self, limits: Limits | None = None) -> str:
        return "true or false"

    def check(self, value: Any, limits: Limits | None = None) -> bool:
        if not isinstance(value, bool):
            raise self.refuse(value, limits)
        return value


@dataclass(frozen=True)
class Text(Field):
    """A string (a plan's TOML, for instance), at most ``limit`` characters."""

    limit: int = 1 << 20

    def takes(self, limits: Limits | None = None) -> str:
        return "a string"

    def check(self, value: Any, limits: Limits | None = None) -> str:
        if not isinstance(value, str) or len(value) > self.limit:
            raise self.refuse(value, limits)
        return value


def check_all(fields: tuple[Field, ...], given: Mapping[str, Any], limits: Limits | None, *,
              what: str, also: tuple[str, ...] = ()) -> dict[str, Any]:
    """The checked values of ``fields`` in ``given`` (defaults filled in,
    absent optional ones None). Unknown names are refused, with the closest
    known name (of the fields and ``also``) as a hint: a typo must never be
    ignored."""
    known = {f.name: f for f in fields}
    for name in given:
        if name not in known:
            raise Invalid(unknown(name, [*known, *also], what))
    values: dict[str, Any] = {}
    for f in fields:
        if f.name in given:
            values[f.name] = f.check(given[f.name], limits)
        elif f.required:
            raise Invalid(f"{what} needs {f.name}: {f.takes(limits)}")
        else:
            values[f.name] = None if f.default is MISSING else f.default
    return values


def unknown(name: Any, known: list[str], what: str, verb: str = "takes no") -> str:
    """The refusal of an unknown name, with the closest known one."""
    import difflib

    text = f"{what} {verb} {shown(name)}"
    close = difflib.get_close_matches(str(name), known, n=1) if isinstance(name, str) else []
    if close:
        return f"{text}; did you mean {close[0]}?"
    return f"{text}; it takes {', '.join(known)}" if known else f"{text}; it takes nothing"
