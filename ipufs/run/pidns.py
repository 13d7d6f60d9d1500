# The PID namespace `ipufs run` gives COMMAND, so that nothing COMMAND
# starts outlives the run (pid_namespaces(7)): the first process forked
# after unshare(CLONE_NEWPID) is the namespace's init, and when it ends the
# kernel kills (SIGKILL) every other process in the namespace, however many
# times they forked or whoever re-parented them. That init is ours: it
# runs COMMAND, passes SIGTERM and SIGHUP on to it, reaps the orphans, and
# exits with COMMAND's status as soon as COMMAND ends. It dies with the
# supervisor (PR_SET_PDEATHSIG, SIGKILL), so killing `ipufs run` with
# SIGKILL still ends the whole namespace.
#
# The namespace also gets its own /proc (in a mount namespace of its own,
# below the run's), so that COMMAND's getpid() names its /proc entry;
# where proc cannot be mounted (a host /proc with hidden parts), COMMAND
# keeps the run's /proc.
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from typing import NoReturn

from ipufs import native

CLONE_NEWPID = 0x20000000
MS_NOEXEC = 0x8
#: Exit statuses of the init when it could not run COMMAND (as `ipufs run`'s).
FAILED, CANNOT_RUN, NOT_FOUND = 125, 126, 127


def status_of(wait_status: int) -> int:
    """An exit status as a shell gives it: 128 + N for signal N."""
    return 128 + os.WTERMSIG(wait_status) if os.WIFSIGNALED(wait_status) else os.WEXITSTATUS(wait_status)


def start(command: list[str], env: dict[str, str]) -> tuple[int, int]:
    """Start COMMAND under our init in a new PID namespace. Returns the
    init's PID and a descriptor to keep open while this process lives (its
    end tells an init started just as this process died to exit). This
    process must not fork again: its next child would land in the
    namespace, which ends with the init."""
    native.unshare(CLONE_NEWPID)
    alive_r, alive_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        _init_process(command, env, alive_r, alive_w)
    os.close(alive_r)
    return pid, alive_w


def _init_process(command: list[str], env: dict[str, str], alive_r: int, alive_w: int) -> NoReturn:
    status = FAILED
    try:
        os.close(alive_w)
        status = _init(command, env, alive_r)
    except BaseException as exc:  # nothing may return into the supervisor's code
        print(f"ipufs run: cannot start {command[0]}: {exc}", file=sys.stderr, flush=True)
    finally:
        os._exit(status)


def _init(command: list[str], env: dict[str, str], alive: int) -> int:
    child: subprocess.Popen[bytes] | None = None
    pending: list[int] = []

    def forward(signum: int, frame: object) -> None:
        if child is None:
            pending.append(signum)
        elif child.returncode is None:
            child.send_signal(signum)

    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, forward)
    for s in (signal.SIGINT, signal.SIGQUIT):  # the terminal sends them to COMMAND itself
        signal.signal(s, signal.SIG_IGN)
    native.child_setup(signal.SIGKILL)
    if select.select([alive], [], [], 0)[0]:
        return FAILED  # the supervisor died before the death signal was set
    os.close(alive)
    _own_proc()
    try:
        child = subprocess.Popen(command, env=env, preexec_fn=_default_signals)
    except FileNotFoundError:
        print(f"ipufs run: {command[0]}: command not found", file=sys.stderr, flush=True)
        return NOT_FOUND
    except PermissionError as exc:
        print(f"ipufs run: {command[0]}: {exc.strerror}", file=sys.stderr, flush=True)
        return CANNOT_RUN
    for signum in pending:
        child.send_signal(signum)
    while True:
        pid, wait_status = os.waitpid(-1, 0)  # reaps orphans too
        if pid == child.pid:
            child.returncode = status_of(wait_status)
            return child.returncode


def _default_signals() -> None:
    # An ignored signal stays ignored across exec: COMMAND gets Ctrl-C back.
    for s in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(s, signal.SIG_DFL)


def _own_proc() -> None:
    try:
        native.unshare(native.CLONE_NEWNS)
        native.mount("none", "/", "", native.MS_REC | native.MS_SLAVE, "")
        native.mount("proc", "/proc", "proc", native.MS_NOSUID | native.MS_NODEV | MS_NOEXEC, "")
    except OSError:
        pass  # the run's /proc stays: every process is still there, by its outer PID
