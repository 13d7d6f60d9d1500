from __future__ import annotations

import os
import subprocess

import trio

from ipufs.driver.watch import PidfdWatcher


def test_exit_of_a_watched_process_is_reported() -> None:
    called: list[int] = []

    async def main() -> None:
        proc = subprocess.Popen(["sleep", "0.05"])
        fd = os.pidfd_open(proc.pid)
        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                PidfdWatcher(nursery).watch(fd, lambda: called.append(proc.pid))
        os.close(fd)
        proc.wait()

    trio.run(main)
    assert len(called) == 1


def test_unwatching_before_the_task_runs_is_safe() -> None:
    called: list[int] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            watcher = PidfdWatcher(nursery)
            for _ in range(3):
                fd = os.pidfd_open(os.getpid())
                watcher.watch(fd, lambda: called.append(1))
                watcher.unwatch(fd)
                os.close(fd)
            # One watched for real and unwatched while waiting.
            fd = os.pidfd_open(os.getpid())
            watcher.watch(fd, lambda: called.append(2))
            await trio.sleep(0.01)
            watcher.unwatch(fd)
            os.close(fd)

    trio.run(main)
    assert called == []
