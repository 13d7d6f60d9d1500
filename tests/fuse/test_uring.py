# When FUSE over io_uring is used (ipufs/fuse/uring.py, chosen by the table
# of ipufs/fuse/transports.py): what the kernel offers and root allows
# decides `--uring auto`; `--uring on` refuses in one line where it cannot;
# `--uring off` never looks. The switches are files, given here as files
# of the test's.
from __future__ import annotations

from pathlib import Path

import pytest

from ipufs.fuse import devfuse, transports, uring


def choose(mode: str) -> tuple[bool, str]:
    """Whether a mount with `--uring MODE` serves over io_uring, and why."""
    choice = transports.choose({"uring": mode})
    assert choice.kind in (uring.KIND, devfuse.KIND)
    return choice.kind is uring.KIND, choice.reason


@pytest.fixture
def switches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    enable, disabled = tmp_path / "enable_uring", tmp_path / "io_uring_disabled"
    monkeypatch.setattr(uring, "ENABLE", str(enable))
    monkeypatch.setattr(uring, "DISABLED", str(disabled))
    return enable, disabled


def test_a_kernel_without_it_is_named(switches: tuple[Path, Path]) -> None:
    assert choose("auto") == (False, uring.unavailable())
    assert "the kernel lacks FUSE over io_uring" in str(uring.unavailable())
    with pytest.raises(ValueError, match="^--uring on: FUSE over io_uring is unavailable: the kernel lacks"):
        choose("on")


def test_the_parameter_off_says_how_root_turns_it_on(switches: tuple[Path, Path]) -> None:
    enable, _ = switches
    enable.write_text("N\n")
    use, why = choose("auto")
    assert not use and why == f"the fuse module parameter enable_uring is off (root: echo Y > {enable})"
    with pytest.raises(ValueError) as info:
        choose("on")
    assert "\n" not in str(info.value) and "enable_uring is off" in str(info.value)


def test_on_where_the_kernel_offers_it(switches: tuple[Path, Path]) -> None:
    enable, disabled = switches
    enable.write_text("Y\n")
    assert uring.unavailable() is None  # no io_uring switch: allowed
    disabled.write_text("0\n")
    assert choose("auto")[0] and choose("on")[0]
    disabled.write_text("2\n")
    assert uring.unavailable() == f"io_uring is disabled ({disabled} = 2)"


def test_off_never_looks(switches: tuple[Path, Path]) -> None:
    assert choose("off") == (False, "--uring off")


def test_a_queue_per_possible_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    possible = tmp_path / "possible"
    monkeypatch.setattr(uring, "POSSIBLE_CPUS", str(possible))
    for spans, queues in (("0\n", 1), ("0-1\n", 2), ("0-3,8-11\n", 12)):
        possible.write_text(spans)
        assert uring.possible_cpus() == queues


def test_the_transport_in_force_is_named_with_why(switches: tuple[Path, Path]) -> None:
    enable, _ = switches
    enable.write_text("Y\n")
    chosen = transports.choose({})
    assert chosen.kind is uring.KIND
    # Not running (before INIT, or the kernel did not agree): /dev/fuse serves.
    assert chosen.in_force(None) == "/dev/fuse (the kernel did not agree to it at INIT)"
    off = transports.choose({"uring": "off"})
    assert off.kind is devfuse.KIND and off.in_force(None) == "/dev/fuse (--uring off)"


def test_a_switch_is_checked() -> None:
    with pytest.raises(ValueError, match="^--uring must be one of auto, on, off, not 'maybe'$"):
        transports.choose({"uring": "maybe"})
    with pytest.raises(ValueError, match="^warp switches no transport"):
        transports.check({"warp": "on"})
