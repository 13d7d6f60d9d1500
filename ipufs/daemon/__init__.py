"""The composition root: the daemon that builds the devices, the driver and
the FUSE server of one mount and hands each its collaborators; its
configuration, /dev links, the register watcher, faults and fault plans,
the trace, and the control server."""
