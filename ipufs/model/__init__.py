# The IPU as plain data and methods (numpy): no I/O, no clock reads.
