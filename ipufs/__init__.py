"""ipufs: Graphcore IPU device nodes emulated in userspace over FUSE."""

__version__ = "0.1.0"
