# The device plugin subscribes to the daemon's trace by kind of event
# (ipufs/deviceplugin/watch.py); the kinds are the driver's records
# (ipufs/driver/events.py), which the plugin may not import. Each kind is
# either watched or named as unwatched, so a kind added, renamed or
# removed on one side fails here instead of being refused by the daemon
# at run time or silently missed.
from __future__ import annotations

from ipufs.daemon.control import operations
from ipufs.deviceplugin import watch
from ipufs.driver import events


def test_every_kind_of_event_is_watched_or_named_as_not() -> None:
    watched, unwatched = set(watch.TRACE_KINDS), set(watch.UNWATCHED_KINDS)
    assert not watched & unwatched, watched & unwatched
    assert len(watched) == len(watch.TRACE_KINDS) and len(unwatched) == len(watch.UNWATCHED_KINDS)
    assert watched | unwatched == set(events.KINDS)


def test_the_daemon_takes_the_kinds_the_plugin_asks_for() -> None:
    # The field the control socket's `trace` operation checks `kinds` with.
    assert operations.TRACE_KINDS.check(list(watch.TRACE_KINDS)) == list(watch.TRACE_KINDS)
