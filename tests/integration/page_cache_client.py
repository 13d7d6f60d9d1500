# A client run by test_page_cache.py (as root and as nobody): the call
# sequences whose answers page-cache mode must give as passthrough does.
# Prints one line per check: "NAME ok" or "NAME FAIL detail".
from __future__ import annotations

import os
import struct
import sys
import time

from ipufs.abi.icu import Op, op_word
from ipufs.abi.registers import REGISTERS
from ipufs.client import Device, Mailbox, SignalReceiver

FIRMWARE = (0x4020C, 0x50002, 0x9, 0x0, 0x0)


def word(buffer: object, name: str) -> int:
    return int(struct.unpack_from("<I", buffer, REGISTERS[name].offset)[0])  # type: ignore[call-overload]


def main(root: str) -> None:
    signals = SignalReceiver()  # the attached process gets the doorbell's signal 45
    with Device(0, root) as ipu, Mailbox(0, root) as mailbox:
        ipu.attach()
        # A RESET that has returned shows through the mapping, every time.
        stale = 0
        for _ in range(100):
            before = word(ipu.config, "RESET_COUNT")
            ipu.reset()
            stale += word(ipu.config, "RESET_COUNT") != before + 1
        print("reset-visible", "ok" if stale == 0 else f"FAIL {stale} of 100 stale")
        # A request posted through the mapping, rung by pwrite and by a
        # store through the mapping, without msync.
        for mapped in (False, True, False, True):
            mailbox.post((op_word(Op.READ_FIRMWARE_VERSION), 0, 0, 0, 0))
            mailbox.ring(mapped=mapped)
            ready = mailbox.wait(timeout=2)
            answer = mailbox.take()
            print(f"mailbox-{'mapped' if mapped else 'pwrite'}",
                  "ok" if ready and answer == FIRMWARE else f"FAIL {ready} {answer}")
        # A command stored through the mapping is run.
        before = word(ipu.config, "RESET_COUNT")
        struct.pack_into("<I", ipu.config, REGISTERS["CMD_RESET"].offset, 1)
        deadline = time.monotonic() + 2
        while word(ipu.config, "RESET_COUNT") == before and time.monotonic() < deadline:
            time.sleep(0.0001)
        after = word(ipu.config, "RESET_COUNT")
        print("mapped-command", "ok" if after == before + 1 else f"FAIL {before} -> {after}")
        # A register stored through the mapping reads back by pread.
        struct.pack_into("<I", ipu.config, REGISTERS["SCRATCH"].offset, 0x5CA7C4)
        back = struct.unpack("<I", os.pread(ipu.fd, 4, REGISTERS["SCRATCH"].offset))[0]
        print("mapped-then-pread", "ok" if back == 0x5CA7C4 else f"FAIL {back:#x}")
        # A sync requested through the mapping, again as soon as the last
        # one's signal came (46: GS1 done): none may be lost.
        signals.receive(0)
        done = 0
        for _ in range(50):
            struct.pack_into("<I", ipu.config, REGISTERS["CMD_SYNC"].offset, 4)
            if not any(s.signo == 46 for s in signals.wait_for(1, timeout=2)):
                break
            done += 1
        print("mapped-sync-loop", "ok" if done == 50 else f"FAIL signal {done + 1} never came")
    signals.receive(0)


if __name__ == "__main__":
    main(sys.argv[1])
