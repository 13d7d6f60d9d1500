# The FUSE kernel protocol, spoken by ipufs itself: a sans-IO core
# (abi, requests, replies, session) and a thin trio shell (channel, mount).
