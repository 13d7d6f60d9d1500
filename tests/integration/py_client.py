# A scriptable client process built on ipufs.client, for integration tests:
# one command per line on stdin, one answer line each. It receives signals
# 44..49 through a signalfd, created before anything else.
from __future__ import annotations

import sys

from ipufs.client import Device, IoctlError, Mailbox, SignalReceiver
from ipufs.abi.registers import REGISTERS


def words(items: tuple[int, ...] | None) -> str:
    return "none" if items is None else " ".join(str(w) for w in items)


def main() -> int:
    signals = SignalReceiver()
    root, index = sys.argv[1], int(sys.argv[2])
    dev = Device(index, root)
    box = Mailbox(index, root)
    print("ready", flush=True)
    for line in sys.stdin:
        cmd, *args = line.split()
        a = [int(x, 0) for x in args if x[:1].isdigit() or x[:1] == "-"]
        try:
            if cmd == "attach":
                dev.attach()
                out = "ok"
            elif cmd == "setid":
                dev.set_ipu_id(a[0])
                out = "ok"
            elif cmd == "mask":
                out = str(dev.mask(a[0]))
            elif cmd == "reset":
                dev.reset()
                out = "ok"
            elif cmd == "reg":
                out = str(dev.read_register(args[0]))
            elif cmd == "set":
                dev.write_register(args[0], int(args[1], 0))
                out = "ok"
            elif cmd == "store":  # through the shared mapping of config space
                offset = REGISTERS[args[0]].offset
                dev.config[offset : offset + 4] = int(args[1], 0).to_bytes(4, "little")
                out = "ok"
            elif cmd == "tdi-mem-read":
                result, value = dev.tdi_read_memory(a[0], a[1], a[2])
                out = f"{result.name} {value}"
            elif cmd == "tdi-mem-write":
                out = dev.tdi_write_memory(a[0], a[1], a[2], a[3]).name
            elif cmd == "tdi-reg-read":
                result, value = dev.tdi_read_register(a[0], a[1])
                out = f"{result.name} {value}"
            elif cmd == "tdi-reg-write":
                out = dev.tdi_write_register(a[0], a[1], a[2]).name
            elif cmd == "icu":
                out = words(dev.icu_transfer(tuple(a)))
            elif cmd == "icu-send":
                dev.icu_send(tuple(a))
                out = "ok"
            elif cmd == "icu-recv":
                out = words(dev.icu_receive())
            elif cmd == "mbox-post":
                box.post(tuple(a))
                out = "ok"
            elif cmd == "mbox-ring":
                box.ring(mapped="mapped" in args)
                out = "ok"
            elif cmd == "mbox-wait":
                out = "ready" if box.wait(a[0] / 1000) else "timeout"
            elif cmd == "mbox-take":
                out = words(box.take())
            elif cmd == "signals":
                got = signals.wait_for(a[0], a[1] / 1000)
                out = "signals" + "".join(f" {s.signo}:{s.value}" for s in got)
            elif cmd == "senders":  # si_pid of the signals that come
                got = signals.wait_for(a[0], a[1] / 1000)
                out = "senders" + "".join(f" {s.pid}" for s in got)
            elif cmd == "quit":
                break
            else:
                out = "error unknown-command"
        except (IoctlError, OSError) as exc:
            out = f"error {exc.errno}"
        print(out, flush=True)
    box.close()
    dev.close()
    signals.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
