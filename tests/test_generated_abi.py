# native/include/ipufs/ipu.h and docs/abi.md are generated from the ABI
# table; they must match it, and the C compiler must agree on the values.
from __future__ import annotations

import errno
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from ipufs.abi import ioctls as abi
from scripts import generate_abi as header
from ipufs.abi.icu import Op, op_word
from ipufs.abi.interrupts import SIGNAL_NAMES, Interrupt
from ipufs.abi.registers import REGISTERS, TDI_ERRNOS, ExceptionCause, TdiResult
from ipufs.model.profile import PROFILES, Profile


def test_committed_header_is_generated_from_the_table() -> None:
    assert header.HEADER.read_text() == header.render_header(), "run: ./dev generate"


def test_doc_tables_are_generated_from_the_tables() -> None:
    text = header.ABI_DOC.read_text()
    assert text == header.render_doc(text), "run: ./dev generate"
    assert header.render_tables() in text
    text = header.REGISTERS_DOC.read_text()
    assert header.render_register_tables() in text, "run: ./dev generate"


@pytest.mark.skipif(not shutil.which("cc"), reason="needs a C compiler")
def test_c_sees_the_same_numbers(tmp_path: Path) -> None:
    names = [f"IPU_IOCTL_{s.name}" for s in abi.IOCTLS] + list(SIGNAL_NAMES.values())
    names += [f"IPUFS_INT_{s.name}" for s in Interrupt] + ["IPUFS_INT_ALL", "IPUFS_MAX_BUFFERS"]
    names += [f"IPU_REG_{r}" for r in REGISTERS] + [f"IPU_EXC_{c.name}" for c in ExceptionCause]
    names += [f"IPU_ICU_{o.name}" for o in Op] + ["IPU_ICU_OP_WORD(8,16)"]
    layout = [f"IPUFS_{p.upper()}_{k}" for p in PROFILES for k in _LAYOUT]
    names += layout + ["IPU_TILE_TDI_REG(0x30000,1215,7)"]
    names += [f"-ipufs_tdi_errno_({r.value})" for r in TdiResult]
    src = tmp_path / "values.c"
    src.write_text(
        '#include <stdio.h>\n#include "ipufs/ipu.h"\nint main(void) {\n'
        + "".join(f'  printf("{n} %llu\\n", (unsigned long long)({n}));\n' for n in names)
        + '  printf("sizeof %zu\\n", sizeof(struct ipufs_buffer));\n  return 0;\n}\n'
    )
    binary = tmp_path / "values"
    subprocess.run(["cc", "-Wall", "-Werror", "-I", str(header.HEADER.parents[1]), "-o", str(binary), str(src)],
                   check=True)
    out = dict(line.split() for line in subprocess.run([str(binary)], capture_output=True, text=True,
                                                       check=True).stdout.splitlines())
    expected = {f"IPU_IOCTL_{s.name}": s.cmd for s in abi.IOCTLS}
    expected |= {name: source.signal for source, name in SIGNAL_NAMES.items()}
    expected |= {f"IPUFS_INT_{s.name}": s.bit for s in Interrupt}
    expected |= {"IPUFS_INT_ALL": 0x3F, "IPUFS_MAX_BUFFERS": abi.MAX_BUFFERS, "sizeof": abi.BUFFER.size}
    expected |= {f"IPU_REG_{n}": r.offset for n, r in REGISTERS.items()}
    expected |= {f"IPU_EXC_{c.name}": c.value for c in ExceptionCause}
    expected |= {f"IPU_ICU_{o.name}": o.value for o in Op} | {"IPU_ICU_OP_WORD(8,16)": op_word(16, 8)}
    # each profile's layout as the model has it, and the per-tile TDI register of the public constants
    expected |= {f"IPUFS_{n.upper()}_{k}": value(p) for n, p in PROFILES.items() for k, value in _LAYOUT.items()}
    expected["IPU_TILE_TDI_REG(0x30000,1215,7)"] = 0x30000 + 1215 * 0x40 + 7 * 4
    expected |= {f"-ipufs_tdi_errno_({r.value})": 0 if r == TdiResult.OK else TDI_ERRNOS.get(r, errno.EIO)
                 for r in TdiResult}
    assert {k: int(v) for k, v in out.items()} == expected


_LAYOUT: dict[str, Callable[[Profile], int]] = {
    "EXCHANGE_SIZE": lambda p: p.exchange_size, "EXCHANGE_TILE_BASE": lambda p: p.exchange_tile_base,
    "TILE_WINDOW": lambda p: p.tile_window, "TILE_INSTANCES": lambda p: p.tile_instances,
    "TILE_TDI_BASE": lambda p: p.tdi_tile_base or 0,
}


def test_ioctl_numbers_follow_the_known_facts() -> None:
    assert {s.name: s.nr for s in abi.IOCTLS} == {
        "ATTACH": 10, "ATTACH_BUFFER": 11, "DETACH_BUFFER": 12, "SET_IPU_ID": 14,
        "MASK_INTERRUPT": 22, "UNMASK_INTERRUPT": 23, "RESET": 45, "MAILBOX_READ_ONLY": 29,
        "MAILBOX_WRITE_ONLY": 30, "MAILBOX_WRITE_READ": 31, "MAILBOX_GET_OFFSETS": 32,
        # as a runtime that drives a real C600 calls them (osmarks/ipu-stack, crates/ipu-driver/src/lib.rs)
        "BUFFER_DETACH_ALL": 18, "STOP_MONITORING": 34, "START_MONITORING": 35, "ACCUMULATE_ERRORS": 36,
        "SET_HEXOPT_IDENTITY_TABLE": 44, "SET_SECONDARY_IPU_ID": 47}
    real = {"ATTACH_BUFFER": 0xC008ED0B, "DETACH_BUFFER": 0xC008ED0C, "MAILBOX_WRITE_READ": 0xC008ED1F,
            "BUFFER_DETACH_ALL": 0x0000ED12, "STOP_MONITORING": 0x0000ED22, "START_MONITORING": 0x0000ED23,
            "ACCUMULATE_ERRORS": 0x0000ED24, "SET_HEXOPT_IDENTITY_TABLE": 0x0000ED2C,
            "SET_SECONDARY_IPU_ID": 0x4008ED2F, "RESET": 0x4004ED2D, "ATTACH": 0xC008ED0A}
    for name, cmd in real.items():  # every form the real runtime uses is one the table names
        assert cmd in {e.cmd(abi.BY_NAME[name].nr) for e in abi.BY_NAME[name].encodings}, name
    assert all(abi.ioc_fields(s.cmd)[1] == 0xED for s in abi.IOCTLS)
    assert [s.signal for s in Interrupt] == [44, 45, 46, 47, 48, 49]


def test_the_client_library_does_not_load_numpy() -> None:
    # numpy's OpenBLAS starts threads at import; a thread that does not block
    # 44..49 would take a driver signal and end the client process.
    import subprocess
    import sys

    code = "import sys, ipufs.client; sys.exit('numpy' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
