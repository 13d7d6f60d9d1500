# A bounded load: 64 client processes at once on 4 IPUs, each waiting its
# turn to attach, then issuing ioctls, ICU requests, mapped stores and syncs
# for a fixed count. Zero unexpected errors, every signal accounted for, and
# the daemon leaks no file descriptors (pidfds among them) and no memory.
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.harness import ROOT, running_daemon, wait_for

pytestmark = pytest.mark.mount
CLIENTS = 64
ITERATIONS = 20


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_sixty_four_clients(tmp_path: Path) -> None:
    client = tmp_path / "load_client"
    subprocess.run(["cc", "-O2", "-Wall", "-Werror", "-I", str(ROOT / "native" / "include"), "-o", str(client),
                    str(ROOT / "tests" / "c" / "load_client.c")], check=True)
    with running_daemon(tmp_path / "mnt", ipus=4, profile="ipu2") as d:
        driver = d.daemon.driver

        def run_wave() -> list[str]:
            procs = [subprocess.Popen([str(client), str(d.mountpoint), str(i % 4), str(ITERATIONS), str(i)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                     for i in range(CLIENTS)]
            results = []
            for p in procs:
                out, err = p.communicate(timeout=240)
                assert p.returncode == 0, err + out
                results.append(out.strip())
            return results

        run_wave()  # warm up: first-use allocations are not leaks
        # Detaching hands pidfds to the loop to close: let the warm-up settle.
        watcher = d.daemon.exits
        assert wait_for(lambda: not watcher.scopes, 5)
        time.sleep(0.2)
        fds_before, rss_before = fds(), rss_kib()
        sent_before = sum(sum(s.values()) for s in driver.signals.sent)
        results = run_wave()
        expected = f"done ioctls={ITERATIONS} icu={ITERATIONS} syncs={ITERATIONS} signals={ITERATIONS} errors=0"
        assert results == [expected] * CLIENTS
        # Every signal the daemon sent was received, and none was dropped.
        assert sum(sum(s.values()) for s in driver.signals.sent) - sent_before == CLIENTS * ITERATIONS
        assert sum(sum(s.values()) for s in driver.signals.dropped) == 0
        # Closing is a background request: the last RELEASEs may still be on their way.
        assert wait_for(lambda: len(driver.attachments) == 0 and d.daemon.filesystem.files == {}, 5)
        # The last detaches hand their pidfds to the loop to close: let it.
        assert wait_for(lambda: fds() <= fds_before, 5), (fds(), fds_before)
        assert rss_kib() - rss_before < 8 * 1024
