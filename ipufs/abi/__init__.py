"""What host programs, the daemon and the header generator share, with no
dependencies: the ioctl table, the device node names, the config space
register map, the ICU's wire format, the interrupt sources and their
signals."""
