# The PCIe-driver personality: the node tree, open files and their backing
# memory, the 0xED ioctls, attachments and their signals, DMA into attached
# buffers, joining the FUSE core and the model.
