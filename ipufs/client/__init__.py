"""A small client library for tool authors: what libipu_user is to the
real driver. Open an IPU's nodes, map its BARs, attach, receive signals."""

from ipufs.client.control import Control, ControlError, ControlTimeout
from ipufs.client.device import Device, IoctlError
from ipufs.client.loader import LoadError
from ipufs.client.mailbox import Mailbox
from ipufs.client.signals import SignalInfo, SignalReceiver
from ipufs.client.where import default_root

__all__ = ["Control", "ControlError", "ControlTimeout", "Device", "IoctlError", "LoadError", "Mailbox", "SignalInfo",
           "SignalReceiver", "default_root"]
