# The request-path benchmark's own logic (benchmarks/request_path.py): which
# variants an ipufs can run, the enable_uring switch, CPU time from
# schedstat and the table, with no mount and no timing checked.
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import request_path as rp  # noqa: E402  (a script beside run.py, not a package)

VARIANTS = {v.name: v for v in rp.VARIANTS}
EVERY_OPTION = "usage: ipufs mount [--no-fast-path] [--uring {auto,on,off}] [--spin-us SPIN_US]"


def test_each_variant_gets_its_options_when_the_mount_offers_them() -> None:
    assert rp.mount_options(VARIANTS["classic"], EVERY_OPTION) == ("--no-fast-path", "--uring", "off")
    assert rp.mount_options(VARIANTS["fast path"], EVERY_OPTION) == ("--uring", "off")
    assert rp.mount_options(VARIANTS["io_uring"], EVERY_OPTION) == ("--uring", "on")


def test_a_mount_without_the_paths_runs_classic_and_says_why_the_others_cannot() -> None:
    plain = "usage: ipufs mount [--spin-us SPIN_US] [--no-cdi]"
    assert rp.mount_options(VARIANTS["classic"], plain) == ()
    with pytest.raises(rp.Unavailable, match="offers no --no-fast-path"):
        rp.mount_options(VARIANTS["fast path"], plain)
    with pytest.raises(rp.Unavailable, match="offers no --uring"):
        rp.mount_options(VARIANTS["io_uring"], plain)


def test_a_mount_with_the_fast_path_only_turns_it_off_for_classic() -> None:
    fast_only = "usage: ipufs mount [--no-fast-path] [--no-cdi]"
    assert rp.mount_options(VARIANTS["classic"], fast_only) == ("--no-fast-path",)
    assert rp.mount_options(VARIANTS["fast path"], fast_only) == ()
    assert VARIANTS["fast path"].label(()) == "fast path (no options)"
    with pytest.raises(rp.Unavailable):
        rp.mount_options(VARIANTS["io_uring"], fast_only)


def test_enable_uring_is_set_while_inside_and_restored_on_every_path(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    parameter = tmp_path / "enable_uring"
    parameter.write_text("N\n")
    monkeypatch.setattr(rp, "URING_PARAMETER", parameter)
    with rp.uring_enabled():
        assert parameter.read_text() == "Y"
    assert parameter.read_text() == "N"
    with pytest.raises(RuntimeError), rp.uring_enabled():
        assert parameter.read_text() == "Y"
        raise RuntimeError("the daemon failed")
    assert parameter.read_text() == "N"


def test_another_program_turning_enable_uring_off_meanwhile_is_said(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    parameter = tmp_path / "enable_uring"
    parameter.write_text("N\n")
    monkeypatch.setattr(rp, "URING_PARAMETER", parameter)
    with pytest.raises(rp.Unavailable, match="another program changed it"), rp.uring_enabled():
        parameter.write_text("N")  # as another program's clean-up would
    assert parameter.read_text() == "N"


def test_a_kernel_without_the_parameter_makes_io_uring_unavailable(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rp, "URING_PARAMETER", tmp_path / "absent")
    with pytest.raises(rp.Unavailable, match="no FUSE over io_uring"), rp.uring_enabled():
        pass


def test_cpu_time_counts_every_thread_of_the_process_even_one_that_ended() -> None:
    def burn() -> None:  # 30 ms of CPU, then end
        start = time.thread_time_ns()
        while time.thread_time_ns() - start < 30_000_000:
            pass

    before = rp.cpu_ns(os.getpid())
    worker = threading.Thread(target=burn)
    worker.start()
    worker.join()
    assert rp.cpu_ns(os.getpid()) - before >= 30_000_000


def test_cpu_time_of_another_process_grows_as_it_works() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                              "while time.process_time() - t < 0.05: pass\nprint(flush=True)\ninput()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "\n"  # it has burned 50 ms
        assert rp.cpu_ns(child.pid) >= 50_000_000
    finally:
        child.communicate("\n", timeout=10)


def _sample(rtt: float, rate: float, cpu: float, apart: float | None = None) -> rp.Sample:
    return rp.Sample([rtt] * 3, [rtt] * 3, [rtt * 2] * 3, {n: rate for n in rp.CLIENTS},
                     {n: cpu for n in rp.CPU_CLIENTS}, {} if apart is None else {n: apart for n in rp.PINNED_CLIENTS})


def test_the_table_gives_ratios_per_round_and_one_row_for_a_variant_not_available() -> None:
    samples = {
        "classic": [_sample(20_000, 50_000, 20_000), _sample(30_000, 40_000, 20_000)],
        "fast path": [_sample(10_000, 100_000, 5_000), _sample(12_000, 120_000, 5_000)],
        rp.C_ONE: [_sample(10_000, 100_000, 8_000), _sample(10_000, 100_000, 8_000)],
        rp.C_CLONED: [_sample(10_000, 200_000, 10_000), _sample(10_000, 200_000, 10_000)],
        rp.PY_FLOOR: [_sample(20_000, 50_000, 9_000), _sample(20_000, 50_000, 9_000)],
    }
    labels = {"classic": "classic (`--no-fast-path`)", "fast path": "fast path (no options)"}
    rows = rp.table(samples, {"io_uring": "`ipufs mount --help` offers no --uring"}, labels,
                    [rp.C_ONE, rp.C_CLONED])
    by_figure = {row.figure: row for row in rows}
    trip = by_figure["ioctl round trip (MAILBOX_READ_ONLY count), client unpinned, p50 / p99 — classic "
                     "(`--no-fast-path`)"]
    assert trip.value == "25.0 µs / 30.0 µs"  # every round's trips together
    assert trip.ratio == "2.50× (2.00–3.00); 2.50× (2.00–3.00)"  # median of the rounds' ratios, with their range
    eight = by_figure["sustained ioctls/s, 8 clients — fast path (no options)"]
    assert eight.baseline == "C, 1 thread: 100,000; C, cloned threads: 200,000"
    assert eight.ratio == "1.10× (1.00–1.20); 0.55× (0.50–0.60)"
    assert eight.goal == "≥ 1.0× C, 1 thread"
    cpu = by_figure["server CPU per ioctl, 8 clients — fast path (no options)"]
    assert (cpu.value, cpu.goal) == ("5.0 µs", "no worse than classic")
    assert by_figure["server CPU per ioctl, 8 clients — classic (`--no-fast-path`)"].goal == "—"
    missing = [row for row in rows if "io_uring" in row.figure]
    assert len(missing) == 1
    assert missing[0].value == "not available: `ipufs mount --help` offers no --uring"
    floor = by_figure["sustained ioctls/s, 1 client, classic (`--no-fast-path`), against the bare Python loop "
                      "(benchmarks/python_floor.py)"]
    assert floor.ratio == "0.90× (0.80–1.00)"
    python = by_figure["ioctl round trip (SET_IPU_ID, served in Python), client pinned, p50 / p99, classic "
                       "(`--no-fast-path`), against the bare Python loop (benchmarks/python_floor.py)"]
    assert (python.value, python.baseline) == ("50.0 µs / 60.0 µs", "bare Python loop: 40.0 µs / 40.0 µs")


def test_a_variant_whose_mount_serves_otherwise_is_not_measured_as_it(tmp_path: Path) -> None:
    try:
        os.setxattr(tmp_path, rp.FAST_PATH, b"held: a trace is attached")
    except OSError as exc:
        pytest.skip(f"no user attributes on {tmp_path}: {exc.strerror}")
    with pytest.raises(rp.Unavailable, match="held: a trace is attached"):
        rp.check_serving(VARIANTS["fast path"], tmp_path)
    os.setxattr(tmp_path, rp.FAST_PATH, b"on")
    rp.check_serving(VARIANTS["fast path"], tmp_path)  # no transport attribute: an ipufs without it
    os.setxattr(tmp_path, rp.TRANSPORT, b"/dev/fuse (--uring off)")
    rp.check_serving(VARIANTS["fast path"], tmp_path)
    with pytest.raises(rp.Unavailable, match="transport"):
        rp.check_serving(VARIANTS["io_uring"], tmp_path)


def test_without_libfuse3_the_baseline_column_says_it_was_not_built() -> None:
    rows = rp.table({"classic": [_sample(20_000, 50_000, 20_000)]}, {}, {"classic": "classic (no options)"}, [])
    assert rows and all(row.baseline == "C libfuse3 server: not built (install libfuse3-dev)" and row.ratio == "—"
                        for row in rows)


def test_pinned_apart_rows_are_the_one_thread_servers_and_compare_with_the_one_thread_c_server() -> None:
    samples = {
        "classic": [_sample(20_000, 50_000, 20_000, 40_000), _sample(30_000, 40_000, 20_000, 50_000)],
        "fast path": [_sample(10_000, 100_000, 5_000, 100_000), _sample(12_000, 120_000, 5_000, 125_000)],
        "io_uring": [_sample(10_000, 150_000, 5_000), _sample(10_000, 150_000, 5_000)],
        rp.C_ONE: [_sample(10_000, 100_000, 8_000, 50_000), _sample(10_000, 100_000, 8_000, 50_000)],
        rp.C_CLONED: [_sample(10_000, 200_000, 10_000), _sample(10_000, 200_000, 10_000)],
    }
    labels = {"classic": "classic (`--no-fast-path`)", "fast path": "fast path (no options)",
              "io_uring": "io_uring (`--uring on`)"}
    rows = rp.table(samples, {}, labels, [rp.C_ONE, rp.C_CLONED])
    apart = [row for row in rows if row.figure.startswith("server pinned to CPU 1, clients to CPU 0")]
    assert [row.figure.split(" — ")[1] for row in apart] == [labels["classic"], labels["fast path"]] * 3
    by_figure = {row.figure: row for row in apart}
    trip = by_figure["server pinned to CPU 1, clients to CPU 0: ioctl round trip (MAILBOX_READ_ONLY count), 1 client, "
                     "mean (one over its rate) — fast path (no options)"]
    assert (trip.value, trip.baseline) == ("9.0 µs", "C, 1 thread: 20.0 µs")  # medians of 1/rate: 10 and 8 µs
    assert trip.ratio == "0.45× (0.40–0.50)"
    eight = by_figure["server pinned to CPU 1, clients to CPU 0: sustained ioctls/s, 8 clients — classic "
                      "(`--no-fast-path`)"]
    assert (eight.value, eight.baseline, eight.ratio) == ("45,000", "C, 1 thread: 50,000", "0.90× (0.80–1.00)")
    # Without the one-thread C server's figures, the rows stand without a baseline.
    alone = rp.table({k: v for k, v in samples.items() if k != rp.C_ONE}, {}, labels, [rp.C_CLONED])
    assert {(row.baseline, row.ratio) for row in alone if row.figure.startswith("server pinned")} == {("—", "—")}


def test_pinning_a_process_moves_every_thread_it_has() -> None:
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one CPU: nothing to pin apart")
    child = subprocess.Popen([sys.executable, "-c", "import threading, sys\n"
                              "ts = [threading.Thread(target=sys.stdin.readline) for _ in range(3)]\n"
                              "[t.start() for t in ts]\nprint(flush=True)\n[t.join() for t in ts]"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "\n"
        rp.pin_process(child.pid, 1)
        threads = [int(t) for t in os.listdir(f"/proc/{child.pid}/task")]
        assert len(threads) == 4 and all(os.sched_getaffinity(t) == {1} for t in threads)
    finally:
        child.communicate("\n\n\n", timeout=10)
