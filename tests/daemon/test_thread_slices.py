# ipufs.native.thread_slice: the fair-scheduler slice a thread asks for
# (sched_setattr), which lets the threads that wake for a client take a CPU
# from the tiles' threads at once (docs/executor-speed.md).
from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from ipufs import native


def slice_of(tid: int) -> int | None:
    """The slice the kernel shows for thread ``tid``, in ns (None: it shows none)."""
    try:
        text = Path(f"/proc/self/task/{tid}/sched").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("se.slice"):
            return int(line.split(":")[1])
    return None


def in_thread(action: Callable[[], object]) -> object:
    """What ``action`` returns, run in a new thread (a slice stays with the thread that asked)."""
    box: list[object] = []
    t = threading.Thread(target=lambda: box.append(action()))
    t.start()
    t.join(10)
    return box[0]


def kept() -> bool:
    return in_thread(lambda: native.thread_slice(0.01)) == 0.01


needs_slices = pytest.mark.skipif(not kept(), reason="this kernel keeps no slice per thread (Linux 6.12 and later do)")


@needs_slices
def test_a_thread_gets_the_slice_it_asks_for_within_the_kernels_bounds() -> None:
    def ask() -> tuple[list[float], int | None]:
        got = [native.thread_slice(s) for s in (0.02, 1e-6, 5.0)]
        return got, slice_of(threading.get_native_id())

    got, shown = in_thread(ask)  # type: ignore[misc]
    assert got == [0.02, native.SHORTEST_SLICE_S, 0.1]  # 0.1 to 100 ms
    assert shown in (None, 100_000_000)


@needs_slices
def test_the_slice_keeps_the_threads_nice_and_leaves_threads_it_starts_alone() -> None:
    def ask() -> tuple[int, int | None, int | None]:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, 7)  # this thread's nice (Linux: per thread)
        native.thread_slice(0.03)
        child = in_thread(lambda: slice_of(threading.get_native_id()))
        return os.getpriority(os.PRIO_PROCESS, tid), slice_of(tid), child  # type: ignore[return-value]

    nice, mine, child = in_thread(ask)  # type: ignore[misc]
    assert nice == 7
    if mine is not None:
        assert mine == 30_000_000
        assert child != 30_000_000  # the default, not the parent's


def test_a_thread_outside_the_normal_policies_keeps_its_own() -> None:
    """A hint, never an error: a SCHED_IDLE thread gets no slice and
    keeps its policy."""
    def ask() -> tuple[float, int]:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))  # this thread (Linux: per thread)
        return native.thread_slice(native.SHORTEST_SLICE_S), os.sched_getscheduler(0)

    got, policy = in_thread(ask)  # type: ignore[misc]
    assert got in (0.0, native.SHORTEST_SLICE_S)
    assert got == 0.0
    assert policy == os.SCHED_IDLE
