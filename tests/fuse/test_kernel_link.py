# The KernelLink the filesystem and the server share: before the server
# connects it, backing files are refused with EBADF (the filesystem then
# falls back to the page cache) and notifications wait; once connected,
# they reach the channel in order, and drain() returns when they have.
from __future__ import annotations

import errno
import os

import pytest
import trio

from ipufs.fuse.channel import FuseChannel
from ipufs.fuse.devfuse import DevFuse
from ipufs.fuse.kernel import KernelLink


def test_backing_files_are_refused_while_not_connected() -> None:
    with pytest.raises(OSError) as info:
        KernelLink().backing_open(0)
    assert info.value.errno == errno.EBADF


def test_notifications_queued_early_reach_the_channel_in_order() -> None:
    read_end, write_end = os.pipe()
    link = KernelLink()
    link.notify(b"one")  # before the server connects: kept

    async def main() -> None:
        link.connect(DevFuse(FuseChannel(write_end), spin_for=0))
        link.notify(b"two")
        with trio.fail_after(5):
            await link.drain()
        await link.disconnect()

    try:
        trio.run(main)
        assert os.read(read_end, 100) == b"onetwo"
        assert link.transport is None
    finally:
        os.close(read_end)
        os.close(write_end)
