# The register watcher with its native detector, on a real DeviceSet without
# a mount: a store into config space or the mailbox bell (as a client's
# mapping would make it) is found and acted on; nothing stored, nothing done.
from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from ipufs.driver.devices import DeviceSet
from ipufs.driver.doorbells import RegisterWatcher
from ipufs.driver.filesystem import IpuFilesystem
from ipufs.model.icu import Header
from ipufs.model.profile import PROFILES
from ipufs.model.registers import REGISTERS


@pytest.fixture
def watcher() -> Iterator[RegisterWatcher]:
    devices = DeviceSet(PROFILES["ipu1"], 3)
    fs = IpuFilesystem(devices, passthrough=True)
    try:
        yield RegisterWatcher(fs, lock=threading.RLock())
    finally:
        devices.close()


def test_nothing_stored_nothing_done(watcher: RegisterWatcher) -> None:
    watcher.filesystem.register_users.update({0: 1, 2: 1})
    start = time.monotonic()
    assert watcher.round(timeout=0.05) == []
    assert time.monotonic() - start >= 0.04  # it waited out its round
    assert watcher.actions == 0


def test_a_stored_command_is_found_and_run(watcher: RegisterWatcher) -> None:
    fs = watcher.filesystem
    fs.register_users.update({0: 1, 2: 1})
    ipu = fs.devices.ipus[2]
    before = ipu.sync_counts[1]
    ipu.config.words[REGISTERS["CMD_SYNC"].offset // 4] = 12  # a GS1 sync, stored through a mapping
    assert watcher.round(timeout=1.0) == [2]
    assert ipu.sync_counts[1] == before + 1
    assert ipu.config.words[REGISTERS["CMD_SYNC"].offset // 4] == 0
    assert watcher.round(timeout=0.02) == []


def test_the_mailbox_bell_is_watched(watcher: RegisterWatcher) -> None:
    fs = watcher.filesystem
    fs.register_users[1] = 1
    fs.devices.ipus[1].icu.mailbox.words[Header.DOORBELL // 4] = 1
    assert watcher.round(timeout=1.0) == [1]
    assert fs.devices.ipus[1].icu.mailbox.words[Header.DOORBELL // 4] == 0


def test_only_open_ipus_are_watched(watcher: RegisterWatcher) -> None:
    fs = watcher.filesystem
    fs.register_users.update({0: 1, 1: 0})
    fs.devices.ipus[1].config.words[REGISTERS["CMD_SYNC"].offset // 4] = 1
    assert watcher.round(timeout=0.02) == []
    fs.register_users[1] = 1  # opened: watched from the next round
    assert watcher.round(timeout=1.0) == [1]
