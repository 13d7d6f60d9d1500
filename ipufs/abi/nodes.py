# The device nodes the real driver publishes for each IPU N, in the order
# it lists them: ipuN (config space), ipuN_ex (exchange space), ipuN_mailbox
# (the ICU mailbox) and ipuN_mem (host exchange memory). The driver, the
# tools and the client library all name them from here
# (the real driver's /dev/ipuN* names, docs/abi.md).
from __future__ import annotations

#: Region name (ipufs.model.profile.Region's values) -> node name suffix.
SUFFIXES: dict[str, str] = {
    "config": "",
    "exchange": "_ex",
    "mailbox": "_mailbox",
    "host_memory": "_mem",
}


def node_name(ipu: int, region: str = "config") -> str:
    """The name of IPU ``ipu``'s node for ``region``: ipu0, ipu0_ex..."""
    return f"ipu{ipu}{SUFFIXES[region]}"
