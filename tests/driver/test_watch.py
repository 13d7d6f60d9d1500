from __future__ import annotations

import os
import subprocess
import threading

import trio

from ipufs.driver.watch import PidfdWatcher


def test_exit_of_a_watched_process_is_reported() -> None:
    called: list[int] = []

    async def main() -> None:
        proc = subprocess.Popen(["sleep", "0.05"])
        fd = os.pidfd_open(proc.pid)
        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                watcher = PidfdWatcher(lock=threading.RLock())
                await nursery.start(watcher.run)
                watcher.watch(fd, lambda: called.append(proc.pid))
                while not called:
                    await trio.sleep(0.01)
                nursery.cancel_scope.cancel()
        os.close(fd)
        proc.wait()

    trio.run(main)
    assert len(called) == 1


def test_unwatching_at_once_or_while_waiting_is_safe_from_any_thread() -> None:
    called: list[int] = []
    closed: list[int] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            watcher = PidfdWatcher(lock=threading.RLock())
            await nursery.start(watcher.run)
            for _ in range(3):  # unwatched before the waiting task first runs
                fd = os.pidfd_open(os.getpid())
                watcher.watch(fd, lambda: called.append(1))
                watcher.unwatch(fd)
                closed.append(fd)
            fd = os.pidfd_open(os.getpid())
            # watched and unwatched from another thread, as the FUSE reader does
            thread = threading.Thread(target=lambda: watcher.watch(fd, lambda: called.append(2)))
            thread.start()
            thread.join()
            await trio.sleep(0.02)
            thread = threading.Thread(target=lambda: watcher.unwatch(fd))
            thread.start()
            thread.join()
            closed.append(fd)
            await trio.sleep(0.02)
            assert not watcher.scopes
            nursery.cancel_scope.cancel()

    trio.run(main)
    assert called == []
    for fd in closed:  # the watcher closed every pidfd it was handed
        try:
            os.fstat(fd)
        except OSError:
            continue
        assert os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:[pidfd]"
