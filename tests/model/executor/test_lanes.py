# The native loop's passes spread over threads, its code slots and its
# decode caches, against the Python path: random programs on several tiles
# with every pass on the threads; code that rewrites itself while a host
# writes into it (through the model, or into the memory as a mapping
# would, unseen); different code at the same addresses of different tiles;
# resets in between. Afterwards every register, counter, memory byte,
# recorded store, event and exception must be the same. A program's new
# words, which every tile of a pass on the threads meets, are decoded
# once. And the decode caches stay within their bounds whatever code
# writes, and empty after a reset.
from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ipufs.model.executor import native
from ipufs.model.ipu import Ipu
from tests.model.executor.kit import assemble, load, start, word
from tests.model.executor.test_native import DATA, RAISED, WORDS, _make, _record_exceptions, _same, program

#: where the self-rewriting programs keep the word they rewrite, and their loop
PATCH, CODE = 0x4C800, 0x4C000
#: the words they rewrite it from: add $m2, $m2, imm; setzi $m3, imm; or $m4, $m4, imm; xor $m5, $m5, $m6
TEMPLATES = [word("add_mmmn_si", 2, 2, 0), word("setzi_mmmn_zi", 3, 0), word("or_mmmn_zi", 4, 4, 0),
             word("xor_mmmn", 5, 5, 6)]


def _ipu(profile: str, how: str, track_dirty: bool = True) -> Ipu:
    """An IPU running on the threads (``how`` "spread": every pass that
    may, on at least two), in the native loop one tile at a time
    ("native"), or on the Python path ("python")."""
    ipu = _make(profile)
    _record_exceptions(ipu)
    ipu.tiles.exchange.track_dirty = track_dirty
    ex = ipu.execution
    ex.native = how != "python"
    before = os.environ.get(native.THREADS)
    os.environ[native.THREADS] = "4"
    try:
        loop = ex._the_loop()
    finally:
        if before is None:
            del os.environ[native.THREADS]
        else:
            os.environ[native.THREADS] = before
    loop.parallel_turns = 1 if how == "spread" else 0
    return ipu


def _start(ipu: Ipu, sources: list[str], data: list[bytes]) -> None:
    """Reset, load source i and data i onto tile i, start them all."""
    ipu.reset()
    RAISED[id(ipu)].clear()
    programs = [assemble(s) for s in sources]
    for tile, prog in enumerate(programs):
        load(ipu, prog, (tile,))
        for at in range(0, len(data[tile]), 4):
            ipu.tiles.write(tile, DATA + at, data[tile][at:at + 4])
    ipu.tiles.exchange.take_dirty()
    for tile, prog in enumerate(programs):
        start(ipu, prog.entry, (tile,))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program(), st.sampled_from(["ipu1", "ipu2"]),
       st.lists(st.binary(min_size=4 * WORDS, max_size=4 * WORDS), min_size=2, max_size=6),
       st.lists(st.integers(32, 3000), min_size=1, max_size=6), st.booleans())
def test_random_programs_run_the_same_on_threads_and_in_python(source: str, profile: str, data: list[bytes],
                                                               slices: list[int], track_dirty: bool) -> None:
    ipus = [_ipu(profile, how, track_dirty) for how in ("spread", "python")]
    for ipu in ipus:
        _start(ipu, [source] * len(data), data)
        for budget in slices:
            ipu.execution.run(budget)
    _same(ipus[0], ipus[1], len(data))


def _rewriting(template: int, step: int, count: int, seed: int) -> str:
    """A supervisor that, ``count`` times, adds ``step`` to a word (first
    ``template``), stores it at PATCH and runs it there (the `bri` after
    it comes back)."""
    low, high = template & 0xFFFFF, template >> 20
    return "\n".join([
        f".text {CODE:#x}", ".supervisor", "_start:",
        f"  setzi $m10, {PATCH:#x}", f"  setzi $m11, {low:#x}", f"  or $m11, $m11, {high << 20:#x}",
        f"  setzi $m6, {seed & 0xFFFFF:#x}", f"  setzi $m1, {count}",
        "loop:", f"  add $m11, $m11, {step}", "  st32 $m11, $m10, $m15, 0", "  bri patch", "back:",
        "  brnzdec $m1, loop", "  trap 0",
        ".balign 0x800", "patch:", "  setzi $m9, 0", "  bri back"])  # at PATCH


@st.composite
def host_writes(draw: st.DrawFn, tiles: int) -> list[tuple[int, int, int, bool]]:
    """Before each run call: a word a host writes into a tile's PATCH
    (tile, slice index, word), through the model or unseen."""
    return draw(st.lists(st.tuples(st.integers(0, tiles - 1), st.integers(0, 7),
                                   st.sampled_from(TEMPLATES + [0x7FFFFFFF, word("bri_mmmn_zi", 0x4C818)]),
                                   st.booleans()), max_size=6))


def _host_write(ipu: Ipu, tile: int, value: int, unseen: bool) -> None:
    data = value.to_bytes(4, "little")
    if unseen:  # a store into the host's mapping: nothing in the model hears of it
        at = ipu.tiles.window_start(tile) + ipu.tiles.locate(PATCH).offset
        ipu.tiles.exchange.bytes[at:at + 4] = np.frombuffer(data, np.uint8)
    else:  # a pwrite, a TDI memory write: through the model
        ipu.tiles.write(tile, PATCH, data)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(st.tuples(st.sampled_from(TEMPLATES), st.integers(1, 0x1000), st.integers(1, 300),
                          st.integers(0, 1 << 20)), min_size=1, max_size=4),
       st.sampled_from(["ipu1", "ipu2"]), st.lists(st.integers(1, 4000), min_size=1, max_size=8), st.data())
def test_code_that_rewrites_itself_runs_the_same_natively_and_in_python(
        tiles: list[tuple[int, int, int, int]], profile: str, slices: list[int], data: st.DataObject) -> None:
    # Each tile rewrites the word at PATCH and runs it; the tiles' words
    # differ at the same address (the threads' code slots are shared by
    # tiles); hosts write there too, seen and unseen, between calls.
    writes = data.draw(host_writes(len(tiles)))
    sources = [_rewriting(*t) for t in tiles]
    memory = [bytes(4 * WORDS)] * len(tiles)
    ipus = [_ipu(profile, how, track_dirty=False) for how in ("spread", "native", "python")]
    for ipu in ipus:
        _start(ipu, sources, memory)
        for i, budget in enumerate(slices):
            for tile, at, value, unseen in writes:
                if at == i:
                    _host_write(ipu, tile, value, unseen)
            ipu.execution.run(budget)
    _same(ipus[0], ipus[2], len(tiles))
    _same(ipus[1], ipus[2], len(tiles))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.tuples(st.sampled_from(TEMPLATES), st.integers(1, 0x1000), st.integers(1, 300), st.integers(0, 1 << 20)),
       program(), st.sampled_from(["ipu1", "ipu2"]), st.lists(st.integers(1, 4000), min_size=1, max_size=4),
       st.lists(st.integers(16, 4000), min_size=1, max_size=4), st.sampled_from(["spread", "native"]))
def test_after_a_reset_rewritten_code_leaves_nothing_behind(rewriting: tuple[int, int, int, int], source: str,
                                                             profile: str, first: list[int], then: list[int],
                                                             how: str) -> None:
    # A tile rewrites its code, stopped anywhere; after a reset another
    # program at the same addresses runs as on a new IPU.
    memory = [bytes(4 * WORDS)] * 2
    used = _ipu(profile, how, track_dirty=False)
    _start(used, [_rewriting(*rewriting)] * 2, memory)
    for budget in first:
        used.execution.run(budget)
    new = _ipu(profile, how, track_dirty=False)
    for ipu in (used, new):
        _start(ipu, [source] * 2, memory)
        for budget in then:
            ipu.execution.run(budget)
    _same(used, new, 2)


_BSP = """
.text 0x4c000
.supervisor
_start:
  setzi $m14, 0xa0000
  setzi $m1, {steps}
  setzi $m0, worker
  runall $m0, $m14, 1
step:
  setzi $m3, {work}
compute:
  ld32 $m4, $m14, $m15, 0
  add $m4, $m4, $m3
  st32 $m4, $m14, $m15, 0
  brnzdec $m3, compute
  sync 3
  brnzdec $m1, step
  sync 2
  trap 0
.align 8
.worker
worker:
  setzi $m2, {work}
spin:
  add $m5, $m5, $m2
  st32 $m5, $m13, $m15, 8
  brnzdec $m2, spin
  exitnz $m5
"""


@pytest.mark.parametrize("profile", ["ipu1", "ipu2"])
def test_a_bsp_program_on_many_tiles_spreads_over_the_threads_and_runs_the_same(profile: str) -> None:
    tiles = 48
    source = _BSP.format(steps=4, work=300)
    memory = [bytes(4 * WORDS)] * tiles
    ipus = {how: _ipu(profile, how) for how in ("spread", "native", "python")}
    for ipu in ipus.values():
        _start(ipu, [source] * tiles, memory)
        for _ in range(200):
            ipu.execution.run(5000, 5000)
            if not ipu.execution.busy():
                break
        assert not ipu.execution.busy()
    loop = ipus["spread"].execution._loop
    assert loop is not None and loop.spread > 0
    stores = {how: ipu.tiles.exchange.take_dirty() for how, ipu in ipus.items()}
    assert stores["spread"] == stores["native"] == stores["python"] != []  # _same takes them: here, once
    _same(ipus["spread"], ipus["python"], tiles)
    _same(ipus["native"], ipus["python"], tiles)
    assert len(ipus["python"].execution.events) > tiles  # syncs, starts, exits: in the same order


_COUNTED = """
.text 0x4C000
.supervisor
_start:
  setzi $m3, 3
again:
  setzi $m1, 400
loop:
  add $m2, $m2, 3
  brnzdec $m1, loop
  brnzdec $m3, again
  trap 0
"""


def _counting(learn: Callable[..., None], asked: list[int]) -> Callable[..., None]:
    """``learn``, noting each word it is asked for in ``asked``."""
    def learned(key: int, *rest: Any) -> None:
        asked.append(key)
        learn(key, *rest)
    return learned


def test_a_new_word_every_tile_meets_on_the_threads_is_decoded_once() -> None:
    # Every tile of a pass on the threads stops at each of the program's
    # words, new to the cache: Python is asked for each once, as on one
    # thread, and the tiles go on on the threads; the results are the same.
    tiles = 48
    ipus = {how: _ipu("ipu2", how) for how in ("spread", "native", "python")}
    asked: dict[str, list[int]] = {"spread": [], "native": []}
    for how, ipu in ipus.items():
        _start(ipu, [_COUNTED] * tiles, [bytes(4 * WORDS)] * tiles)
        loop = ipu.execution._loop
        if how in asked:
            assert loop is not None
            setattr(loop, "learn", _counting(loop.learn, asked[how]))
        for _ in range(50):
            ipu.execution.run(20_000, 20_000)
            if not ipu.execution.busy():
                break
        assert not ipu.execution.busy()
    assert asked["spread"] == asked["native"] and len(asked["native"]) == len(set(asked["native"])) >= 5
    _same(ipus["spread"], ipus["python"], tiles)
    _same(ipus["native"], ipus["python"], tiles)


def test_the_decode_caches_stay_bounded_while_code_writes_new_words_and_empty_after_a_reset() -> None:
    # 3,000 new words, each run once, against bounds of 200: both caches
    # start again when full, and the results stay the Python path's.
    source = _rewriting(TEMPLATES[0], 1, 3000, 0)
    memory = [bytes(4 * WORDS)]
    ipus = [_ipu("ipu2", how, track_dirty=False) for how in ("native", "python")]
    for ipu in ipus:
        ex = ipu.execution
        ex.interpreter.cache_entries = 200
        ex._loop = native.Loop(ex.arrays, ipu.tiles.exchange, ipu.tiles.exchange_base, ipu.tiles.window,
                               ipu.tiles.sram, ex.memory_base, ex._the_loop()._csr_ops,
                               region1=ipu.tiles.region1 - ipu.tiles.base, bounded=True, cache_entries=200)
        _start(ipu, [source], memory)
        peak = (0, 0)
        for _ in range(200):
            ex.run(1000)
            peak = max(peak, (ex._loop.cached()[0], ex.interpreter.cached()))
            if not ex.busy():
                break
    native_ex, python_ex = (ipu.execution for ipu in ipus)
    assert native_ex._loop is not None and python_ex._loop is not None
    assert native_ex._loop.cached()[0] <= 200 and python_ex.interpreter.cached() <= 200
    entries, size = native_ex._loop.cached()
    assert size < 1 << 20  # 200 entries in a table of 512, and one thread's code slots
    assert native_ex.instructions > 3 * 3000
    _same(ipus[0], ipus[1], 1)
    for ipu in ipus:
        ipu.reset()
        assert ipu.execution._loop is not None
        assert ipu.execution._loop.cached()[0] == 0 and ipu.execution.interpreter.cached() == 0
