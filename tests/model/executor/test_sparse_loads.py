# The sparse and delta-stream loads (ld64a32, ldd16a32/a64/b16, ldd16v2a32)
# and stm32step, run by a worker as programs for `ipufs asm`, checked
# against the same walk over the data in plain Python.
from __future__ import annotations

import struct

from ipufs.abi.registers import ExceptionCause
from tests.model.executor.kit import assemble, load, make, memory_word, one_worker, reg, start

IPU = make()
VERTEX = 0x60000
DENSE = [0x11111111, 0x22222222]  # words 0, 1: the dense 64-bit value of ld64a32
STREAM = [12, 16, 6, 20, 0x0018_0004]  # at 0x60080: four 16-bit deltas, then a 32-bit pair of deltas
SPARSE = [0xA0000000 + 0x1010101 * i for i in range(8)]  # words at 0x60100
OUT = 0x60300


def words_at(address: int, count: int) -> list[int]:
    return [memory_word(IPU, 0, address + 4 * i) for i in range(count)]


def run_worker(body: str) -> None:
    stream = struct.unpack("<3I", struct.pack("<4HI", *STREAM))
    data = [*DENSE] + [0] * 30 + list(stream) + [0] * 29 + SPARSE + [0] * 200
    IPU.reset()
    program = assemble(one_worker(body, vertex=VERTEX, data="\n".join(f"  .word {w}" for w in data)))
    load(IPU, program)
    start(IPU, program.entry)
    IPU.execution.run(100_000)


def sparse16(offset: int) -> int:
    word = SPARSE[offset // 4]
    return (word >> (8 * (offset % 4))) & 0xFFFF


def test_delta_stream_loads_follow_the_deltas_they_load() -> None:
    run_worker(f"""
  setzi $m1, 0x60080
  setzi $m2, 0x60100
  setzi $m3, 8
  setzi $m4, {OUT}
  ldd16a32 $a0, $m1++, $m2, $m3@
  ldd16a32 $a1, $m1++, $m2, $m3@
  ldd16a64 $a2:3, $m1++, $m2, $m3@
  ldd16b16 $a4, $m1++, $m2, $m3@
  st64 $a0:1, $m4, $m15, 0
  st64 $a2:3, $m4, $m15, 1
  st32 $a4, $m4, $m15, 4
  st32 $m1, $m4, $m15, 5
  st32 $m3, $m4, $m15, 6
""")
    # the first data load uses the delta the register held (8), each one
    # loads the next delta from the stream for the following load
    deltas = [8, STREAM[0], STREAM[1], STREAM[2]]
    b16 = sparse16(deltas[3])
    assert words_at(OUT, 7) == [SPARSE[deltas[0] // 4], SPARSE[deltas[1] // 4], SPARSE[deltas[2] // 4],
                                SPARSE[deltas[2] // 4 + 1], b16 | b16 << 16, 0x60088, STREAM[3]]


def test_ldd16v2a32_uses_the_upper_delta_and_ld64a32_the_lower() -> None:
    run_worker(f"""
  setzi $m1, 0x60088
  setzi $m2, 0x60100
  setzi $m3, 0x40000
  setzi $m4, {OUT}
  setzi $m7, 0x60000
  setzi $a8, 0x12345
  ldd16v2a32 $a0, $m1++, $m2, $m3@
  ld64a32 $a8:11, $m7++, $m2, $m3
  st32 $a0, $m4, $m15, 0
  st64 $a8:9, $m4, $m15, 1
  st64 $a10:11, $m4, $m15, 2
  st32 $m1, $m4, $m15, 6
  st32 $m3, $m4, $m15, 7
  st32 $m7, $m4, $m15, 8
""")
    pair = STREAM[4]  # loaded into $m3 by ldd16v2a32; ld64a32 uses its low half
    assert words_at(OUT, 9) == [SPARSE[4 // 4], 0, 0x12345, SPARSE[(pair & 0xFFFF) // 4], *DENSE, 0x6008C, pair,
                                0x60008]


def test_stm32step_stores_then_steps_by_a_signed_stride_of_words() -> None:
    run_worker(f"""
  setzi $m1, {OUT + 16}
  add $m2, $m15, -2
  setzi $m3, 77
  stm32step $m3, $m1+=, $m2
  add $m3, $m3, 1
  stm32step $m3, $m1+=, $m2
  setzi $m4, {OUT}
  st32 $m1, $m4, $m15, 6
""")
    assert words_at(OUT, 7) == [0, 0, 78, 0, 77, 0, OUT]  # two steps of -2 words


def test_a_misaligned_dense_pointer_faults_at_its_address() -> None:
    run_worker("""
  setzi $m7, 0x60004
  ld64a32 $a0:3, $m7++, $m15, $m15
""")
    assert (reg(IPU, "EXC_CAUSE"), reg(IPU, "EXC_ADDRESS")) == (ExceptionCause.MISALIGNED, 0x60004)


def test_ldb16b16_is_not_guessed() -> None:
    run_worker("  ldb16b16 $a0:1, $m15, $m1++, $m2>>")
    assert reg(IPU, "EXC_CAUSE") == ExceptionCause.NOT_EXECUTABLE
    assert any("ldb16b16" in e.detail for e in IPU.execution.events)
