# `ipufs docker`: what gc-docker does, for FUSE nodes. With no ids it passes
# every IPU; an id `ipufs ls` prints passes that IPU, or a multi-IPU
# device's members. `docker --device` needs a character device, which a
# FUSE file is not, so the IPUs go in as CDI devices where the engine reads
# the mount's CDI spec, else as the mounts binds.py lists: the nodes, a
# tmpfs at /sys/bus/pci/devices with each IPU's directory of the sysfs view
# bound in, and the compatibility library with LD_PRELOAD (docs/docker.md).
from __future__ import annotations

import json
import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ipufs.container import binds, cdi
from ipufs.tools import devices, listing

ENGINES = ("docker", "podman")
#: Where podman 4 reads CDI specs (fixed; docker says its own in `docker info`).
PODMAN_CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
# `docker run`/`podman run` options that take no value: every other option
# written without '=' takes the next argument, and the first argument that
# is no option's is the image.
_FLAGS = {"--detach", "--interactive", "--tty", "--rm", "--privileged", "--init", "--read-only",
          "--publish-all", "--quiet", "--no-healthcheck", "--oom-kill-disable", "--sig-proxy",
          "--disable-content-trust", "--replace", "--rmi", "--no-hosts", "--http-proxy", "--env-host"}
_SHORT_FLAGS = set("ditPq")


class UsageError(ValueError):
    """A bad id, image or engine, with what would have been valid."""


def members(root: Path, ids: list[int]) -> list[int]:
    """The IPUs that ids stand for: every IPU for none; an IPU itself; a
    multi-IPU device's members (as `ipufs ls` lists them)."""
    found = listing.listing(root)
    singles = [i for i, _ in found.singles]
    if not ids:
        return singles
    groups = dict(found.groups)
    out: list[int] = []
    for i in ids:
        chosen = [i] if i in singles else groups.get(i)
        if chosen is None:
            valid = _ranges(singles) + (f"; multi-IPU {_ranges(list(groups))}" if groups else "")
            raise UsageError(f"no device {i} in {root} (valid: {valid}; see ipufs ls)")
        out += [m for m in chosen if m not in out]
    return out


def _ranges(values: list[int]) -> str:
    return f"{values[0]}-{values[-1]}" if len(values) > 2 and values == list(range(values[0], values[-1] + 1)) \
        else ", ".join(map(str, values)) or "none"


def image_of(run_args: list[str]) -> str | None:
    """The image named in `run` arguments (the first one no option takes)."""
    i = 0
    while i < len(run_args):
        arg = run_args[i]
        if arg == "--":
            return run_args[i + 1] if i + 1 < len(run_args) else None
        if arg.startswith("--"):
            i += 1 if "=" in arg or arg in _FLAGS else 2
        elif arg.startswith("-") and len(arg) > 1:
            i += 1 if all(c in _SHORT_FLAGS for c in arg[1:]) else 2
        else:
            return arg
    return None


def engine_cdi_dirs(engine: str) -> list[str]:
    """Where ``engine`` reads CDI specs; [] when it reads none."""
    if engine == "podman":
        return list(PODMAN_CDI_DIRS)
    try:
        out = subprocess.run([engine, "info", "--format", "{{json .CDISpecDirs}}"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    try:
        dirs = json.loads(out.stdout) if out.returncode == 0 else None
    except ValueError:
        return []  # an engine older than CDI (docker < 25) cannot expand the field
    return [str(d) for d in dirs] if isinstance(dirs, list) else []


@dataclass
class CdiDevices:
    """The CDI names of a mount's IPUs, from a spec an engine reads."""

    path: Path
    names: dict[int, str]


def find_spec(dirs: list[str], mount_dir: str) -> CdiDevices | None:
    """The spec of the mount at ``mount_dir`` in ``dirs``, if any."""
    for directory in dirs:
        for path in sorted(Path(directory).glob("*.json")):
            if cdi.owner(path) != mount_dir:
                continue
            data = json.loads(path.read_text())
            names = {}
            for device in data["devices"]:
                mounts = device.get("containerEdits", {}).get("mounts", [])
                node = os.path.basename(mounts[0]["hostPath"]) if mounts else ""
                if node[3:].isdigit() and len(mounts) == len(binds.ipu_edits(mount_dir, int(node[3:])).binds):
                    names[int(node[3:])] = str(device["name"])
            return CdiDevices(path, names)
    return None


def options(engine: str, root: Path, ids: list[int], *, use_cdi: bool = True) -> list[list[str]]:
    """The options of ``ENGINE run`` that pass IPUs ``ids`` (ipufs ls's ids;
    none: all) of the nodes in ``root``, one group (an option and its
    value) per mount, variable or CDI device."""
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r} (valid: {', '.join(ENGINES)})")
    ipus = members(root, ids)
    mount_dir = devices.mountpoint_of(root, ipus[0])
    for index in ipus:
        for name in binds.node_names(index):
            if not os.path.exists(os.path.join(mount_dir, name)):
                raise UsageError(f"{os.path.join(mount_dir, name)} does not exist")
    found = find_spec(engine_cdi_dirs(engine), mount_dir) if use_cdi else None
    if found is not None and all(i in found.names for i in ipus):
        # The spec brings the rest (binds.shared_edits, as its own edits).
        return [[f"--device={cdi.KIND}={found.names[i]}"] for i in ipus]
    edits = binds.edits(mount_dir, ipus)
    # Podman fills a tmpfs with what the image has at its place unless told
    # not to (tmpcopyup); docker never does, and knows no such option.
    copy = ",notmpcopyup" if engine == "podman" else ""
    passed = [["--mount", f"type=tmpfs,destination={t.target},tmpfs-mode={t.mode:o}{copy}"] for t in edits.tmpfs]
    passed += [["--mount", f"type=bind,source={b.source},target={b.target}" + (",readonly" if b.read_only else "")]
               for b in edits.binds]
    passed += [["--env", f"{key}={value}"] for key, value in edits.env]
    return passed


def command(engine: str, root: Path, ids: list[int], run_args: list[str], *, use_cdi: bool = True) -> list[str]:
    """``ENGINE run`` with IPUs ``ids`` (ipufs ls's ids; none: all) of the
    nodes in ``root`` passed in, then ``run_args`` (options, image, command)."""
    return [engine, "run", *(arg for group in options(engine, root, ids, use_cdi=use_cdi) for arg in group),
            *run_args]


def echo(engine: str, groups: list[list[str]], run_args: list[str]) -> str:
    """The command as a shell reads it, one mount, variable or device a
    line (continued with a backslash), RUN-ARGS on the last."""
    lines = [f"{engine} run", *(shlex.join(group) for group in groups)]
    if run_args:
        lines.append(shlex.join(run_args))
    return " \\\n    ".join(lines)


def check_image(engine: str, run_args: list[str]) -> None:
    """Fail in one line unless the image named in ``run_args`` is in the
    engine's store (gc-docker's users get no silent pull)."""
    image = image_of(run_args)
    if image is None:
        raise UsageError("name an image after --, as for `docker run`")
    try:
        found = subprocess.run([engine, "image", "inspect", image], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise UsageError(f"{engine} is not installed (valid engines: {', '.join(ENGINES)})") from None
    except subprocess.TimeoutExpired:
        raise UsageError(f"{engine} did not answer within 60 s") from None
    said = [line for line in found.stderr.splitlines() if line.strip()]
    if found.returncode != 0 and not any(w in " ".join(said).lower() for w in ("no such", "not known", "not found")):
        raise UsageError(f"{engine}: {said[-1] if said else 'image inspect failed'}")
    if found.returncode != 0:
        raise UsageError(f"no image {image!r} in {engine}'s store (`{engine} images` lists them; "
                         f"`{engine} pull {image}` fetches it)")
