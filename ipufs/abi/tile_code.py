# The few tile instruction words a host writes into DBG_IEXEC to drive a
# tile, for clients that carry no instruction table (the client library,
# C): a branch to a program's entry, and `put $DBG_DATA, $mN` to carry a
# register out. Their encodings are the instruction table's rows
# `bri_mmmn_zi` and `put_mmmn_zi` (ipufs/model/isa/rows.py; a test checks
# they agree). Tile debug register numbers as ipufs/model/tdi.py has them
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
CSR_DBG_DATA = 0x70
#: CTXT_STS: two bits per context, context 0 (the supervisor) lowest
CONTEXT_BITS = 2
CONTEXT_INACTIVE, CONTEXT_ACTIVE, CONTEXT_EXCEPTED = 0, 1, 2  # (a test checks them against the model's)


def branch_word(entry: int) -> int:
    """`bri entry`: an absolute branch (entry a 4-byte aligned tile address
    below 2 MiB)."""
    if entry % 4 or not 0 <= entry < 1 << 21:
        raise ValueError(f"entry 0x{entry:x} is not a 4-byte aligned tile address")
    return 0x40800000 | entry >> 2


def put_dbg_data_word(register: int) -> int:
    """`put $DBG_DATA, $mN`."""
    if not 0 <= register < 16:
        raise ValueError(f"$m{register} is no register")
    return 0x43008000 | register << 20 | CSR_DBG_DATA


def context_states(ctxt_sts: int, contexts: int = 7) -> list[int]:
    """Each context's state (CONTEXT_*) from a CTXT_STS word."""
    return [(ctxt_sts >> (CONTEXT_BITS * c)) & 3 for c in range(contexts)]
