# Board serial numbers, shaped as Graphcore's tools print them: three
# groups of decimal digits, unit.product.batch, as in gc-info's
# "board serial number: 0063.0063.822391" (C600) or "0340.0004.919062" (C2)
# (the samples of Graphcore's command-line tools documentation). The one
# definition of an emulated board's serial: the model stores it in
# BOARD_SERIAL_HI/LO as the integer of its 14 digits, the tools print it.
from __future__ import annotations

#: The middle group of the serial for each board type: 0004 (C2) and 0063
#: (C600) as on Graphcore's published samples, 0002 as on an IPU-M2000's.
PRODUCT_CODES = {"C2": 4, "M2000": 2, "C600": 63}
#: ipufs's boards were made in no batch: the last group is ipufs's own.
BATCH = 0
_DIGITS = 14


def board_serial(board_type: str, board: int) -> int:
    """The serial of emulated board number ``board`` (0, 1, ...): unit
    ``board + 1``, the board type's product code, ipufs's batch."""
    return ((board + 1) % 10_000 * 10_000 + PRODUCT_CODES.get(board_type, 0)) * 1_000_000 + BATCH


def serial_text(serial: int) -> str:
    """``0001.0063.000000``: the serial as the tools print it."""
    digits = f"{serial:0{_DIGITS}d}"
    return f"{digits[:-10]}.{digits[-10:-6]}.{digits[-6:]}"
