# The FUSE kernel protocol, spoken by ipufs itself: a sans-IO core (abi,
# requests and their decoding, replies, the operations contract, session)
# and the shell that owns /dev/fuse (channel, mount, the kernel link for
# backing files and notifications, the server and its reader thread).
