# The FUSE kernel protocol, spoken by ipufs itself: a sans-IO core (abi,
# requests, replies, session) and the shell that owns /dev/fuse (channel,
# mount, server and its reader thread).
