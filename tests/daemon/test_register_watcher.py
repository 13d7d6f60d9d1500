# The register watcher with its native detector, on a real DeviceSet without
# a mount: a store into config space or the mailbox bell (as a client's
# mapping would make it) is found and acted on; nothing stored, nothing done.
# The FUSE reader scans the same watch while it spins, and the watcher's
# thread sleeps meanwhile.
from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import pytest

from ipufs import native
from ipufs.driver.devices import DeviceSet
from ipufs.driver.register_watcher import RegisterWatcher
from tests.driver.rig import Rig
from ipufs.abi.icu import Header
from ipufs.model.profile import PROFILES
from ipufs.abi.registers import REGISTERS


@pytest.fixture
def watcher() -> Iterator[RegisterWatcher]:
    devices = DeviceSet(PROFILES["ipu1"], 3)
    rig = Rig(devices)
    try:
        yield RegisterWatcher(devices, rig.use, rig.work)
    finally:
        devices.close()


def test_nothing_stored_nothing_done(watcher: RegisterWatcher) -> None:
    watcher.use.users.update({0: 1, 2: 1})
    start = time.monotonic()
    assert watcher.round(timeout=0.05) == []
    assert time.monotonic() - start >= 0.04  # it waited out its round
    assert watcher.actions == 0


def test_a_stored_command_is_found_and_run(watcher: RegisterWatcher) -> None:
    watcher.use.users.update({0: 1, 2: 1})
    ipu = watcher.devices.ipus[2]
    before = ipu.host_sync.counts[1]
    ipu.config.words[REGISTERS["CMD_SYNC"].offset // 4] = 12  # a GS1 sync, stored through a mapping
    assert watcher.round(timeout=1.0) == [2]
    assert ipu.host_sync.counts[1] == before + 1
    assert ipu.config.words[REGISTERS["CMD_SYNC"].offset // 4] == 0
    assert watcher.round(timeout=0.02) == []


def test_the_mailbox_bell_is_watched(watcher: RegisterWatcher) -> None:
    watcher.use.users[1] = 1
    watcher.devices.ipus[1].icu.mailbox.words[Header.DOORBELL // 4] = 1
    assert watcher.round(timeout=1.0) == [1]
    assert watcher.devices.ipus[1].icu.mailbox.words[Header.DOORBELL // 4] == 0


def test_only_open_ipus_are_watched(watcher: RegisterWatcher) -> None:
    watcher.use.users.update({0: 1, 1: 0})
    watcher.devices.ipus[1].config.words[REGISTERS["CMD_SYNC"].offset // 4] = 1
    assert watcher.round(timeout=0.02) == []
    watcher.use.users[1] = 1  # opened: watched from the next round
    assert watcher.round(timeout=1.0) == [1]


# --- the FUSE reader's share: it scans while it spins, the thread sleeps ---
@pytest.fixture
def idle_fd() -> Iterator[int]:
    """A non-blocking fd with nothing to read, as a quiet FUSE connection."""
    r, w = os.pipe()
    os.set_blocking(r, False)
    try:
        yield r
    finally:
        os.close(r)
        os.close(w)


def test_a_spinning_reader_finds_a_store_and_the_watcher_acts(watcher: RegisterWatcher, idle_fd: int) -> None:
    watcher.use.users[2] = 1
    assert watcher.round(timeout=0.01) == []  # builds the watch
    watch = watcher.current()
    assert watch is not None
    ipu = watcher.devices.ipus[2]
    before = ipu.host_sync.counts[1]
    spin = native.SpinReader(idle_fd, bytearray(64), watcher.awake)
    ipu.config.words[REGISTERS["CMD_SYNC"].offset // 4] = 12
    assert spin.read(5.0, watch) is None and spin.found == [0]
    assert watcher.awake  # still awake while it acts
    assert watcher.changed(watch, [0])
    assert ipu.host_sync.counts[1] == before + 1
    assert spin.read(0.005, watch) is None and spin.found == []  # nothing more; the spin ended
    assert not watcher.awake


def test_a_store_with_nothing_to_do_is_reported(watcher: RegisterWatcher) -> None:
    watcher.use.users[0] = 1
    watcher.round(timeout=0.01)
    watch = watcher.current()
    assert watch is not None
    ipu = watcher.devices.ipus[0]
    ipu.config.words[REGISTERS["DEVICE_ID"].offset // 4] ^= 1  # read-only: restored, nothing run
    assert not watcher.changed(watch, [0])


def test_the_watcher_sleeps_while_the_reader_is_awake(watcher: RegisterWatcher, idle_fd: int) -> None:
    watcher.use.users[1] = 1
    watcher.round(timeout=0.01)
    spin = native.SpinReader(idle_fd, bytearray(64), watcher.awake)
    spinner = threading.Thread(target=spin.read, args=(0.5,))  # spins, scanning nothing
    found: list[int] = []
    waiter = threading.Thread(target=lambda: found.extend(watcher.round(timeout=5.0)))
    spinner.start()
    try:
        while not watcher.awake:
            time.sleep(0.001)
        waiter.start()
        time.sleep(0.05)  # the waiter has scanned once and sleeps on the reader
        watcher.devices.ipus[1].config.words[REGISTERS["CMD_SYNC"].offset // 4] = 12
        time.sleep(0.1)
        assert waiter.is_alive() and watcher.actions == 0
    finally:
        spinner.join(5)
        if waiter.ident is not None:
            waiter.join(5)
    assert not watcher.awake
    assert found == [1]  # found once the reader went to sleep
