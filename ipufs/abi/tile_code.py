# The few tile instruction words a host writes into DBG_IEXEC to drive a
# tile, for clients that carry no instruction table (the client library,
# C): a branch to a program's entry (or back to where a context stopped),
# `put $DBG_DATA, $mN` to carry a register out, and `get`/`put` to move a
# CSR through DBG_DATA (breakpoints). Their encodings are the instruction
# table's rows `bri_mmmn_zi`, `get_mmmn_zi` and `put_mmmn_zi`
# (ipufs/model/isa/rows.py; a test checks they agree). Tile debug register
# numbers as ipufs/model/debug/registers.py has them (R docs/tdi.md), and
# the writes that start a context as Graphcore's TDI text and a real
# host's code have it: stop it with RBRK, inject a branch, resume it
# (docs/debugging.md).
from __future__ import annotations

TDI_CTXT_STS = 0x00
TDI_DBG_IEXEC = 0x03
TDI_DBG_IOWNER = 0x04
TDI_DBG_DATA = 0x07
TDI_TDI_STS = 0x08
#: TDI_STS: an injection waits to retire (BUSY), or an error flag (CNQ,
#: INV, DBLE) is set, which TDI_CLR clears
TDI_STS_CNQ, TDI_STS_INV, TDI_STS_DBLE, TDI_STS_BUSY = 0x1, 0x2, 0x4, 0x8
TDI_DBG_RBRK = 0x01  # the C600's RUN_BREAK: a mask of contexts to stop
TDI_DBG_RBRK_VERT = 0x02
TDI_DBG_ECSR = 0x05  # the C600's EXCEPTION_STATE: BOS[5] stops the supervisor at a sync
TDI_DBG_ECLR = 0x06  # the C600's EXCEPTION_CLEAR: a mask of contexts to resume
TDI_TDI_CLR = 0x09
CSR_PC = 0x00
CSR_SSR = 0x01  # a worker's $WSR has the same index
CSR_DBG_DATA = 0x70
CSR_DBG_BRK_ID = 0x71
#: the supervisor's break channels (docs/debugging.md#breakpoints)
CSR_DBG_IBRK0_CTL, CSR_DBG_IBRK0_PC, CSR_DBG_IBRK0_VERT = 0x80, 0x81, 0x82
CSR_DBG_DBRK0_CTL, CSR_DBG_DBRK0_BASE = 0x90, 0x91
IBRK_ENS, IBRK_ENW = 0x1, 0x2  # $DBG_IBRK0_CTL: the supervisor, the workers
#: CTXT_STS: two bits per context, context 0 (the supervisor) lowest
CONTEXT_BITS = 2
#: CTXT_STS states: a debug exception (break, trap) shows EXCEPTED, any other EXCEPTED_NDBG
#: (a test checks them against the model's)
CONTEXT_INACTIVE, CONTEXT_ACTIVE, CONTEXT_EXCEPTED, CONTEXT_EXCEPTED_NDBG = 0, 1, 2, 3


def branch_word(entry: int) -> int:
    """`bri entry`: an absolute branch (entry a 4-byte aligned tile address
    below 2 MiB)."""
    if entry % 4 or not 0 <= entry < 1 << 21:
        raise ValueError(f"entry 0x{entry:x} is not a 4-byte aligned tile address")
    return 0x40800000 | entry >> 2


def _operands(register: int, csr: int) -> None:
    if not 0 <= register < 16:
        raise ValueError(f"$m{register} is no register")
    if not 0 <= csr < 256:
        raise ValueError(f"CSR 0x{csr:x} is not in the lower space")


def put_word(csr: int, register: int) -> int:
    """`put CSR, $mN`."""
    _operands(register, csr)
    return 0x43008000 | register << 20 | csr


def get_word(register: int, csr: int) -> int:
    """`get $mN, CSR`."""
    _operands(register, csr)
    return 0x41000000 | register << 16 | csr


def put_dbg_data_word(register: int) -> int:
    """`put $DBG_DATA, $mN`."""
    return put_word(CSR_DBG_DATA, register)


def context_states(ctxt_sts: int, contexts: int = 7) -> list[int]:
    """Each context's state (CONTEXT_*) from a CTXT_STS word."""
    return [(ctxt_sts >> (CONTEXT_BITS * c)) & 3 for c in range(contexts)]


def start_writes(entry: int, context: int = 0) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The TDI register writes (register, value) that start ``context`` of
    a tile at ``entry``: those before the injected branch retires (name the
    context, stop it with RBRK, inject `bri entry`), and those after
    (TDI_STS.BUSY clear: RBRK off, EXCEPTION_CLEAR resumes it there)."""
    if not 0 <= context < 7:
        raise ValueError(f"context {context} is not 0..6")
    bit = 1 << context
    return ([(TDI_DBG_IOWNER, context), (TDI_DBG_RBRK, bit), (TDI_DBG_IEXEC, branch_word(entry))],
            [(TDI_DBG_RBRK, 0), (TDI_DBG_ECLR, bit)])
