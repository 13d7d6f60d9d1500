# The PCIe-driver personality: the node tree, open files, backing memory,
# and (later) ioctls, attachments and signals, joining FUSE and the model.
