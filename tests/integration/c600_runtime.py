# What tests/c/c600_host.c does, in Python: drive /dev/ipu0 of an ipu21 as
# a runtime that drives a real C600 does (osmarks/ipu-stack,
# crates/ipu-driver/src/lib.rs), every config access one 32-bit load or
# store through a MAP_SHARED mapping of 0x80000 bytes (a memoryview cast
# to u32: each access a single instruction, which the compatibility
# library makes MMIO), the ioctls in their real forms, the TDI by physical
# tile with the runtime's injected words. Run under `ipufs run --profile
# ipu21` as `python c600_runtime.py IMAGE TILE ENTRY COUNTER WORD...`;
# prints a line per step and "done", or raises.
from __future__ import annotations

import ctypes
import mmap
import os
import signal
import struct
import sys
import time

BAR_SIZE, TDI_BASE, WORKER = 0x80000, 0x30000, 1
CTXT_STS, RBRK, IEXEC, IOWNER, ECLR, DATA, STS, CLR = 0, 1, 3, 4, 6, 7, 8, 9
GET_M0_PC, GET_M0_DATA, GET_M1_DATA, LD32, ST32 = 0x41000000, 0x41000070, 0x41010070, 0x01F01000, 0x4F10F000
HSP = (0x302C, 0x3030)
LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.ioctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)


def req(direction: int, nr: int, size: int) -> int:
    return direction << 30 | size << 16 | 0xED << 8 | nr


class Runtime:
    def __init__(self, tile: int) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())  # as the runtime does
        self.fd = os.open("/dev/ipu0", os.O_RDWR | os.O_CLOEXEC)
        self.map = mmap.mmap(self.fd, BAR_SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.bar = memoryview(self.map).cast("I")
        self.p = tile

    def ioctl(self, name: str, request: int, arg: int = 0) -> None:
        """As the runtime calls it: the argument one machine word (a value
        or a pointer), through libc's ioctl (the library's, preloaded)."""
        if LIBC.ioctl(self.fd, ctypes.c_ulong(request), ctypes.c_void_p(arg)) != 0:
            raise OSError(ctypes.get_errno(), f"{name}: {os.strerror(ctypes.get_errno())}")
        print(name, "ok", flush=True)

    def reg(self, r: int, value: int | None = None) -> int:
        at = (TDI_BASE + self.p * 0x40 + r * 4) // 4
        if value is None:
            return int(self.bar[at])
        self.bar[at] = value
        return value

    def state(self, c: int) -> int:
        return (self.reg(CTXT_STS) >> 2 * c) & 3

    def execute(self, c: int, word: int) -> None:
        self.reg(CLR, 6)
        self.reg(IOWNER, c)
        self.reg(IEXEC, word)
        deadline = time.monotonic() + 5
        while (status := self.reg(STS)) & 8:
            assert time.monotonic() < deadline, "TDI instruction"
        assert status & 7 == 0, f"TDI instruction failed with status {status:#x}"

    def read_m(self, c: int, n: int) -> int:
        self.execute(c, 0x43008070 | n << 20)
        return self.reg(DATA)

    def wait_excepted(self, c: int) -> None:
        deadline = time.monotonic() + 5
        while self.state(c) < 2:
            assert time.monotonic() < deadline, "stopping tile context"

    def word(self, address: int, value: int | None = None, c: int = WORKER) -> int:
        """Read (through an inactive worker) or write (stopping it first)
        one tile word, in the runtime's stop / operate / resume wrapper."""
        bit, r0, s = 1 << c, self.reg(RBRK), self.state(c)
        already = s >= 2 or (value is None and s == 0)
        if not already:
            self.reg(RBRK, r0 | bit)
            self.wait_excepted(c)
        m0, m1 = self.read_m(c, 0), self.read_m(c, 1)
        self.reg(DATA, address)
        self.execute(c, GET_M1_DATA)
        out = 0
        if value is None:
            self.execute(c, LD32)
            out = self.read_m(c, 0)
        else:
            self.reg(DATA, value)
            self.execute(c, GET_M0_DATA)
            self.execute(c, ST32)
        self.reg(DATA, m1)
        self.execute(c, GET_M1_DATA)
        self.reg(DATA, m0)
        self.execute(c, GET_M0_DATA)
        if not already:
            self.reg(RBRK, r0)
            if not r0 & bit:
                self.reg(ECLR, bit)
        return out

    def counter_reaches(self, address: int, target: int) -> int:
        deadline = time.monotonic() + 5
        while (value := self.word(address)) < target and time.monotonic() < deadline:
            pass
        return value


def main(image: str, tile: str, entry_: str, counter_: str, *words_: str) -> None:
    entry, counter, words = int(entry_, 0), int(counter_, 0), [int(w, 0) for w in words_]
    rt = Runtime(int(tile, 0))
    rt.ioctl("USER_ATTACH", req(3, 10, 8))
    rt.ioctl("SET_IPU_ID", req(3, 14, 8))
    rt.ioctl("STOP_MONITORING", req(0, 34, 0))
    sent, received = (ctypes.c_uint32 * 5)(0x4078020E, 0, 0, 0, 0), (ctypes.c_uint32 * 5)()
    pointers = (ctypes.c_uint64 * 2)(ctypes.addressof(sent), ctypes.addressof(received))
    rt.ioctl("MAILBOX_WRITE_READ", req(3, 31, 8), ctypes.addressof(pointers))
    assert received[0] & 0xFFFF0000 == 0x40780000, f"unexpected ICU reset response {received[0]:#x}"
    rt.ioctl("START_MONITORING", req(0, 35, 0))
    rt.ioctl("ACCUMULATE_ERRORS", req(0, 36, 0))
    rt.ioctl("RESET_DEVICE", req(1, 45, 4))
    secondary = ctypes.c_uint32(0)
    rt.ioctl("SET_SECONDARY_IPU_ID", req(1, 47, 8), ctypes.addressof(secondary))
    data = open(image, "rb").read()
    assert data[:8] == b"IPUCFG1\0"
    count = struct.unpack_from("<I", data, 8)[0]
    assert len(data) == 12 + 8 * count, "bad configuration image size"
    for k in range(count):
        offset, value = struct.unpack_from("<II", data, 12 + 8 * k)
        if offset not in HSP:
            rt.bar[offset // 4] = value
    for offset in HSP:
        rt.bar[offset // 4] = 0
        assert rt.bar[offset // 4] & 0xFFFF == 0, f"HSP register {offset:#x} did not clear"
    print(f"replayed {count} writes, CCSR {rt.bar[0x2000 // 4]:#x}", flush=True)
    for k, w in enumerate(words):
        rt.word(entry + 4 * k, w)
    rt.word(counter, 0)
    assert [rt.word(entry + 4 * k) for k in range(len(words))] == words
    r0 = rt.reg(RBRK)  # start the supervisor: stop, inject `bri entry`, resume
    rt.reg(RBRK, r0 | 1)
    rt.wait_excepted(0)
    rt.execute(0, 0x40800000 | entry >> 2)
    rt.reg(RBRK, r0)
    rt.reg(ECLR, 1)
    assert rt.counter_reaches(counter, 100) >= 100 and rt.state(0) == 1, "the supervisor does not run"
    print("started", flush=True)
    rt.reg(RBRK, r0 | 1)  # stop it while it runs
    rt.wait_excepted(0)
    m0 = rt.read_m(0, 0)
    rt.execute(0, GET_M0_PC)
    pc = rt.read_m(0, 0)
    rt.reg(DATA, m0)
    rt.execute(0, GET_M0_DATA)
    held = rt.word(counter)
    assert entry <= pc < entry + 4 * len(words) and rt.word(counter) == held, f"pc {pc:#x}"
    print("stopped in the program, counter held", flush=True)
    rt.reg(RBRK, r0)  # resume it
    rt.reg(ECLR, 1)
    assert rt.counter_reaches(counter, held + 100) >= held + 100 and rt.state(0) == 1, "not resumed"
    print("resumed", flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
