# The command line that runs `ipufs ARGS...` as another process: the daemon
# `ipufs run` starts, and the CDI hook a container runtime runs as root with
# the container's root filesystem as its working directory (OCI runtime
# spec, "Hooks"). Either may start anywhere: in a shared /tmp holding a
# planted `ipufs/` package, inside a checkout of ipufs that is not the
# installed one, or in a hostile image. So it must run this very
# installation's code whatever the working directory, the environment or
# the image holds:
#
# - the interpreter is this one, by absolute path;
# - `-I` (isolated mode: no working directory or script directory on
#   sys.path, no PYTHON* variables such as PYTHONPATH, PYTHONHOME,
#   PYTHONSTARTUP or PYTHONWARNINGS, no user site-packages), so that only
#   the installation's own paths are searched;
# - the ipufs package is loaded from the file this process loaded it from
#   (its absolute path is an argument), before anything else is imported,
#   so the child runs the same ipufs even when it was not found through
#   site-packages (an uninstalled checkout on PYTHONPATH);
# - this process's import path, as absolute directories, goes after the
#   child's own (where this one found trio or numpy through PYTHONPATH, so
#   does the child), less its first entry unless -P or -I dropped it
#   (Python puts the script's directory or the working directory there);
# - the environment is the caller's to give: the hook's is empty.
from __future__ import annotations

import json
import os
import sys

import ipufs

#: Loads package ``ipufs`` from the file named by argv[1], with argv[2] (a
#: JSON list) after the import path, then runs the CLI with the remaining
#: arguments. Only the standard library before that.
_BOOT = ("import importlib.util, json, sys; "
         "spec = importlib.util.spec_from_file_location('ipufs', sys.argv.pop(1)); "
         "sys.path += [p for p in json.loads(sys.argv.pop(1)) if p not in sys.path]; "
         "module = importlib.util.module_from_spec(spec); sys.modules['ipufs'] = module; "
         "spec.loader.exec_module(module); "
         "from ipufs.cli import main; sys.exit(main())")


def interpreter() -> str:
    """This Python, by absolute path."""
    if not sys.executable:
        raise RuntimeError("cannot tell which Python runs ipufs (sys.executable is empty)")
    return os.path.abspath(sys.executable)


def package_file() -> str:
    """The absolute path of this installation's ipufs/__init__.py."""
    assert ipufs.__file__ is not None
    return os.path.abspath(ipufs.__file__)


def import_path() -> list[str]:
    """This process's import path that does not depend on where it was
    started: absolute entries, less the working or script directory."""
    found = sys.path if sys.flags.safe_path else sys.path[1:]
    return [p for p in found if os.path.isabs(p)]


def argv(*args: str) -> list[str]:
    """The argv of `ipufs ARGS...` run by this installation, immune to
    the working directory and the environment it starts in."""
    return [interpreter(), "-I", "-c", _BOOT, package_file(), json.dumps(import_path()), *args]
