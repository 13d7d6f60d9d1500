# Whether other users can run this installation of ipufs: a venv made from a
# Python under a directory they cannot enter (pyenv's under /root) leaves
# them `Permission denied` (status 126) before ipufs runs, so `ipufs doctor`
# and `./dev setup` name the directory and the cure (ipufs/doctor.py).
from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipufs.doctor import python_closed_to_users


@pytest.fixture
def public() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ipufs-reach-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def _python(at: Path) -> Path:
    at.mkdir(parents=True)
    python = at / "python3"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    return python


def test_a_python_everyone_reaches_is_fine(public: Path) -> None:
    assert python_closed_to_users(str(_python(public / "venv" / "bin"))) is None


def test_a_python_under_a_closed_directory_is_named_with_the_cure(public: Path) -> None:
    real = _python(public / "root" / "pyenv" / "bin")
    (public / "root").chmod(0o700)
    venv = public / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(real)  # the venv's link into pyenv, as `python -m venv` makes it
    said = python_closed_to_users(str(venv / "python"))
    assert said is not None and f"lies under {public / 'root'}, which other users cannot enter" in said
    assert "PYTHON=/usr/bin/python3 ./dev setup" in said and "status 126" in said


def test_a_python_others_may_not_run_is_named(public: Path) -> None:
    python = _python(public / "bin")
    python.chmod(0o750)
    said = python_closed_to_users(str(python))
    assert said is not None and f"lies under {python}," in said
