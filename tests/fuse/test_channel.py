# The one way anything is written to /dev/fuse (channel.write): a reply or
# notification the kernel no longer wants (ENOENT: withdrawn, or no inode;
# ENODEV: the connection ended) is reported as False, any other failure is
# raised; the /dev/fuse transport's replies and notifications both use it.
from __future__ import annotations

import errno
import os

import pytest

from ipufs.fuse import channel
from ipufs.fuse.channel import FuseChannel
from ipufs.fuse.devfuse import DevFuse


def refusing(code: int) -> object:
    def write(fd: int, message: bytes) -> int:
        raise OSError(code, os.strerror(code))
    return write


@pytest.mark.parametrize("code", [errno.ENOENT, errno.ENODEV])
def test_what_nobody_waits_for_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    read_end, write_end = os.pipe()
    transport = DevFuse(FuseChannel(write_end), spin_for=0)
    try:
        monkeypatch.setattr(os, "write", refusing(code))
        assert channel.write(b"x", write_end) is False
        assert transport.reply(b"x", write_end) is False
        assert transport.notify(b"x") is False
    finally:
        monkeypatch.undo()
        transport.close()
        os.close(read_end)


def test_other_failures_are_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    read_end, write_end = os.pipe()
    transport = DevFuse(FuseChannel(write_end), spin_for=0)
    try:
        monkeypatch.setattr(os, "write", refusing(errno.EIO))
        with pytest.raises(OSError) as info:
            transport.notify(b"x")
        assert info.value.errno == errno.EIO
    finally:
        monkeypatch.undo()
        transport.close()
        os.close(read_end)


def test_replies_and_notifications_reach_the_descriptor() -> None:
    read_end, write_end = os.pipe()
    transport = DevFuse(FuseChannel(write_end), spin_for=0)
    try:
        assert transport.notify(b"note") and transport.reply(b"reply", write_end)
        assert os.read(read_end, 100) == b"notereply"
    finally:
        transport.close()
        os.close(read_end)
    assert not transport.connected()
