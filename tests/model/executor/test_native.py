# The native loop against the Python path: random programs (integer
# arithmetic, compares, shifts, the setzi family, loads and stores of every
# width with their faults, branches, brnzdec loops, delays, bundles,
# workers through run/runall/exit, rpt loops of bundles, f32 arithmetic and
# compares, CSRs through get/put/uget/uput, internal syncs) run on two IPUs, one with the native
# loop and one without, in the same random slices; afterwards every
# register, PC, status, wait, turn and instruction count, every byte of the
# tiles' memory, the stores recorded for page-cache mode, the exception
# registers and the program events must be the same.
from __future__ import annotations

import mmap
import random
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ipufs.model.executor import csr, native
from ipufs.model.executor.semantics import SEMANTICS
from ipufs.model.executor.state import Repeat, Status
from ipufs.model.ipu import Ipu
from ipufs.model.isa import Arch, Context, Kind, Lane, Row, encode_row
from ipufs.model.isa.csrs import csr_names
from ipufs.model.isa.rows import ROWS
from ipufs.model.memory import BarMemory
from ipufs.model.profile import PROFILES, Region
from tests.model.executor.kit import assemble, load, start
from tests.model.test_ipu import make, reg

#: code and data addresses every profile here has: code in region 0, data
#: in region 1 (ld128 may use it); on ipu1 they alias to 0x4c000 and 0x60000
CODE, DATA = 0x4C000, 0xA0000
WORDS = 64
R = st.integers(1, 9)  # the registers programs compute in
ALU = ["add", "sub", "mul", "max", "min", "and", "andc", "or", "xor", "xnor", "cmpeq", "cmpne", "cmpslt", "cmpult"]
SHIFTS = ["shl", "shr", "shrs"]
UNARY = ["abs", "clz", "cms", "popc", "bitrev8"]
M_LOADS = ["ld32", "lds16", "ldz16", "lds8", "ldz8"]
FP = ["add", "sub", "mul", "cmpeq", "cmpne", "cmplt", "cmple", "cmpgt", "cmpge"]
#: $FP_CTL values: exceptions enabled (INV, DIV0, OFLO), a rounding mode, stochastic rounding, NANOO
FP_CTLS = [0, 0, 1, 2, 4, 5, 7, 1 << 16, 1 << 19, 1 << 20, 1 << 20 | 4]


def _make(profile: str) -> Ipu:
    p = PROFILES[profile]

    def sparse(size: int) -> BarMemory:
        m = mmap.mmap(-1, size)
        return BarMemory(memoryview(m), discard=lambda at, n: m.madvise(mmap.MADV_REMOVE, at, n))

    return Ipu(p, 0, {r: sparse(p.region_size(r)) for r in Region})


@st.composite
def integer_op(draw: st.DrawFn) -> str:
    d, x = draw(R), draw(R)
    y = draw(st.one_of(st.just(x), R))  # equal operands often: the edges of compares, min, max
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return f"{draw(st.sampled_from(ALU))} $m{d}, $m{x}, $m{y}"
    if kind == 1:
        op = draw(st.sampled_from(["add", "mul", "cmpeq", "cmpslt", "max", "min"]))
        return f"{op} $m{d}, $m{x}, {draw(st.integers(-0x8000, 0x7FFF))}"
    if kind == 2:
        op = draw(st.sampled_from(["add", "and", "andc", "or", "cmpult", "cmpeq", "max", "min"]))
        return f"{op} $m{d}, $m{x}, {draw(st.integers(0, 0xFFF))}"
    if kind == 3:
        return f"sub $m{d}, {draw(st.integers(-0x8000, 0xFFFF))}, $m{x}"
    if kind == 4:  # shifts: by 32 and more fault
        amount = draw(st.one_of(st.integers(0, 31), st.integers(32, 40)))
        return f"{draw(st.sampled_from(SHIFTS))} $m{d}, $m{x}, {amount}"
    if kind == 5:
        return f"{draw(st.sampled_from(SHIFTS))} $m{d}, $m{x}, $m{y}"  # most register amounts fault
    if kind == 6:
        return f"{draw(st.sampled_from(UNARY))} $m{d}, $m{x}"
    if kind == 7:
        return f"setzi $m{d}, {draw(st.one_of(st.integers(0, 3), st.integers(0, 0xFFFFF)))}"
    if kind == 8:
        return f"or $m{d}, $m{x}, {draw(st.integers(0, 0xFFF)) << 20}"
    return f"and $m9, $m{x}, {draw(st.sampled_from([0x3F, 0x3C, 0x38, 0x1FF]))}"  # an offset for what follows


@st.composite
def memory_op(draw: st.DrawFn, base: int, worker: bool) -> str:
    """Loads and stores at base register ``base`` (the data), with the
    offset register $m9 (often misaligned) and step register $m8."""
    d, x = draw(R), draw(R)
    k = draw(st.integers(0, 15))
    stride = draw(st.integers(-3, 3))
    kind = draw(st.integers(0, 9 if worker else 5))
    if kind == 0:
        return f"{draw(st.sampled_from(M_LOADS))} $m{d}, $m{base}, $m{draw(st.sampled_from([9, 15]))}, {k}"
    if kind == 1:
        return f"{draw(st.sampled_from(M_LOADS))} $m{d}, $m{base}, $m9, $m{x}"
    if kind == 2:
        return f"{draw(st.sampled_from(M_LOADS))}step $m{d}, $m{base}, $m8+=, {stride}"
    if kind == 3:
        return f"st32 $m{x}, $m{base}, $m{draw(st.sampled_from([9, 15]))}, {k}"
    if kind == 4:
        return f"st32step $m{x}, $m{base}, $m8+=, {stride}"
    if kind == 5:
        return f"stm32 $m{x}, $m{base}, $m9"
    a = draw(st.integers(0, 7)) * 2
    load = draw(st.sampled_from([("ld32", f"$a{a}"), ("ld64", f"$a{a}:{a + 1}"), ("ldb16", f"$a{a}"),
                                 ("ld128", f"$a{a & 12}:{(a & 12) + 3}")]))
    store = draw(st.sampled_from([("st32", f"$a{a}"), ("st64", f"$a{a}:{a + 1}")]))
    if kind == 6:
        return f"{load[0]} {load[1]}, $m{base}, $m{draw(st.sampled_from([9, 15]))}, {k}"
    if kind == 7:
        name = draw(st.sampled_from([load, store]))
        return f"{name[0]}step {name[1]}, $m{base}, $m8+=, {stride}"
    if kind == 8:
        return f"{store[0]} {store[1]}, $m{base}, $m{draw(st.sampled_from([9, 15]))}, {k}"
    return f"{load[0]} {load[1]}, $m{base}, $m9, $m{x}"


@st.composite
def aux_op(draw: st.DrawFn, bundled: bool = False) -> str:
    d, x, y = (draw(st.integers(0, 15)) for _ in range(3))
    kind = draw(st.integers(0, 4 if bundled else 5))
    if kind == 0:
        return f"{draw(st.sampled_from(['and', 'andc', 'or']))} $a{d}, $a{x}, $a{y}"
    if kind == 1:
        return f"{draw(st.sampled_from(['and', 'andc', 'or']))} $a{d}, $a{x}, {draw(st.integers(0, 0xFFF))}"
    if kind == 2:
        return f"not $a{d}, $a{x}"
    if kind == 3:
        p, q, r = (draw(st.integers(0, 7)) * 2 for _ in range(3))
        return f"{draw(st.sampled_from(['and64', 'andc64', 'or64']))} $a{p}:{p + 1}, $a{q}:{q + 1}, $a{r}:{r + 1}"
    if kind == 4:
        return f"setzi $a{d}, {draw(st.integers(0, 0xFFFFF))}"
    return f"atom $m{draw(R)}, $a{x}"


@st.composite
def fp_op(draw: st.DrawFn) -> str:
    """f32 scalars, pairs and pairs with a broadcast first source."""
    d, x, y = (draw(st.integers(0, 15)) for _ in range(3))
    op = draw(st.sampled_from(FP))
    p, q, r = (draw(st.integers(0, 7)) * 2 for _ in range(3))
    return draw(st.sampled_from([f"f32{op} $a{d}, $a{x}, $a{y}",
                                 f"f32v2{op} $a{p}:{p + 1}, $a{q}:{q + 1}, $a{r}:{r + 1}",
                                 f"f32v2{op} $a{p}:{p + 1}, $a{x}:B, $a{r}:{r + 1}"]))


@st.composite
def csr_op(draw: st.DrawFn, worker: bool) -> list[str]:
    """get/put of the context's CSRs (now and then an index it lacks), and
    on workers uget/uput of the upper space, $FP_CTL most often."""
    r = draw(R)
    space = draw(st.integers(0, 2 if worker else 1))
    names = sorted(csr_names(not worker, space == 2, Arch.IPU1))
    index = draw(st.one_of(st.sampled_from(names), st.sampled_from(names), st.sampled_from(names),
                           st.integers(0, 255)))
    if space == 0:
        return [f"get $m{r}, {index}"]
    if space == 1:
        if not worker and draw(st.booleans()):  # $FP_ICTL: what workers start with
            return [f"setzi $m{r}, {draw(st.sampled_from(FP_CTLS)) & 0xFFFFF}", f"put 0x20, $m{r}"]
        return [f"put {index}, $m{r}"]
    a = draw(st.integers(0, 14))
    if draw(st.booleans()):
        return [f"uget $a{a}, {index}"]
    if draw(st.booleans()):
        return [f"setzi $a{a}, {draw(st.sampled_from(FP_CTLS)) & 0xFFFFF}", f"uput 2, $a{a}"]
    return [f"uput {index}, $a{a}"]


@st.composite
def rpt_loop(draw: st.DrawFn) -> list[str]:
    """An rpt of bundles (integer or memory main halves, $a logic or f32
    aux halves), its count immediate or from a register (the assembler
    refuses other bodies; the edge test runs solo instructions in one)."""
    n = draw(st.integers(1, 3))
    mains = st.one_of(integer_op(), st.sampled_from(["ld32step $m3, $m13, $m8+=, 1", "st32step $m2, $m13, $m8+=, 1",
                                                     "ld32 $m4, $m13, $m9, 1"]))
    bundles = [f"{{ {draw(mains)} ; {draw(st.one_of(aux_op(True), fp_op()))} }}" for _ in range(n)]
    size = n - 1
    count = draw(st.one_of(st.integers(0, 6), st.just(f"$m{draw(R)}")))
    return [".align 8", draw(integer_op()), f"rpt {count}, {size}", *bundles]


class Program:
    """Labels for the blocks of one random program."""

    def __init__(self) -> None:
        self.n = 0

    def label(self, what: str) -> str:
        self.n += 1
        return f"{what}{self.n}"


@st.composite
def block(draw: st.DrawFn, p: Program, base: int, worker: bool, depth: int = 0) -> list[str]:
    ops = [integer_op(), memory_op(base, worker)] + ([aux_op(), fp_op()] if worker else [])
    straight = st.lists(st.one_of(*ops), min_size=1, max_size=4)
    kind = draw(st.integers(0, 11 if depth < 2 else 4))
    if kind <= 4:
        return draw(straight)
    if kind == 10:
        return draw(csr_op(worker))
    if kind == 11:
        return draw(rpt_loop()) if worker else draw(csr_op(worker))
    if kind == 5:  # a forward branch over a block
        skip = p.label("skip")
        test = draw(st.sampled_from(["brz", "brnz", "brneg", "brpos"]))
        return [f"{test} $m{draw(R)}, {skip}", *draw(block(p, base, worker, depth + 1)), f"{skip}:"]
    if kind == 6:  # a brnzdec loop
        top = p.label("loop")
        counter = 10 + depth
        return [f"setzi $m{counter}, {draw(st.integers(0, 4))}", f"{top}:",
                *draw(block(p, base, worker, depth + 1)), f"brnzdec $m{counter}, {top}"]
    if kind == 7:  # a bundle (Python's turn)
        return [".align 8", f"{{ {draw(integer_op())} ; {draw(aux_op(True))} }}"] if worker else draw(straight)
    if kind == 8:  # through a register, or a delay
        if worker:
            there = p.label("there")
            return [f"setzi $m12, {there}", "br $m12", *draw(straight), f"{there}:"]
        return [f"delay {draw(st.integers(0, 5))}"]
    return [f"bri {(there := p.label('on'))}", *draw(straight), f"{there}:"]


@st.composite
def program(draw: st.DrawFn) -> str:
    p = Program()
    sup: list[str] = [f"setzi $m14, {DATA}", "setzi $m8, 0"]
    workers: list[str] = []
    for _ in range(draw(st.integers(1, 6))):
        sup += draw(block(p, 14, False))
        if draw(st.integers(0, 3)) == 0:
            sup += ["sync 3"]  # every running tile
        if draw(st.integers(0, 2)) == 0:  # start workers
            entry = p.label("worker")
            body = ["setzi $m8, 0"]
            for _ in range(draw(st.integers(1, 3))):
                body += draw(block(p, 13, True))
            end = draw(st.sampled_from(["exitz", "exitnz", "exitneg", "exitpos"]))
            workers += [".align 8", f"{entry}:", *body, f"{end} $m{draw(R)}"]
            sup += [f"setzi $m0, {entry}", f"setzi $m1, {DATA + 4 * draw(st.integers(0, 8))}"]
            if draw(st.booleans()):
                sup += [f"runall $m0, $m1, {draw(st.integers(0, 2))}"]
            else:
                sup += [f"run $m0, $m1, {draw(st.integers(0, 4))}"]
            if draw(st.booleans()):
                sup += ["sync 2"]
    return "\n".join([f".text {CODE}", ".supervisor", "_start:", *sup, "trap 0", ".worker", *workers])


#: one IPU of each profile with the native loop and one without, reset for each example
_IPUS: dict[tuple[str, bool], Ipu] = {}


def _run(profile: str, source: str, data: list[bytes], slices: list[int], use_native: bool,
         fresh: bool = False) -> Ipu:
    ipu = None if fresh else _IPUS.get((profile, use_native))
    if ipu is None:
        ipu = _make(profile)
        if not fresh:
            _IPUS[profile, use_native] = ipu
        _record_exceptions(ipu)
        ipu.execution.native = use_native
        ipu.tiles.exchange.track_dirty = True
    _load_and_run(ipu, source, data, slices)
    return ipu


def _load_and_run(ipu: Ipu, source: str, data: list[bytes], slices: list[int]) -> None:
    """Reset ``ipu``, load ``source`` and ``data`` onto a tile each, start
    them and run them in the ``slices`` budgets."""
    ipu.reset()
    RAISED[id(ipu)].clear()
    prog = assemble(source)
    tiles = tuple(range(len(data)))
    load(ipu, prog, tiles)
    for tile, words in enumerate(data):
        for at in range(0, len(words), 4):
            ipu.tiles.write(tile, DATA + at, words[at:at + 4])
    ipu.tiles.exchange.take_dirty()
    start(ipu, prog.entry, tiles)
    for budget in slices:
        ipu.execution.run(budget)


#: each IPU's exceptions as raised (cause, tile, address, context), oldest first
RAISED: dict[int, list[tuple[int, int, int, int]]] = {}


def _record_exceptions(ipu: Ipu) -> None:
    raised = RAISED[id(ipu)] = []
    original = ipu.raise_exception

    def record(cause: int, tile: int, address: int, context: int) -> None:
        raised.append((cause, tile, address, context))
        original(cause, tile, address, context)

    ipu.raise_exception = record  # type: ignore[method-assign]


def _same(a: Ipu, b: Ipu, tiles: int) -> None:
    ea, eb = a.execution, b.execution
    # The tiles with state now: a tile's rows of the arrays are zeroed when
    # its state is made, so rows of tiles an earlier program on this IPU
    # used and this one did not are nobody's.
    used = sorted(set(range(tiles)) | set(ea.states) | set(eb.states))
    assert np.array_equal(ea.arrays.counters[used], eb.arrays.counters[used]), "turns, instruction counts, turn order"
    assert np.array_equal(ea.arrays.fields[used], eb.arrays.fields[used]), "PC, status, wait, delay"
    assert np.array_equal(ea.arrays.registers[used], eb.arrays.registers[used]), "registers"
    assert np.array_equal(ea.arrays.csrs[used], eb.arrays.csrs[used]), "CSRs"
    window = a.tiles.window
    assert a.tiles.exchange.bytes[:tiles * window].tobytes() == b.tiles.exchange.bytes[:tiles * window].tobytes()
    assert a.tiles.exchange.take_dirty() == b.tiles.exchange.take_dirty()
    assert ea.instructions == eb.instructions
    assert list(ea.events) == list(eb.events)
    assert RAISED[id(a)] == RAISED[id(b)]
    assert ea._cursor == eb._cursor  # the next call starts at the same tile
    assert ea.running == eb.running
    for tile, t in ea.states.items():
        u = eb.states[tile]
        assert (t.link, t.count_offset) == (u.link, u.count_offset)
        for c, d in zip(t.contexts, u.contexts):
            assert (c.sr, c.csrs, c.upper, c.exit_status, c.wait_zone, c.repeat) == (
                d.sr, d.csrs, d.upper, d.exit_status, d.wait_zone, d.repeat)
    for name in ("EXC_CAUSE", "EXC_TILE", "EXC_ADDRESS", "EXC_CONTEXT"):
        assert reg(a, name) == reg(b, name), name


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program(), st.sampled_from(["ipu1", "ipu2"]),
       st.lists(st.binary(min_size=4 * WORDS, max_size=4 * WORDS), min_size=1, max_size=3),
       st.lists(st.integers(1, 400), min_size=1, max_size=6))
def test_random_programs_run_the_same_native_and_in_python(source: str, profile: str, data: list[bytes],
                                                           slices: list[int]) -> None:
    on = _run(profile, source, data, slices, True)
    off = _run(profile, source, data, slices, False)
    _same(on, off, len(data))


def _finish(ipu: Ipu, slices: list[int], calls: int = 20_000) -> bool:
    """Run in calls of the ``slices`` budgets, in turn, until no context
    can run; whether that came within ``calls`` calls."""
    for i in range(calls):
        ipu.execution.run(slices[i % len(slices)])
        if not ipu.execution.busy():
            return True
    return False


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program(), st.sampled_from(["ipu1", "ipu2"]),
       st.lists(st.binary(min_size=4 * WORDS, max_size=4 * WORDS), min_size=1, max_size=3),
       st.lists(st.integers(1, 60), min_size=1, max_size=6), st.booleans())
def test_random_programs_end_the_same_whatever_the_slices(source: str, profile: str, data: list[bytes],
                                                           slices: list[int], use_native: bool) -> None:
    # Execution.run's promise: each tile's results and turns do not depend
    # on the budgets it was run in. Which tile excepted first may: that is
    # the IPU's, not a tile's.
    whole = _run(profile, source, data, [], use_native)
    assume(_finish(whole, [1_000_000], calls=2))
    sliced = _run(profile, source, data, [], use_native, fresh=True)
    assert _finish(sliced, slices)
    a, b = whole.execution, sliced.execution
    tiles = len(data)
    for name in ("counters", "fields", "registers", "csrs"):
        assert np.array_equal(getattr(a.arrays, name)[:tiles], getattr(b.arrays, name)[:tiles]), name
    window = whole.tiles.window
    assert whole.tiles.exchange.bytes[:tiles * window].tobytes() == sliced.tiles.exchange.bytes[:tiles * window].tobytes()
    assert sorted(RAISED[id(whole)]) == sorted(RAISED[id(sliced)])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program(), program(), st.sampled_from(["ipu1", "ipu2"]),
       st.lists(st.binary(min_size=4 * WORDS, max_size=4 * WORDS), min_size=1, max_size=3),
       st.lists(st.integers(1, 400), min_size=1, max_size=4), st.lists(st.integers(1, 400), min_size=1, max_size=4),
       st.booleans())
def test_a_reset_leaves_nothing_of_the_program_before(before: str, source: str, profile: str, data: list[bytes],
                                                       first: list[int], slices: list[int], use_native: bool) -> None:
    # Whatever ran before, stopped anywhere: after a reset the next program
    # runs as on a new IPU, to every register, counter and exception.
    used = _run(profile, before, data, first, use_native, fresh=True)
    _load_and_run(used, source, data, slices)
    new = _run(profile, source, data, slices, use_native, fresh=True)
    _same(used, new, len(data))


def test_a_run_ends_its_grace_after_the_flag_is_set_and_the_results_stay() -> None:
    source = ".text 0x40000\n.supervisor\n_start:\n  setzi $m1, 30000\nloop:\n  brnzdec $m1, loop\n  trap 0\n"
    data = [bytes(4 * WORDS)] * 3
    stopped = _run("ipu1", source, data, [], True, fresh=True)
    flag = bytearray(1)
    stopped.execution.stop_when(flag, grace=100)
    assert stopped.execution.run(20_000) == 20_000  # not set: the whole budget
    flag[0] = 1
    taken = stopped.execution.run(20_000)
    # set: the grace, counted at the next look at the flag, then it ends
    assert 0 < taken <= 100 + native.CHECK_TURNS + native.TILE_TURNS
    flag[0] = 0
    assert _finish(stopped, [20_000])
    whole = _run("ipu1", source, data, [], True, fresh=True)
    assert _finish(whole, [1_000_000])
    for name in ("counters", "fields", "registers", "csrs"):
        assert np.array_equal(getattr(stopped.execution.arrays, name)[:3], getattr(whole.execution.arrays, name)[:3])


#: register values at the edges of every operation, and addresses near the data
EDGES = [0, 1, 2, 3, 4, 5, 8, 16, 31, 32, 33, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFF8,
         DATA, DATA + 1, DATA + 2, DATA + 4, DATA + 8, DATA + 16, 0x40000, 0x20000, 0x1FFFF0,
         # f32: ±1, the largest, the smallest normal, a subnormal, ±infinity, NaN, 2**127 (products
         # overflow), 2**-64 (products fall below the normals), 2**23, 1.5
         0x3F800000, 0xBF800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x00800000, 0x80800000, 0x00400000, 0x7F800000,
         0xFF800000, 0x7FC00000, 0x7F000000, 0x1F800000, 0x4B000000, 0x3FC00000]
NATIVE_ROWS = sorted((r for r in ROWS if r.variant in SEMANTICS and SEMANTICS[r.variant].native),
                     key=lambda r: r.variant)
#: halves of bundles: co-issuable main- and aux-lane rows a worker may run
MAIN_HALVES = [r for r in NATIVE_ROWS if r.co_issuable and r.lane is Lane.MAIN and r.context & Context.WORKER]
AUX_HALVES = [r for r in NATIVE_ROWS if r.co_issuable and r.lane is Lane.AUX and r.context & Context.WORKER]


@st.composite
def operand_value(draw: st.DrawFn, kind: Kind, width: int) -> int:
    if kind in (Kind.MRF, Kind.ARF):
        return draw(st.integers(0, 15))
    if kind is Kind.ARF_PAIR:
        return draw(st.integers(0, 7)) * 2
    if kind is Kind.ARF_QUAD:
        return draw(st.integers(0, 3)) * 4
    if kind is Kind.MRF_PAIR:
        return draw(st.integers(0, 5)) * 2
    if kind is Kind.SEXT:
        edge = st.sampled_from([0, 1, -1, 2, -2, 3])
        return draw(st.one_of(edge, st.integers(-(1 << (width - 1)), (1 << (width - 1)) - 1)))
    if kind is Kind.TOP12:
        return draw(st.integers(0, 0xFFF)) << 20
    if kind in (Kind.CSR, Kind.UPPER_CSR):  # mostly registers a context has
        names = {i for sup in (True, False) for i in csr_names(sup, kind is Kind.UPPER_CSR, Arch.IPU1)}
        return draw(st.one_of(st.sampled_from(sorted(names)), st.integers(0, (1 << width) - 1)))
    if kind is Kind.TARGET:
        targets = st.integers(0, (1 << width) - 1).map(lambda v: 4 * v)
        return draw(st.one_of(st.sampled_from([0x40000, 0x40008]), targets))
    edges = [v for v in (0, 1, 2, 3, 31, 32) if v < 1 << width]
    return draw(st.one_of(st.sampled_from(edges), st.integers(0, (1 << width) - 1)))


_EDGE_ARRAY = np.array(EDGES, dtype=np.uint32)
#: what the data words hold when a turn starts
_TURN_DATA = np.array([0x01010101 * i ^ 0x80FF7F00 for i in range(WORDS)], dtype=np.uint32)

#: a seed of _one_turn whose draws leave context 1 with $FP_CTL 0, every
#: $FP_STS 0 and no rpt running
PLAIN_SEED = 32


def _one_turn(ipu: Ipu, words: list[int], context: int, registers: list[int], pick: random.Random) -> None:
    ex = ipu.execution
    t = ex.state(0)
    c = t.contexts[context]
    # CSRs, $FP_CTL/$FP_STS, the other contexts' status, a running rpt
    # and the exits' Boolean at edges too (for get/put, run/runall, rpt
    # bodies and f32 flags). Each CSR is an edge value or 0, even odds,
    # drawn by numpy from one seed of ``pick``: drawn one at a time, they
    # were a third of the time of every test here that runs one turn.
    draw = np.random.default_rng(pick.getrandbits(64))
    shape = (len(t.contexts), native.CSRS)
    ex.arrays.csrs[0] = np.where(draw.random(shape) < 0.5, _EDGE_ARRAY[draw.integers(len(EDGES), size=shape)], 0)
    idle = pick.random() < 0.5  # every other context inactive (runall may start them)
    for other in t.contexts:
        other.upper[2] = pick.choice(FP_CTLS)
        other.upper[0] = pick.choice([0, 0, pick.randrange(8)])  # $FP_STS: mostly clear, so new flags show
        other.status = Status.INACTIVE if idle else pick.choice([Status.INACTIVE, Status.ACTIVE, Status.EXCEPTED])
    if pick.random() < 0.3:
        first = pick.choice([0x40000, 0x40008, 0x3FFF8])
        c.repeat = Repeat(first, first + 8 * pick.randrange(1, 3), pick.randrange(3))
    t.link = pick.randrange(2)
    t.count_offset = pick.choice([0, 5, -3, 1 << 32, (1 << 32) - 1])
    for i, word in enumerate(words):
        ipu.tiles.write(0, 0x40000 + 4 * i, word.to_bytes(4, "little"))
    ipu.tiles.write_words(0, DATA, _TURN_DATA)
    ex.arrays.registers[0, context] = registers
    ex.arrays.registers[0, context, 15] = ex.arrays.registers[0, context, 31] = 0  # $m15 and $a15 read 0
    c.pc = 0x40000
    c.status = Status.ACTIVE
    t.turn = context
    ex.running.add(0)
    ipu.tiles.exchange.take_dirty()
    ex.run(1)


@settings(max_examples=800, deadline=None)
@given(st.one_of(st.tuples(st.sampled_from(NATIVE_ROWS)),
                 st.tuples(st.sampled_from(MAIN_HALVES), st.sampled_from(AUX_HALVES))), st.data())
def test_every_native_instruction_agrees_with_python_at_the_edges(rows: tuple[Row, ...], data: st.DataObject) -> None:
    """Each encoding the native loop executes, alone or as half of a
    bundle, once, with operands and register values drawn from the edges:
    the same state after the turn (results, faults handed to Python, PC,
    counts, memory)."""
    words = [encode_row(row, [data.draw(operand_value(op.kind, op.width)) for op in row.operands], len(rows) == 2)
             for row in rows]
    row = rows[0]
    workers_only = len(rows) == 2 or not row.context & Context.SUPERVISOR
    context = data.draw(st.integers(1, 6)) if workers_only else data.draw(st.sampled_from([0, 1]))
    if context == 1 and not row.context & Context.WORKER:
        context = 0
    seed = data.draw(st.integers(0, 1 << 32))
    pick = random.Random(seed)
    registers = [pick.choice(EDGES) if pick.random() < 0.7 else pick.getrandbits(32) for _ in range(native.REGISTERS)]
    _one_turn_both_ways(words, context, registers, seed)


#: the forms that start and stop workers, repeat, and compute in f32, and
#: bundles whose aux half is f32: many more turns each than above
FOCUS_ROWS = [r for r in NATIVE_ROWS if SEMANTICS[r.variant].native.partition(".")[0] in
              ("run", "runall", "exit", "rptm", "rpti", "f32", "f32v2", "f32v2b")]
F32_EDGES = [v for v in EDGES if v >> 23 & 0xFF] + [0, 0x80000000, 0x3F800001, 0x20800000] + [
    0x7F7FFFFF, 0xFF7FFFFF, 0x7F000000, 0x7E800000]  # large ones twice: products and sums overflow


@settings(max_examples=600, deadline=None)
@given(st.one_of(st.tuples(st.sampled_from(FOCUS_ROWS)),
                 st.tuples(st.sampled_from(MAIN_HALVES), st.sampled_from([r for r in AUX_HALVES if r in FOCUS_ROWS]))),
       st.data())
def test_workers_rpt_and_f32_agree_with_python_at_the_edges(rows: tuple[Row, ...], data: st.DataObject) -> None:
    """run, runall, the exits, rpt and f32 (alone, and as the aux half of
    a bundle), with $a holding f32 values from the edges (largest,
    smallest normals, their products' overflow and underflow, NaN,
    infinities, zeros) and $FP_CTL enabling exceptions, rounding modes,
    NANOO."""
    words = [encode_row(row, [data.draw(operand_value(op.kind, op.width)) for op in row.operands], len(rows) == 2)
             for row in rows]
    context = data.draw(st.integers(0, 6)) if rows[0].context & Context.SUPERVISOR else data.draw(st.integers(1, 6))
    seed = data.draw(st.integers(0, 1 << 32))
    pick = random.Random(seed)
    registers = [pick.choice(EDGES) for _ in range(16)] + [pick.choice(F32_EDGES) for _ in range(16)]
    _one_turn_both_ways(words, context, registers, seed)


def _one_turn_both_ways(words: list[int], context: int, registers: list[int], seed: int, turns: int = 0) -> None:
    """_one_turn on an ipu1 with the native loop and one without, after
    ``turns`` turns of the tile's clock; the same state afterwards."""
    ipus = []
    for use_native in (True, False):
        ipu = _IPUS.get(("edge", use_native))
        if ipu is None:
            ipu = _IPUS["edge", use_native] = _make("ipu1")
            ipu.execution.native = use_native
            ipu.tiles.exchange.track_dirty = True
            _record_exceptions(ipu)
        ipu.reset()
        RAISED[id(ipu)].clear()
        ipu.execution.state(0).turns = turns
        _one_turn(ipu, words, context, registers, random.Random(seed))
        ipus.append(ipu)
    _same(ipus[0], ipus[1], 1)


_CSR_ROWS = {r.variant: r for r in NATIVE_ROWS if r.mnemonic in ("get", "put", "uget", "uput")}


@pytest.mark.parametrize("variant", sorted(_CSR_ROWS))
def test_every_csr_access_agrees_with_python(variant: str) -> None:
    """get, put, uget and uput of every index, on the supervisor and on a
    worker, after some turns and with a running rpt (what $SCOUNT, $COUNT
    and $REPEAT_* read), at register and CSR values from the edges."""
    row = _CSR_ROWS[variant]
    pick = random.Random(variant)
    for index in range(256):
        for context in (0, 3):
            if not row.context & (Context.WORKER if context else Context.SUPERVISOR):
                continue
            register = pick.randrange(1, 15)
            csr_first = row.operands[0].kind in (Kind.CSR, Kind.UPPER_CSR)
            word = encode_row(row, [index, register] if csr_first else [register, index], False)
            registers = [pick.choice(EDGES) for _ in range(native.REGISTERS)]
            _one_turn_both_ways([word], context, registers, pick.randrange(1 << 32), 1000 + index)


def test_the_native_loop_takes_the_turns_it_can() -> None:
    """The comparison above is between two paths: the native loop retires
    the loop's instructions itself, and hands back only what it lacks."""
    source = "\n".join([".text 0x40000", ".supervisor", "_start:", "setzi $m14, 0x60000", "setzi $m1, 100", "loop:",
                        "add $m2, $m2, $m1", "st32 $m2, $m14, $m15, 0", "brnzdec $m1, loop", "trap 0"])
    ipu = _run("ipu1", source, [bytes(4 * WORDS)], [10_000], True, fresh=True)
    assert ipu.execution.instructions == 2 + 3 * 101
    loop = ipu.execution._loop
    assert loop is not None and loop.retired == 2 + 3 * 101  # every one (the trap faults: Python's turn)
    kernel = "\n".join([".text 0x40000", ".supervisor", "_start:", "setzi $m0, worker", "setzi $m1, 0x60000",
                         "put 0x20, $m15", "runall $m0, $m1, 0", "sync 2", "get $m2, 0x01", "trap 0",
                         ".worker", ".align 8", "worker:", "ld32 $a0, $m13, $m15, 0", "rpt 10, 1",
                         "{ add $m2, $m2, 1 ; f32add $a1, $a1, $a0 }",
                         "{ ld32 $m4, $m13, $m15, 0 ; f32mul $a2, $a0, $a0 }",
                         "uget $a3, 0", "exitz $m15"])
    ipu = _run("ipu1", kernel, [struct.pack("<f", 1.0) + bytes(4 * WORDS - 4)], [10_000], True, fresh=True)
    ex = ipu.execution  # runall, sync 2, get, rpt and its bundles, f32, uget, exitz: all native (the trap faults)
    assert ex._loop is not None and ex._loop.retired == ex.instructions == 6 + 6 * (2 + 10 * 4 + 2)
    for worker in ex.state(0).contexts[1:]:
        assert (worker.m[2], worker.a[1], worker.a[2], worker.exit_status) == (10, 0x41200000, 0x3F800000, 1)
    assert ex.state(0).supervisor.m[2] == 1  # $SSR.LC: every worker exited with 1


def test_an_f32_aux_half_flags_overflow_in_the_native_loop() -> None:
    """A bundle's aux half runs on copies first (executor.c, issue): its
    $FP_STS flag must still land, beside the main half's result."""
    program = assemble("\n".join([".text 0x40000", ".worker", ".align 8",
                                   "{ add $m1, $m1, $m2 ; f32mul $a0, $a1, $a2 }"]))
    data = bytes(program.sections[0].data)
    words = [int.from_bytes(data[i:i + 4], "little") for i in (0, 4)]
    registers = [0, 5, 7] + [0] * 14 + [0x7F000000, 0x7F000000] + [0] * 13
    edge = _IPUS.get(("edge", True))
    before = edge.execution._loop.retired if edge is not None and edge.execution._loop is not None else 0
    _one_turn_both_ways(words, 1, registers, PLAIN_SEED)
    ex = _IPUS["edge", True].execution
    worker = ex.state(0).contexts[1]
    assert (worker.m[1], worker.a[0], worker.upper[0]) == (12, 0x7F800000, 4)  # +infinity, OFLO
    assert ex._loop is not None and ex._loop.retired - before == ex.instructions == 2


def test_every_native_form_a_rule_names_is_the_c_loops() -> None:
    named = {rule.native for rule in SEMANTICS.values() if rule.native}
    assert len(named) > 60
    for name in named:
        native.code(name)  # raises for a form or kind the C loop lacks
    with pytest.raises(ValueError):
        native.code("mrr.frobnicate")


def test_the_loop_refuses_a_csr_table_that_would_reach_past_a_contexts_csrs() -> None:
    ipu = make()
    ex = ipu.execution
    table = csr.native_ops(ex.arch)
    native.Loop(ex.arrays, ipu.tiles.exchange, ipu.tiles.exchange_base, ipu.tiles.window, ipu.tiles.sram, ex.memory_base, table)
    for access, index, op in ((native.UPUT, native.CSRS - native.UPPER, "plain"),
                              (native.UGET, 0xFF, "plain"), (native.GET, 0, "?")):
        bad = table.copy()
        bad[1, access, index] = native.CSR_OPS.get(op, len(native.CSR_OPS))
        with pytest.raises(ValueError, match="CSR table"):
            native.Loop(ex.arrays, ipu.tiles.exchange, ipu.tiles.exchange_base, ipu.tiles.window, ipu.tiles.sram, ex.memory_base, bad)
