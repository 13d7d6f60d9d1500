# Telling systemd about a service's state (sd_notify(3): a datagram of
# "KEY=VALUE" lines to $NOTIFY_SOCKET, for units of Type=notify). The
# daemon (`ipufs mount`), the device plugin and the exporter all use it.
from __future__ import annotations

import logging
import os
import socket

log = logging.getLogger("ipufs")


def sd_notify(message: str) -> None:
    """Tell systemd (Type=notify) about our state, when it is listening."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.connect(address)
            s.sendall(message.encode())
    except OSError as exc:  # a manager that went away must not stop the daemon
        log.debug("could not notify %s: %s", address, exc)
