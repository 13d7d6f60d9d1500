# The names of the control and status registers, per context and space,
# as `get`/`put` (lower space) and `uget`/`uput` (upper space, worker
# only) name them in assembly. Numbers: Graphcore's LLVM MC tests
# (csrs_ipu1.s, csrs_ipu2.s, csrs_ipu21.s) and the IPU1 constants of
# Saghetti0/graphcore-ipu-research (research/ipu1/ipu1_consts.c); docs/isa.md
# lists which source gives which.
from __future__ import annotations

from ipufs.model.isa.table import Arch

_COMMON = {0x00: "PC", 0x70: "DBG_DATA", 0x71: "DBG_BRK_ID"}

_SUPERVISOR = {
    **_COMMON,
    0x01: "SSR", 0x02: "CR", 0x03: "TILE_ID", 0x20: "FP_ICTL",
    **{0x21 + n: f"WORKER{n}_BASE" for n in range(6)},
    0x50: "CCCSLOAD", 0x60: "SCOUNT_L", 0x61: "SCOUNT_U",
    0x72: "CTXT_STS", 0x73: "DBG_CTL", 0x74: "DBG_ECSR", 0x75: "DBG_ECLR",
    0x80: "DBG_IBRK0_CTL", 0x81: "DBG_IBRK0_PC", 0x82: "DBG_IBRK0_VERT",
    0x90: "DBG_DBRK0_CTL", 0x91: "DBG_DBRK0_BASE", 0x92: "DBG_DBRK0_SIDA",
    0xA0: "INCOMING_MUX", 0xA1: "INCOMING_MUXPAIR", 0xA2: "INCOMING_DELTA", 0xA3: "INCOMING_FORMAT",
    0xA4: "INCOMING_BASE", 0xA5: "INCOMING_SINIT", 0xA6: "INCOMING_DCOUNT", 0xA7: "OUTGOING_BASE",
    0xA8: "OUTGOING_DELTA", 0xA9: "EXCHANGE_CTL", 0xAA: "ANS_DCOUNT", 0xAB: "EXCHANGE_ADJ",
}
_SUPERVISOR_IPU21 = {0x31: "FP_INFMT", 0x33: "FP_ISCL"}

_WORKER = {
    **_COMMON,
    0x01: "WSR", 0x02: "VERTEX_BASE", 0x03: "WORKER_BASE",
    0x04: "REPEAT_COUNT", 0x05: "REPEAT_FIRST", 0x06: "REPEAT_END",
    0x60: "COUNT_L", 0x61: "COUNT_U",
}
_WORKER_UPPER = {
    0x0: "FP_STS", 0x1: "FP_CLR", 0x2: "FP_CTL", 0x3: "PRNG_0_0", 0x4: "PRNG_0_1",
    0x5: "PRNG_1_0", 0x6: "PRNG_1_1", 0x7: "PRNG_SEED", 0x8: "TAS",
}
_WORKER_UPPER_IPU21 = {0x9: "FP_NFMT", 0xA: "FP_SCL"}


def csr_names(supervisor: bool, upper: bool, arch: Arch) -> dict[int, str]:
    """Index → name (without the ``$``) of one CSR space as seen by the
    supervisor or a worker on ``arch``; the supervisor has no upper space."""
    if upper:
        if supervisor:
            return {}
        return {**_WORKER_UPPER, **(_WORKER_UPPER_IPU21 if arch >= Arch.IPU21 else {})}
    if supervisor:
        return {**_SUPERVISOR, **(_SUPERVISOR_IPU21 if arch >= Arch.IPU21 else {})}
    return dict(_WORKER)


def cwei_names(arch: Arch) -> dict[str, int]:
    """The supervisor's `$CWEI_i_j` names (without the ``$``) and their
    numbers, 4i + j: i 0-7 on ipu1, 0-15 from ipu2 (Graphcore's MC tests
    csrs_ipu1.s, csrs_ipu2.s, csrs_ipu21.s). Names of the common compute
    configuration words, not of `get`/`put`'s CSR space, though an
    assembler takes them there as the numbers they stand for."""
    rows = 8 if arch is Arch.IPU1 else 16
    return {f"CWEI_{i}_{j}": 4 * i + j for i in range(rows) for j in range(4)}


def name_numbers(supervisor: bool | None, arch: Arch) -> dict[str, int]:
    """Every CSR name an assembler reads in a context (None: in either)
    and the number it stands for: a lower-space name its index, an
    upper-space (worker) name its index within that space, as llvm-mc
    reads them whichever instruction they appear in (csr-mode-checking.s:
    a worker's `put $PRNG_0_0, $m0` is `put 3, $m0`)."""
    out: dict[str, int] = {}
    if supervisor is not False:
        out.update({n: i for i, n in csr_names(True, False, arch).items()})
        out.update(cwei_names(arch))
    if supervisor is not True:
        out.update({n: i for i, n in csr_names(False, False, arch).items()})
        out.update({n: i for i, n in csr_names(False, True, arch).items()})
    return out
