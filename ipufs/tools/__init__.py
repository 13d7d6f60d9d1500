# The gc-style command-line tools (ls, info, monitor, reset, docker): each
# reads the devices as a real tool would, through ipufs.client.
