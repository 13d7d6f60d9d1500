# Fixtures shared by the integration tests that drive one M2000 board with
# scriptable client processes.
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.harness import PyClient, RunningDaemon, running_daemon


@pytest.fixture
def board(tmp_path: Path) -> Iterator[RunningDaemon]:
    """One M2000 board: four ipu2 IPUs in one GS2 group."""
    with running_daemon(tmp_path / "mnt", ipus=4, profile="ipu2") as d:
        yield d


@pytest.fixture
def py_client(board: RunningDaemon) -> Iterator[Callable[[int], PyClient]]:
    """Starts PyClients on the board's IPUs; closes them all afterwards."""
    started: list[PyClient] = []

    def start(ipu: int = 0) -> PyClient:
        c = PyClient(board.mountpoint, ipu)
        started.append(c)
        return c

    yield start
    for c in started:
        c.close()
