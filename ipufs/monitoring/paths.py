# Where the importable `gcipuinfo` lives: a directory holding that one
# module, which ipufs puts on PYTHONPATH only where it is asked to (`ipufs
# run`, or a user's own PYTHONPATH; docs/monitoring.md, "Finding the module").
from __future__ import annotations

from pathlib import Path

import ipufs


def module_dir() -> Path:
    """The directory to put on PYTHONPATH for `import gcipuinfo`."""
    return Path(ipufs.__file__).resolve().parent / "pythonpath"
