# The few tile instruction words a host writes into DBG_IEXEC to drive a
# tile, for clients that carry no instruction table (the client library,
# C): a branch to a program's entry (or back to where a context stopped),
# `put $DBG_DATA, $mN` to carry a register out, and `get`/`put` to move a
# CSR through DBG_DATA (breakpoints). Their encodings are the instruction
# table's rows `bri_mmmn_zi`, `get_mmmn_zi` and `put_mmmn_zi`
# (ipufs/model/isa/rows.py; a test checks they agree). Tile debug register numbers as ipufs/model/debug/registers.py has them
# (R docs/tdi.md): the host's sequence is in docs/execution.md.
from __future__ import annotations

TDI_CTXT_STS = 0x00
TDI_DBG_IEXEC = 0x03
TDI_DBG_IOWNER = 0x04
TDI_DBG_DATA = 0x07
TDI_TDI_STS = 0x08
#: TDI_STS: an injection waits to retire (BUSY), or an error flag (CNQ,
#: INV, DBLE) is set, which TDI_CLR clears
TDI_STS_CNQ, TDI_STS_INV, TDI_STS_DBLE, TDI_STS_BUSY = 0x1, 0x2, 0x4, 0x8
TDI_DBG_RBRK = 0x01
TDI_DBG_RBRK_VERT = 0x02
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
CONTEXT_INACTIVE, CONTEXT_ACTIVE, CONTEXT_EXCEPTED = 0, 1, 2  # (a test checks them against the model's)


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
