"""The executor's state arrays cost nothing until tiles run, whatever the
allocator holds: a daemon of many idle IPUs stays small."""
from __future__ import annotations

import numpy as np

from ipufs.model.executor import native


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_the_arrays_of_64_idle_ipus_touch_no_memory_after_the_heap_was_used() -> None:
    junk = [np.ones(1 << 20, np.uint32) for _ in range(300)]  # freed memory the allocator may hand out again
    del junk
    before = _rss_kib()
    arrays = [native.Arrays(1472, 7) for _ in range(64)]
    assert _rss_kib() - before < 4 * 1024
    arrays[0].registers[5, 1, 2] = 7  # and they are ordinary, writable arrays
    assert arrays[0].registers.flags.c_contiguous and int(arrays[0].registers.sum()) == 7
