# Who is at the other end of a control connection, as the kernel says when
# it is accepted (SO_PEERCRED, SO_PEERGROUPS: credentials taken at connect,
# which a client cannot forge), and who of them may use the operations that
# change the device (docs/control.md, "Who may do what").
from __future__ import annotations

import errno
import grp
import os
import socket
import struct
from dataclasses import dataclass
from typing import Protocol

from ipufs.daemon.control.protocol import RequestRefused
from ipufs.driver.driver import IpuDriver
from ipufs.driver.system import SystemCalls

#: linux/socket.h; Python 3.11's socket module does not name it.
SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)
_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


#: The most getsockopt takes from Python (1024 bytes: 256 groups).
_GROUPS_BYTES = 1024


def _groups_of(pid: int) -> frozenset[int]:
    """A process's supplementary groups, from /proc (none when unreadable)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Groups:"):
                    return frozenset(int(g) for g in line.split()[1:])
    except (OSError, ValueError):
        pass
    return frozenset()


class Socket(Protocol):
    """A connected Unix socket (the standard library's, or trio's)."""

    def getsockopt(self, level: int, option: int, buflen: int) -> bytes: ...


@dataclass(frozen=True, slots=True)
class Peer:
    """A control client: its pid (as the daemon's PID namespace sees it; 0
    when it lives outside it), its uid, gid and supplementary groups."""

    pid: int
    uid: int
    gid: int
    groups: frozenset[int] = frozenset()

    @classmethod
    def of(cls, sock: Socket) -> Peer:
        """The peer of connected Unix socket ``sock``."""
        pid, uid, gid = _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
        try:
            raw = sock.getsockopt(socket.SOL_SOCKET, SO_PEERGROUPS, _GROUPS_BYTES)
            groups = frozenset(struct.unpack(f"{len(raw) // 4}I", raw[: len(raw) // 4 * 4]))
        except OSError as exc:
            if exc.errno != errno.ERANGE:
                raise
            groups = _groups_of(pid)  # more than Python lets getsockopt hold
        return cls(pid, uid, gid, groups)

    def member_of(self, gid: int) -> bool:
        return gid == self.gid or gid in self.groups


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


class ControlRights:
    """Who may use the control operations that change the device (inject,
    plan): root, the daemon's own user, and members of ``group`` (the
    control_group setting; None: nobody more). While a process is attached
    to an IPU and the driver's while_attached rule is exclusive, only root
    and that process's user may change that IPU this way."""

    def __init__(self, group: int | None, driver: IpuDriver, system: SystemCalls,
                 daemon_uid: int | None = None) -> None:
        self.group = group
        self.driver = driver
        self.system = system
        self.daemon_uid = os.geteuid() if daemon_uid is None else daemon_uid

    def check(self, peer: Peer, what: str, ipus: list[int]) -> None:
        """Refuse (RequestRefused) ``what`` on ``ipus`` to ``peer`` unless it may."""
        if peer.uid != 0 and peer.uid != self.daemon_uid and not (
                self.group is not None and peer.member_of(self.group)):
            who = (f"members of the control group {_group_name(self.group)}" if self.group is not None
                   else "no one else (the control_group setting names a group that may)")
            raise RequestRefused(f"permission denied: only root, the daemon's user (uid {self.daemon_uid}) and "
                                 f"{who} may {what}")
        if peer.uid == 0:
            return
        rule = self.driver.while_attached
        for ipu in sorted(set(ipus)):
            holder = rule.holder(ipu, None, False)
            if holder is not None and self.system.uid_of(holder) != peer.uid:
                raise RequestRefused(f"IPU {ipu} is attached to process {holder} of another user: while it is, "
                                     f"only that user and root may {what} (while_attached = \"exclusive\")")
