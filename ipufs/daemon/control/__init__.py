# The daemon's control channel: a Unix socket speaking JSON lines, for
# tools and tests to ask what only the daemon knows (docs/control.md).
