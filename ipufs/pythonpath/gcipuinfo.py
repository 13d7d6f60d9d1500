# `import gcipuinfo` for programs written for real IPUs (docs/monitoring.md).
# This directory is on PYTHONPATH only where ipufs puts it: in `ipufs run`,
# or where a user adds `ipufs gcipuinfo-path` by hand. A real gcipuinfo
# anywhere else on sys.path wins: it is loaded in this module's place.
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_OTHERS = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
_REAL = importlib.machinery.PathFinder.find_spec(__name__, _OTHERS)

if _REAL is not None and _REAL.loader is not None:
    _module = importlib.util.module_from_spec(_REAL)
    sys.modules[__name__] = _module
    _REAL.loader.exec_module(_module)
else:
    try:
        from ipufs.monitoring.ipuinfo import *  # noqa: F401,F403
    except ImportError as exc:
        raise ImportError(f"gcipuinfo: ipufs's module runs in a Python that has ipufs installed; {sys.executable} "
                          f"cannot load it ({exc}): run the program with the Python ipufs is installed in "
                          "(docs/monitoring.md)") from None
