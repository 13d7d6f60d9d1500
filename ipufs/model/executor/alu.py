# Semantics of the main pipeline's integer instructions on $m: arithmetic,
# logic, compares, shifts, bit counts, setzi, and atom ($a -> $m). Each
# rule names its source (keys as in docs/execution.md: A = Graphcore's
# per-instruction text in graphcore/ipu_assembly_support, J = Graphcore's
# LLVM back end, R = the IPU1 boot loader listing). Results wrap to 32 bits
# (no integer overflow exception is listed anywhere: inferred).
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ipufs.abi.registers import ExceptionCause
from ipufs.model.executor.rule import Handler, Rule, s32, u32
from ipufs.model.executor.state import MASK, Etype, TileFault

if TYPE_CHECKING:
    from ipufs.model.executor.ports import Machine
    from ipufs.model.executor.state import Context, TileState


def _reg3(op: Callable[[int, int], int]) -> Handler:
    """d, x, y registers (x, y in assembly order)."""
    def run(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        m = c.m
        c.set_m(o[0], op(m[o[1]], m[o[2]]))
    return run


def _imm(op: Callable[[int, int], int]) -> Handler:
    """d, x register, immediate (as the decoder extended it)."""
    def run(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        c.set_m(o[0], op(c.m[o[1]], o[2]))
    return run


def _imm_first(op: Callable[[int, int], int]) -> Handler:
    """d, immediate, y register (sub's immediate forms)."""
    def run(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        c.set_m(o[0], op(o[1], c.m[o[2]]))
    return run


def _unary(op: Callable[[int], int]) -> Handler:
    def run(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        c.set_m(o[0], op(c.m[o[1]]))
    return run


def _shift(op: Callable[[int, int], int], immediate: bool) -> Handler:
    """d, x, and a shift amount (a register or zi12): A says "up-to
    31-bits", and no source gives the result of a larger amount, so one
    faults at the instruction's address."""
    def run(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        n = o[2] if immediate else c.m[o[2]]
        if n > 31:
            raise TileFault(Etype.INVALID_OP, ExceptionCause.NOT_EXECUTABLE, c.pc,
                            f"shift by {n}: the result of shifts by 32 or more is not public")
        c.set_m(o[0], op(c.m[o[1]], n))
    return run


def _add(x: int, y: int) -> int: return u32(x + y)
def _sub(x: int, y: int) -> int: return u32(x - y)
def _mul(x: int, y: int) -> int: return u32(s32(x) * s32(y))
def _max(x: int, y: int) -> int: return u32(max(s32(x), s32(y)))
def _min(x: int, y: int) -> int: return u32(min(s32(x), s32(y)))
def _and(x: int, y: int) -> int: return x & y & MASK
def _andc(x: int, y: int) -> int: return x & ~y & MASK
def _or(x: int, y: int) -> int: return (x | y) & MASK
def _xor(x: int, y: int) -> int: return (x ^ y) & MASK
def _xnor(x: int, y: int) -> int: return ~(x ^ y) & MASK
def _cmpeq(x: int, y: int) -> int: return int(u32(x) == u32(y))
def _cmpne(x: int, y: int) -> int: return int(u32(x) != u32(y))
def _cmpslt(x: int, y: int) -> int: return int(s32(u32(x)) < s32(u32(y)))
def _cmpult(x: int, y: int) -> int: return int(u32(x) < u32(y))
def _shl(x: int, n: int) -> int: return (x << n) & MASK
def _shr(x: int, n: int) -> int: return x >> n
def _shrs(x: int, n: int) -> int: return u32(s32(x) >> n)
def _abs(x: int) -> int: return 0 if x == 0x80000000 else u32(abs(s32(x)))  # J: abs of INT_MIN gives 0
def _clz(x: int) -> int: return 32 - x.bit_length()
def _popc(x: int) -> int: return bin(x).count("1")


def _cms(x: int) -> int:
    """Leading bits after bit 31 equal to bit 31 (0..31)."""
    y = x ^ MASK if x & 0x80000000 else x
    return 31 - (y & 0x7FFFFFFF).bit_length()


def _bitrev8(x: int) -> int:
    out = 0
    for byte in range(4):
        b = (x >> (8 * byte)) & 0xFF
        out |= int(f"{b:08b}"[::-1], 2) << (8 * byte)
    return out


def _imm_cmp(op: Callable[[int, int], int]) -> Callable[[int, int], int]:
    """An operation against an immediate taken as a 32-bit value (a
    sign-extended one wraps)."""
    return lambda x, imm: op(x, u32(imm))


def _a_reg3(op: Callable[[int, int], int]) -> Handler:
    """$a d, x, y (the aux pipeline's bitwise forms)."""
    def run(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        c.set_a(o[0], op(c.a[o[1]], c.a[o[2]]))
    return run


def _a_imm(op: Callable[[int, int], int]) -> Handler:
    def run(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        c.set_a(o[0], op(c.a[o[1]], o[2]))
    return run


def _pair(op: Callable[[int, int], int]) -> Handler:
    """$a pairs, each word alike (and64, andc64, or64: bitwise on 64 bits)."""
    def run(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        c.set_a(o[0], op(c.a[o[1]], c.a[o[2]]))
        c.set_a(o[0] + 1, op(c.a[o[1] + 1], c.a[o[2] + 1]))
    return run


def _not64(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    c.set_a(o[0], ~c.a[o[1]] & MASK)
    c.set_a(o[0] + 1, ~c.a[o[1] + 1] & MASK)


def _a_not(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    c.set_a(o[0], ~c.a[o[1]] & MASK)


def _a_setzi(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    c.set_a(o[0], o[1])


def _setzi(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    c.set_m(o[0], o[1])


def _atom(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    c.set_m(o[0], c.a[o[1]])


A = "A hover/{}.md"
RULES: dict[str, Rule] = {
    "add_mmmn": Rule(_reg3(_add), A.format("add"), "mrr.add"),
    "add_mmmn_si": Rule(_imm(_add), A.format("add"), "mri.add"),
    "add_mmmn_zi": Rule(_imm(_add), A.format("add"), "mri.add"),
    "sub_mmmn": Rule(_reg3(_sub), A.format("sub") + "; J asm order sub d, x, y = x - y", "mrr.sub"),
    "sub_mmmn_si": Rule(_imm_first(_sub), A.format("sub") + "; R `sub $m9, 18, $m1`", "mir.sub"),
    "sub_mmmn_zi": Rule(_imm_first(_sub), A.format("sub"), "mir.sub"),
    "mul_mmmn": Rule(_reg3(_mul), A.format("mul") + " (low 32 bits: inferred)", "mrr.mul"),
    "mul_mmmn_si": Rule(_imm(_mul), A.format("mul") + " (low 32 bits: inferred)", "mri.mul"),
    "max_mmmn": Rule(_reg3(_max), A.format("max") + " (signed)", "mrr.max"),
    "max_mmmn_si": Rule(_imm(_imm_cmp(_max)), A.format("max"), "mri.max"),
    "max_mmmn_zi": Rule(_imm(_imm_cmp(_max)), A.format("max"), "mri.max"),
    "min_mmmn": Rule(_reg3(_min), A.format("min") + " (signed)", "mrr.min"),
    "min_mmmn_si": Rule(_imm(_imm_cmp(_min)), A.format("min"), "mri.min"),
    "min_mmmn_zi": Rule(_imm(_imm_cmp(_min)), A.format("min"), "mri.min"),
    "abs_mmmn": Rule(_unary(_abs), A.format("abs") + "; J ColossusISelLowering.cpp (its note on ABS: the instruction "
                     "returns 0 for INT_MIN)", "mr.abs"),
    "and_mmmn": Rule(_reg3(_and), A.format("and"), "mrr.and"),
    "and_mmmn_zi": Rule(_imm(_and), A.format("and"), "mri.and"),
    "andc_mmmn": Rule(_reg3(_andc), A.format("andc") + " (x & ~y)", "mrr.andc"),
    "andc_mmmn_zi": Rule(_imm(_andc), A.format("andc"), "mri.andc"),
    "or_mmmn": Rule(_reg3(_or), A.format("or"), "mrr.or"),
    "or_mmmn_zi": Rule(_imm(_or), A.format("or"), "mri.or"),
    "or_mmmn_iz": Rule(_imm(_or), A.format("or") + "; J imm12iz = field << 20", "mri.or"),
    "xor_mmmn": Rule(_reg3(_xor), A.format("xor"), "mrr.xor"),
    "xnor_mmmn": Rule(_reg3(_xnor), A.format("xnor"), "mrr.xnor"),
    "cmpeq_mmmn": Rule(_reg3(_cmpeq), A.format("cmpeq") + " (1 or 0)", "mrr.cmpeq"),
    "cmpeq_mmmn_si": Rule(_imm(_imm_cmp(_cmpeq)), A.format("cmpeq"), "mri.cmpeq"),
    "cmpeq_mmmn_zi": Rule(_imm(_imm_cmp(_cmpeq)), A.format("cmpeq"), "mri.cmpeq"),
    "cmpne_mmmn": Rule(_reg3(_cmpne), A.format("cmpne"), "mrr.cmpne"),
    "cmpslt_mmmn": Rule(_reg3(_cmpslt), A.format("cmpslt") + " (signed)", "mrr.cmpslt"),
    "cmpslt_mmmn_si": Rule(_imm(_imm_cmp(_cmpslt)), A.format("cmpslt"), "mri.cmpslt"),
    "cmpult_mmmn": Rule(_reg3(_cmpult), A.format("cmpult") + " (unsigned)", "mrr.cmpult"),
    "cmpult_mmmn_zi": Rule(_imm(_imm_cmp(_cmpult)), A.format("cmpult"), "mri.cmpult"),
    "shl_mmmn": Rule(_shift(_shl, False), A.format("shl") + " (amounts over 31 not public: fault)", "mrr.shl"),
    "shl_mmmn_zi": Rule(_shift(_shl, True), A.format("shl"), "mri.shl"),
    "shr_mmmn": Rule(_shift(_shr, False), A.format("shr") + " (logical)", "mrr.shr"),
    "shr_mmmn_zi": Rule(_shift(_shr, True), A.format("shr"), "mri.shr"),
    "shrs_mmmn": Rule(_shift(_shrs, False), A.format("shrs") + " (arithmetic)", "mrr.shrs"),
    "shrs_mmmn_zi": Rule(_shift(_shrs, True), A.format("shrs"), "mri.shrs"),
    "clz_mmmn": Rule(_unary(_clz), A.format("clz"), "mr.clz"),
    "cms_mmmn": Rule(_unary(_cms), A.format("cms") + " (leading bits equal to bit 31)", "mr.cms"),
    "popc_mmmn": Rule(_unary(_popc), A.format("popc"), "mr.popc"),
    "bitrev8_mmmn": Rule(_unary(_bitrev8), A.format("bitrev8") + " (bits reversed in each byte)", "mr.bitrev8"),
    "setzi_mmmn_zi": Rule(_setzi, A.format("setzi") + " (20-bit zero-extended)", "setzim"),
    "atom_mamn": Rule(_atom, A.format("atom") + " ($a -> $m copy)", "atom"),
    "setzi_aaan_zi": Rule(_a_setzi, A.format("setzi") + " ($a; `fnop` is setzi $a13, 0: J)", "setzia"),
    "and_aaan": Rule(_a_reg3(_and), A.format("and"), "arr.and"),
    "and_aaan_zi": Rule(_a_imm(_and), A.format("and"), "ari.and"),
    "and_aaan_iz": Rule(_a_imm(_and), A.format("and"), "ari.and"),
    "andc_aaan": Rule(_a_reg3(_andc), A.format("andc"), "arr.andc"),
    "andc_aaan_zi": Rule(_a_imm(_andc), A.format("andc"), "ari.andc"),
    "andc_aaan_iz": Rule(_a_imm(_andc), A.format("andc"), "ari.andc"),
    "or_aaan": Rule(_a_reg3(_or), A.format("or"), "arr.or"),
    "or_aaan_zi": Rule(_a_imm(_or), A.format("or"), "ari.or"),
    "or_aaan_iz": Rule(_a_imm(_or), A.format("or"), "ari.or"),
    "not_aaan": Rule(_a_not, A.format("not"), "anot"),
    "and64_aaan": Rule(_pair(_and), A.format("and64"), "prr.and"),
    "andc64_aaan": Rule(_pair(_andc), A.format("andc64"), "prr.andc"),
    "or64_aaan": Rule(_pair(_or), A.format("or64"), "prr.or"),
    "not64_aaan": Rule(_not64, A.format("not64"), "pnot"),
}
