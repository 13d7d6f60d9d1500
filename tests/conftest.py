from __future__ import annotations

import os
from pathlib import Path

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() == 0 and os.path.exists("/dev/fuse"):
        return
    skip = pytest.mark.skip(reason="mount tests need root and /dev/fuse")
    for item in items:
        if item.get_closest_marker("mount") is not None:  # not a test id that says "mount"
            item.add_marker(skip)


@pytest.fixture(scope="session")
def c_bar_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.integration.harness import ROOT, compile_c

    return compile_c(ROOT / "tests" / "c" / "bar_client.c", tmp_path_factory.mktemp("c"))


@pytest.fixture(scope="session")
def c_ipu_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """native/src/ipu_client.c, built as a tool writer would build it."""
    import subprocess

    from tests.integration.harness import ROOT

    out = tmp_path_factory.mktemp("ipu-client") / "ipu-client"
    subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "native" / "include"),
                    "-o", str(out), str(ROOT / "native" / "src" / "ipu_client.c")], check=True)
    return out
