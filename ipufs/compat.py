# Where the pieces that make unmodified clients of the real driver work are:
# the compatibility library preloaded into them (native/src/ipufs_compat.c,
# built beside this package by `pip install`), and the sysfs view of a mount
# that stands for /sys/bus/pci/devices. `ipufs run`, `ipufs docker`, CDI
# specs and the device plugin bind both at the places named here
# (docs/compat.md, docs/sysfs.md). It imports nothing of ipufs, so that
# every layer may use it.
from __future__ import annotations

import os
from pathlib import Path

#: Where containers get the library bound (and LD_PRELOAD names it).
CONTAINER_LIBRARY = "/usr/lib/ipufs/libipufs-compat.so"
#: Where containers (and `ipufs run`) get the sysfs view bound.
CONTAINER_SYSFS = "/sys/bus/pci/devices"
#: The environment variable that tells the library where the view is when
#: it is not bound at /sys/bus/pci/devices.
SYSFS_ENV = "IPUFS_SYSFS"
LIBRARY_NAME = "libipufs-compat.so"
#: What udev's libraries (sd-device: udevadm, libudev, pyudev) need to
#: accept the view's devices: they refuse a device directory that is not
#: on sysfs unless told not to check (systemd's docs/ENVIRONMENT.md names
#: this variable for testing purposes), and the view is on FUSE.
UDEV_ENVIRONMENT = {"SYSTEMD_DEVICE_VERIFY_SYSFS": "0"}
#: Where the view's listing of PCI devices sits, below a mount's root:
#: links into SYSFS_PATH/devices, as in sysfs.
DEVICES_PATH = ("sys", "bus", "pci", "devices")
#: The view's /sys, below a mount's root.
SYSFS_PATH = ("sys",)


def library_path() -> Path:
    """The host path of the built compatibility library; FileNotFoundError
    (one line) when the package was installed without its native layer."""
    path = Path(__file__).resolve().parent / LIBRARY_NAME
    if not path.is_file():
        raise FileNotFoundError(f"the compatibility library {path} is missing: reinstall ipufs "
                                "(`pip install .` or `./dev setup` builds it)")
    return path


def sysfs_view(mountpoint: str | os.PathLike[str]) -> Path:
    """The host path of the directory of ``mountpoint``'s sysfs view that
    stands for /sys/bus/pci/devices (one PCI device directory per IPU)."""
    return Path(mountpoint).joinpath(*DEVICES_PATH)


def sysfs_root(mountpoint: str | os.PathLike[str]) -> Path:
    """The host path of ``mountpoint``'s whole view, what stands for /sys."""
    return Path(mountpoint).joinpath(*SYSFS_PATH)


def sysfs_device(mountpoint: str | os.PathLike[str], address: str) -> Path:
    """The host path of one IPU's device directory in the view (``address``:
    its PCI address, ipufs.abi.pci.pci_address; the directory sits in the
    view's devices tree, below its root bus pciDDDD:BB), for a container
    that gets some of a mount's IPUs: bind each at CONTAINER_SYSFS/ADDRESS."""
    return sysfs_root(mountpoint) / "devices" / f"pci{address[:7]}" / address


def preload(environment: dict[str, str], library: Path | str | None = None) -> dict[str, str]:
    """``environment`` with the library put first in LD_PRELOAD (once)."""
    path = str(library or library_path())
    others = [p for p in environment.get("LD_PRELOAD", "").replace(":", " ").split() if p != path]
    return {**environment, "LD_PRELOAD": " ".join([path, *others])}
