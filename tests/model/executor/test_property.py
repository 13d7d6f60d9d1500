# Random straight-line integer and load/store programs: the executor
# against a reference interpreter written here, independently of it (plain
# Python over a dict of registers and a bytearray of data).
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ipufs.model.executor.state import Status
from tests.model.executor.kit import assemble, load, m, make, memory_word, start

MASK = 0xFFFFFFFF
DATA = 0x60000  # 64 words of data, region 0
WORDS = 64
REGS = range(1, 8)


def s32(v: int) -> int:
    return v - (1 << 32) if v & 0x80000000 else v


def reference(ops: list[tuple], initial: list[int]) -> tuple[dict[int, int], bytearray]:
    regs = {r: 0 for r in range(16)}
    data = bytearray(b"".join(v.to_bytes(4, "little") for v in initial))
    for op in ops:
        name = op[0]
        if name == "setzi":
            regs[op[1]] = op[2]
        elif name in ("add", "sub", "and", "or", "xor", "mul", "cmpslt", "cmpult", "cmpeq"):
            x, y = regs[op[2]], regs[op[3]]
            regs[op[1]] = {
                "add": lambda: (x + y) & MASK, "sub": lambda: (x - y) & MASK, "and": lambda: x & y,
                "or": lambda: x | y, "xor": lambda: x ^ y, "mul": lambda: (x * y) & MASK,
                "cmpslt": lambda: int(s32(x) < s32(y)), "cmpult": lambda: int(x < y),
                "cmpeq": lambda: int(x == y)}[name]()
        elif name in ("shl", "shr", "shrs"):
            x, n = regs[op[2]], op[3]
            regs[op[1]] = {"shl": (x << n) & MASK, "shr": x >> n, "shrs": (s32(x) >> n) & MASK}[name]
        elif name == "addi":
            regs[op[1]] = (regs[op[2]] + op[3]) & MASK
        elif name == "st32":
            data[4 * op[2]:4 * op[2] + 4] = regs[op[1]].to_bytes(4, "little")
        elif name == "ld32":
            regs[op[1]] = int.from_bytes(data[4 * op[2]:4 * op[2] + 4], "little")
        elif name == "ldz8":
            regs[op[1]] = data[op[2]]
        elif name == "lds16":
            v = int.from_bytes(data[2 * op[2]:2 * op[2] + 2], "little")
            regs[op[1]] = (v - 0x10000 if v & 0x8000 else v) & MASK
        regs[15] = 0
    return regs, data


def source(op: tuple) -> str:
    name = op[0]
    if name == "setzi":
        return f"setzi $m{op[1]}, {op[2]}"
    if name in ("shl", "shr", "shrs", "addi"):
        return f"{'add' if name == 'addi' else name} $m{op[1]}, $m{op[2]}, {op[3]}"
    if name == "st32":
        return f"st32 $m{op[1]}, $m14, $m15, {op[2]}"
    if name in ("ld32", "ldz8", "lds16"):
        return f"{name} $m{op[1]}, $m14, $m15, {op[2]}"
    return f"{name} $m{op[1]}, $m{op[2]}, $m{op[3]}"


reg = st.sampled_from(list(REGS))
op = st.one_of(
    st.tuples(st.just("setzi"), reg, st.integers(0, 0xFFFFF)),
    st.tuples(st.sampled_from(["add", "sub", "and", "or", "xor", "mul", "cmpslt", "cmpult", "cmpeq"]), reg, reg, reg),
    st.tuples(st.sampled_from(["shl", "shr", "shrs"]), reg, reg, st.integers(0, 31)),
    st.tuples(st.just("addi"), reg, reg, st.integers(0, 0xFFFF)),
    st.tuples(st.just("st32"), reg, st.integers(0, WORDS - 1)),
    st.tuples(st.just("ld32"), reg, st.integers(0, WORDS - 1)),
    st.tuples(st.just("ldz8"), reg, st.integers(0, 4 * WORDS - 1)),
    st.tuples(st.just("lds16"), reg, st.integers(0, 2 * WORDS - 1)),
)
IPU = make()


@settings(max_examples=60, deadline=None)
@given(st.lists(op, min_size=1, max_size=40), st.lists(st.integers(0, MASK), min_size=WORDS, max_size=WORDS))
def test_random_programs_agree_with_the_reference(ops: list[tuple], initial: list[int]) -> None:
    IPU.reset()
    text = "\n".join([".text 0x40000", ".supervisor", "_start:", f"  setzi $m14, {DATA}"]
                     + ["  " + source(o) for o in ops] + ["  trap 0", f".data {DATA}"]
                     + [f"  .word {v}" for v in initial])
    program = assemble(text)
    load(IPU, program)
    start(IPU, program.entry)
    IPU.execution.run(10_000)
    assert IPU.execution.states[0].supervisor.status is Status.EXCEPTED  # the trap
    regs, data = reference(ops, initial)
    assert [m(IPU, 0, r) for r in REGS] == [regs[r] for r in REGS]
    assert [memory_word(IPU, 0, DATA + 4 * i) for i in range(WORDS)] == [
        int.from_bytes(data[4 * i:4 * i + 4], "little") for i in range(WORDS)]
