# Trace events are records defined once (ipufs/driver/events.py), and how an
# ioctl's argument reads in a trace is a column of the ABI table: golden
# cases of what each shows.
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from ipufs.abi import ioctls
from ipufs.abi.icu import MESSAGE, Op, op_word
from ipufs.driver import events

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _records(cls: type[events.Event]) -> set[type[events.Event]]:
    """Every record deriving from ``cls`` that has a kind of its own,
    wherever it is defined (the classes a module names: a slotted
    dataclass replaces the class it was made from)."""
    found = set()
    for sub in cls.__subclasses__():
        if getattr(sys.modules[sub.__module__], sub.__name__, None) is sub:
            found |= _records(sub)
            if "kind" in vars(sub):
                found.add(sub)
    return found


def test_every_record_is_listed_once_under_a_kind_of_its_own() -> None:
    import ipufs.daemon.daemon  # noqa: F401  (everything that emits events, and so defines them)

    assert _records(events.Event) == set(events.EVENTS)
    assert len(set(events.KINDS)) == len(events.KINDS) == len(events.EVENTS)


def test_docs_name_every_kind_in_order() -> None:
    text = (DOCS / "faults.md").read_text()
    listed = text.split("Events: ", 1)[1].split("\n\n", 1)[0]
    depth, outside = 0, []  # the list without what its parentheses say of each kind
    for char in listed:
        depth += (char == "(") - (char == ")")
        outside.append(char if depth == 0 and char != ")" else "")
    assert re.findall(r"`([a-z][a-z-]*)`", "".join(outside)) == list(events.KINDS)  # not the options after them


MESSAGE_WORDS = (op_word(Op.READ_CLOCK), 0, 0, 0, 0)
CASES = [
    ("SET_IPU_ID", 7, b"", {"id": 7}),
    ("MASK_INTERRUPT", 0, (3).to_bytes(8, "little"), {"value": "0x3"}),
    ("DETACH_BUFFER", 0, (9).to_bytes(8, "little"), {"value": "0x9"}),
    ("ATTACH_BUFFER", 0, ioctls.BUFFER.pack(0x1000, 64, 0, 1), {"address": "0x1000", "length": 64, "flags": 1}),
    ("MAILBOX_WRITE_ONLY", 0, MESSAGE.pack(*MESSAGE_WORDS),
     {"icu_op": "READ_CLOCK", "words": [hex(w) for w in MESSAGE_WORDS]}),
    ("RESET", 0, b"", {}),
    ("MASK_INTERRUPT", 0, b"\x01", {}),  # too short to read: left out, never a traceback
]


@pytest.mark.parametrize("name,arg,data,shown", CASES, ids=[f"{c[0]}-{len(c[2])}" for c in CASES])
def test_an_ioctl_reads_as_its_abi_row_says(name: str, arg: int, data: bytes, shown: dict[str, object]) -> None:
    spec = ioctls.BY_NAME[name]
    assert events.describe_ioctl(spec.cmd, arg, data) == {"name": name, "size": ioctls.ioc_fields(spec.cmd)[3],
                                                          **shown}


def test_an_unknown_ioctl_reads_as_its_number() -> None:
    assert events.describe_ioctl(0x1234, 0, b"") == {"name": "0x00001234", "size": 0}


def test_a_failed_ioctl_shows_its_errno_and_a_register_write_its_register() -> None:
    spec = ioctls.BY_NAME["RESET"]
    assert events.IoctlDone(0, 5, spec.cmd, 0, b"", error=1).fields()["error"] == "EPERM"
    write = events.RegisterWrite(0, 5, 0x808, (4).to_bytes(4, "little")).fields()
    assert write == {"pid": 5, "offset": "0x808", "length": 4, "registers": ["CMD_SYNC"], "value": "0x4"}


def test_a_write_of_adjacent_registers_shows_each_value() -> None:
    data = b"".join(v.to_bytes(4, "little") for v in (7, 8))
    write = events.RegisterWrite(0, 5, 0x1000, data).fields()
    assert write == {"pid": 5, "offset": "0x1000", "length": 8, "registers": ["TDI_TILE", "TDI_REG"],
                     "values": ["0x7", "0x8"]}
    long = events.RegisterWrite(0, 5, 0x1000, bytes(4 * (events.SHOWN_WORDS + 1))).fields()
    assert "values" not in long and "value" not in long
    unaligned = events.RegisterWrite(0, 5, 0x1002, bytes(8)).fields()
    assert "values" not in unaligned
