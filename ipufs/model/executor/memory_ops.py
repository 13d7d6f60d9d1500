# Semantics of loads and stores: every width of $m and $a loads and stores,
# with register or immediate offsets and the post-incrementing `step`
# forms. Effective address = base + delta + offset × access size, the
# offset unsigned and scaled (A hover/ld32.md, st32.md; the scaling is
# inferred from R's boot loader, `st32 $m4, $m11, $m15, 6` = word 6); a
# `step` form accesses base + delta, then delta += stride × access size
# (A hover/ld32step.md; R's clear loop steps 4 bytes with stride 1).
# Alignment, aliasing and parity are the tile memory's rules, applied by
# Machine.load/store; ld128 needs the interleaved region 1 (A hover/ld128.md).
# The sparse loads (ld64a32, ldd16*) read a dense stream through a pointer
# ($mAddr++, post-incremented by its size) and a sparse value at base + a
# 16-bit byte delta; the ldd16 forms load the next delta from the stream into
# the delta register, the data load using the delta it held before
# (A hover/ld64a32.md, ldd16a32.md, ldd16a64.md, ldd16b16.md, ldd16v2a32.md).
from __future__ import annotations

from typing import TYPE_CHECKING

from ipufs.model.executor.rule import Handler, Rule, s32, u32

if TYPE_CHECKING:
    from ipufs.model.executor.ports import Machine
    from ipufs.model.executor.state import Context, TileState

A = "A hover/{}.md"


def _m_load(width: int, signed: bool) -> tuple[Handler, Handler, Handler, Handler]:
    """$m loads: register offset, immediate offset, step by register, step by immediate."""
    def finish(c: Context, d: int, value: int) -> None:
        if signed and value & (1 << (8 * width - 1)):
            value -= 1 << (8 * width)
        c.set_m(d, value)

    def reg(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        m = c.m
        finish(c, o[0], ex.load(t, m[o[1]] + m[o[2]] + m[o[3]] * width, width))

    def imm(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        m = c.m
        finish(c, o[0], ex.load(t, m[o[1]] + m[o[2]] + o[3] * width, width))

    def step_reg(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        m = c.m
        value = ex.load(t, m[o[1]] + m[o[2]], width)
        c.set_m(o[2], m[o[2]] + s32(m[o[3]]) * width)
        finish(c, o[0], value)

    def step_imm(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        m = c.m
        value = ex.load(t, m[o[1]] + m[o[2]], width)
        c.set_m(o[2], m[o[2]] + o[3] * width)
        finish(c, o[0], value)

    return reg, imm, step_reg, step_imm


def _put_a(c: Context, d: int, value: int, width: int) -> None:
    for i in range(max(1, width // 4)):
        c.set_a(d + i, value >> (32 * i))


def _a_load(width: int, region1: bool = False, broadcast16: bool = False) -> tuple[Handler, Handler, Handler, Handler]:
    """$a loads (32, 64, 128 bits; ldb16 duplicates a 16-bit value into both halves)."""
    def value_of(ex: Machine, t: TileState, address: int) -> int:
        if region1:
            ex.require_region1(t, address)
        v = ex.load(t, address, width)
        return v | v << 16 if broadcast16 else v

    def reg(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        m = c.m
        _put_a(c, o[0], value_of(ex, t, m[o[1]] + m[o[2]] + m[o[3]] * width), width)

    def imm(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        m = c.m
        _put_a(c, o[0], value_of(ex, t, m[o[1]] + m[o[2]] + o[3] * width), width)

    def step_reg(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        m = c.m
        value = value_of(ex, t, m[o[1]] + m[o[2]])
        c.set_m(o[2], m[o[2]] + s32(m[o[3]]) * width)
        _put_a(c, o[0], value, width)

    def step_imm(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        m = c.m
        value = value_of(ex, t, m[o[1]] + m[o[2]])
        c.set_m(o[2], m[o[2]] + o[3] * width)
        _put_a(c, o[0], value, width)

    return reg, imm, step_reg, step_imm


def _a_value(c: Context, r: int, width: int) -> int:
    value = 0
    for i in range(width // 4):
        value |= c.a[r + i] << (32 * i)
    return value


def _m_stores() -> tuple[Handler, Handler, Handler, Handler]:
    """st32 of $m (immediate offset), st32step of $m (immediate stride),
    stm32 (register offset), stm32step (base += stride register × 4)."""
    def imm(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        m = c.m
        ex.store(t, m[o[1]] + m[o[2]] + o[3] * 4, 4, m[o[0]])

    def step_imm(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        m = c.m
        ex.store(t, m[o[1]] + m[o[2]], 4, m[o[0]])
        c.set_m(o[2], m[o[2]] + o[3] * 4)

    def stm(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        m = c.m
        ex.store(t, m[o[1]] + m[o[2]] * 4, 4, m[o[0]])

    def stm_step(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        m = c.m
        ex.store(t, m[o[1]], 4, m[o[0]])
        c.set_m(o[1], m[o[1]] + s32(m[o[2]]) * 4)

    return imm, step_imm, stm, stm_step


def _a_stores(width: int) -> tuple[Handler, Handler, Handler, Handler]:
    """$a stores: register offset, immediate offset, step by register, step by immediate."""
    def reg(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        m = c.m
        ex.store(t, m[o[1]] + m[o[2]] + m[o[3]] * width, width, _a_value(c, o[0], width))

    def imm(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        m = c.m
        ex.store(t, m[o[1]] + m[o[2]] + o[3] * width, width, _a_value(c, o[0], width))

    def step_reg(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        m = c.m
        ex.store(t, m[o[1]] + m[o[2]], width, _a_value(c, o[0], width))
        c.set_m(o[2], m[o[2]] + s32(m[o[3]]) * width)

    def step_imm(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        m = c.m
        ex.store(t, m[o[1]] + m[o[2]], width, _a_value(c, o[0], width))
        c.set_m(o[2], u32(m[o[2]] + o[3] * width))

    return reg, imm, step_reg, step_imm


def _ld64a32(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    """ld64a32 $aQ:Q+3, $mAddr++, $mBase, $mDelta: 64 bits at $mAddr into
    the quad's top pair, 32 bits at $mBase + $mDelta[15:0] into its second
    register (the first unchanged); $mAddr += 8."""
    m = c.m
    quad, pointer, base, delta = o
    dense = ex.load(t, m[pointer], 8)
    sparse = ex.load(t, m[base] + (m[delta] & 0xFFFF), 4)
    c.set_m(pointer, m[pointer] + 8)
    _put_a(c, quad + 1, sparse, 4)
    _put_a(c, quad + 2, dense, 8)


def _ldd16(width: int, *, broadcast16: bool = False, delta_pair: bool = False) -> Handler:
    """ldd16a32/a64/b16 $a, $mAddr++, $mBase, $mDelta@: data (``width``
    bytes, a 16-bit one broadcast) at $mBase + $mDelta[15:0], the new 16-bit
    delta from $mAddr, $mAddr += 2. ldd16v2a32: the delta is $mDelta[31:16],
    a new pair of deltas (32 bits) comes from $mAddr, $mAddr += 4."""
    step = 4 if delta_pair else 2

    def run(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        m = c.m
        dst, pointer, base, delta = o
        offset = m[delta] >> 16 if delta_pair else m[delta] & 0xFFFF
        new_delta = ex.load(t, m[pointer], step)
        value = ex.load(t, m[base] + offset, width)
        c.set_m(pointer, m[pointer] + step)
        c.set_m(delta, new_delta)
        _put_a(c, dst, value | value << 16 if broadcast16 else value, width)
    return run


RULES: dict[str, Rule] = {
    "ld64a32_mmbn": Rule(_ld64a32, A.format("ld64a32") + " (the delta in bytes: inferred, as every delta register)"),
    "ldd16a32_mmbn": Rule(_ldd16(4), A.format("ldd16a32") + " (the old delta addresses the data: inferred)"),
    "ldd16a64_mmbn": Rule(_ldd16(8), A.format("ldd16a64") + " (the old delta addresses the data: inferred)"),
    "ldd16b16_mmbn": Rule(_ldd16(2, broadcast16=True),
                          A.format("ldd16b16") + " (the old delta addresses the data: inferred)"),
    "ldd16v2a32_mmbn": Rule(_ldd16(4, delta_pair=True),
                            A.format("ldd16v2a32") + " (the pair replaces the delta register: inferred)"),
}


# The native loop's forms (native/src/executor.c): ld/st, $m or $a, then
# register offset (r), immediate (i), step by register (sr) or immediate
# (si); the kind names the access.
def _m_rows(name: str, width: int, signed: bool, kind: str) -> None:
    reg, imm, step_reg, step_imm = _m_load(width, signed)
    src = A.format(name) + f" ({width}-byte {'sign' if signed else 'zero'}-extended load)"
    RULES[f"{name}_mmmn"] = Rule(reg, src, f"ldmr.{kind}")
    RULES[f"{name}_mmmn_zi"] = Rule(imm, src, f"ldmi.{kind}")
    RULES[f"{name}step_mmmn"] = Rule(step_reg, src + "; A hover/" + name + "step.md", f"ldmsr.{kind}")
    RULES[f"{name}step_mmmn_si"] = Rule(step_imm, src + "; A hover/" + name + "step.md", f"ldmsi.{kind}")


for _name, _width, _signed, _kind in (("ld32", 4, False, "w32"), ("lds16", 2, True, "s16"),
                                      ("ldz16", 2, False, "z16"), ("lds8", 1, True, "s8"), ("ldz8", 1, False, "z8")):
    _m_rows(_name, _width, _signed, _kind)


def _a_rows(name: str, width: int, kind: str, *, region1: bool = False, broadcast16: bool = False,
            step: bool = True) -> None:
    reg, imm, step_reg, step_imm = _a_load(width, region1, broadcast16)
    src = A.format(name)
    RULES[f"{name}_mman"] = Rule(reg, src, f"ldar.{kind}")
    RULES[f"{name}_mman_zi"] = Rule(imm, src, f"ldai.{kind}")
    if step:
        RULES[f"{name}step_mmbn"] = Rule(step_reg, src + "; A hover/" + name + "step.md", f"ldasr.{kind}")
        RULES[f"{name}step_mmbn_si"] = Rule(step_imm, src + "; A hover/" + name + "step.md", f"ldasi.{kind}")


_a_rows("ld32", 4, "a32")
_a_rows("ld64", 8, "a64")
_a_rows("ld128", 16, "a128", region1=True)
_a_rows("ldb16", 2, "b16", broadcast16=True)

_st_imm, _st_step, _stm, _stm_step = _m_stores()
RULES["st32_mmmn_zi"] = Rule(_st_imm, A.format("st32"), "stmi")
RULES["st32step_mmmn_si"] = Rule(_st_step, A.format("st32step") + "; R 0x40234 steps 4 bytes per 1", "stmsi")
RULES["stm32_mmmn"] = Rule(_stm, A.format("stm32") + " (base + offset register × 4)", "stmx")
RULES["stm32step_mmmn"] = Rule(_stm_step, A.format("stm32step") + " (at base, then base += signed stride × 4)")
for _name, _width, _kind in (("st32", 4, "a32"), ("st64", 8, "a64")):
    _reg, _imm, _step_reg, _step_imm = _a_stores(_width)
    RULES[f"{_name}_mbmn"] = Rule(_reg, A.format(_name), f"star.{_kind}")
    RULES[f"{_name}_mbmn_zi"] = Rule(_imm, A.format(_name), f"stai.{_kind}")
    RULES[f"{_name}step_mbmn"] = Rule(_step_reg, A.format(_name + "step"), f"stasr.{_kind}")
    RULES[f"{_name}step_mbmn_si"] = Rule(_step_imm, A.format(_name + "step"), f"stasi.{_kind}")
