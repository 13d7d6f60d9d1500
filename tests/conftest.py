from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.integration.engines import EngineSpace
    from tests.integration.harness import RunningDaemon


#: The fixtures whose tests run on one pytest-xdist worker, so that one
#: of its processes makes them once (-n with --dist loadgroup, as ./dev
#: test runs): the container engines (tests/integration/engines.py).
GROUPED = {"space": "engines"}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items if config.pluginmanager.hasplugin("xdist") else ():
        for fixture, group in GROUPED.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(group))
    if os.geteuid() == 0 and os.path.exists("/dev/fuse"):
        return
    skip = pytest.mark.skip(reason="mount tests need root and /dev/fuse")
    for item in items:
        if item.get_closest_marker("mount") is not None:  # not a test id that says "mount"
            item.add_marker(skip)


#: Which transports mount tests run on (tests/integration/harness.py):
#: IPUFS_TEST_TRANSPORT=classic, uring, or classic,uring. Unset: classic,
#: and also uring for the representative subset marked `uring`.
TRANSPORTS = os.environ.get("IPUFS_TEST_TRANSPORT")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker("mount") is None:
        return
    names = (TRANSPORTS.split(",") if TRANSPORTS else
             ["classic", "uring"] if metafunc.definition.get_closest_marker("uring") else ["classic"])
    if names != ["classic"]:  # test ids stay as they were on the default
        metafunc.parametrize("fuse_transport", names, indirect=True)


def _alone(item: pytest.Item) -> bool:
    """Whether ``item`` changes what every test on the machine shares:
    marked `alone`, or a mount test on FUSE over io_uring (the fuse
    module's enable_uring is Y meanwhile)."""
    callspec = getattr(item, "callspec", None)
    return item.get_closest_marker("alone") is not None or (
        callspec is not None and callspec.params.get("fuse_transport") == "uring")


#: The lock file of a pytest-xdist run (pytest_runtest_protocol below).
MACHINE_LOCK = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        fd, path = tempfile.mkstemp(prefix="ipufs-tests-", suffix=".lock")
        os.close(fd)
        config.stash[MACHINE_LOCK] = path


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: object) -> None:
    """pytest-xdist's controller gives each worker the run's lock file."""
    node.workerinput["machine_lock"] = node.config.stash[MACHINE_LOCK]  # type: ignore[attr-defined]


def pytest_unconfigure(config: pytest.Config) -> None:
    if MACHINE_LOCK in config.stash:
        os.unlink(config.stash[MACHINE_LOCK])


@pytest.hookimpl(hookwrapper=True, tryfirst=True)  # around pytest-timeout's: the wait is no part of a test's time
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    """Under pytest-xdist, a readers-writer lock over each test's setup,
    call and teardown (module fixtures included): a test that changes
    what the machine shares (_alone) runs while no other mount test of
    the run does, and mount tests share the machine with each other.
    The rest (the model, the protocol in memory, the tables) start no
    daemon and make no namespace, so they go on meanwhile, unlocked."""
    path = getattr(item.config, "workerinput", {}).get("machine_lock")
    alone = _alone(item)
    if path is None or not (alone or item.get_closest_marker("mount")):
        yield
        return
    with open(path) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        yield


@pytest.fixture(autouse=True)
def fuse_transport(request: pytest.FixtureRequest) -> Iterator[str]:
    """The transport this test's mounts use (parametrised above); for
    io_uring, the fuse module's enable_uring is Y for the test only."""
    name = getattr(request, "param", "classic")
    if name == "classic":
        yield name
        return
    from tests.integration import harness

    if not harness.ENABLE_URING.exists():
        pytest.skip("this kernel lacks FUSE over io_uring")
    with harness.on_transport(name):
        yield name


@pytest.fixture(scope="session")
def c_bar_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.integration.harness import ROOT, compile_c

    return compile_c(ROOT / "tests" / "c" / "bar_client.c", tmp_path_factory.mktemp("c"))


@pytest.fixture(scope="session")
def c_ipu_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """native/src/ipu_client.c, built as a tool writer would build it."""
    from tests.integration.harness import ROOT, compile_c

    return compile_c(ROOT / "native" / "src" / "ipu_client.c", tmp_path_factory.mktemp("ipu-client"))


@pytest.fixture(scope="session")
def space(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineSpace]:
    """One dockerd and one podman store (tests/integration/engines.py) for
    every container test of the session, with the test image in both."""
    from tests.integration.engines import EngineSpace, build_rootfs

    base = tmp_path_factory.mktemp("engines")
    s = EngineSpace(base)
    try:
        s.open()
        s.import_image(build_rootfs(base))
        yield s
    finally:
        s.close()


@pytest.fixture
def engine_mount(space: EngineSpace, tmp_path: Path) -> Iterator[RunningDaemon]:
    """Two ipu1 IPUs mounted under the engine space's anchor (so that the
    mount reaches the engines), their CDI spec (plain names:
    graphcore.ai/ipu=0, =1, =all) in the space's CDI directory."""
    import shutil

    from tests.integration.harness import running_daemon

    where = space.anchor / tmp_path.name
    where.mkdir()
    try:
        with running_daemon(where / "mnt", ipus=2, profile="ipu1", cdi_dir=str(space.cdi_dir),
                            cdi_prefix="") as d:
            yield d
    finally:
        shutil.rmtree(where)
