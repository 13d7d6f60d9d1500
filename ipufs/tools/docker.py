# `ipufs docker`: what gc-docker does, for FUSE nodes. `docker --device`
# needs a character device, which a FUSE file is not, so each node is
# bind-mounted at /dev/ipuN... inside the container instead (docs/docker.md).
from __future__ import annotations

import os
from pathlib import Path

SUFFIXES = ("", "_ex", "_mailbox", "_mem")


def mounts(root: Path, ids: list[int]) -> list[str]:
    args = []
    for index in ids:
        for suffix in SUFFIXES:
            name = f"ipu{index}{suffix}"
            source = os.path.realpath(root / name)
            if not os.path.exists(source):
                raise FileNotFoundError(f"{root / name} does not exist")
            args += ["--mount", f"type=bind,source={source},target=/dev/{name}"]
    return args


def command(engine: str, root: Path, ids: list[int], docker_args: list[str]) -> list[str]:
    """``ENGINE run --mount ... DOCKER_ARGS``; ``docker_args`` are what
    follows ``run`` (options, image, command)."""
    return [engine, "run", *mounts(root, ids), *docker_args]
