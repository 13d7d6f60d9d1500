# The lines `ipufs run` adds to the command's pci.ids (ipufs/run/pci_names.py):
# each id of the run's IPUs the database lacks gets a line inside its
# vendor's block (a second block of one vendor makes pciutils refuse the
# file), and nothing named already is touched.
from __future__ import annotations

from ipufs.run.pci_names import PciDevice, amended

HOST = """\
# pci.ids
1d94  Chengdu Haiguang IC Design Co., Ltd.
1d95  Graphcore Ltd
\t0001  Colossus GC2 [C2]
\t0002  Colossus GC1 [S1]
1d97  Shenzhen Longsys Electronics Co., Ltd.
\t2263  SM2263EN/SM2263XT-based OEM SSD
C 12  Processing accelerators
\t00  Processing accelerators
"""
C2 = PciDevice("1d95", "0001", "1d95", "0001", "C2")
M2000 = PciDevice("1d95", "0004", "1d95", "0002", "M2000")


def test_a_missing_device_joins_its_vendors_block() -> None:
    assert amended(HOST, [M2000, C2]) == HOST.replace(
        "\t0001  Colossus GC2 [C2]\n", "\t0001  Colossus GC2 [C2]\n\t\t1d95 0001  C2 (ipufs)\n").replace(
        "\t0002  Colossus GC1 [S1]\n",
        "\t0002  Colossus GC1 [S1]\n\t0004  Colossus IPU [M2000] (ipufs)\n\t\t1d95 0002  M2000 (ipufs)\n")


def test_what_is_named_already_stays_and_adding_twice_adds_once() -> None:
    once = amended(HOST, [M2000])
    assert amended(once, [M2000]) == once
    assert once.count("1d95  Graphcore Ltd") == 1


def test_a_vendor_the_database_lacks_gets_a_block_before_the_classes() -> None:
    text = HOST.replace("1d95  Graphcore Ltd\n\t0001  Colossus GC2 [C2]\n\t0002  Colossus GC1 [S1]\n", "")
    out = amended(text, [M2000])
    assert "1d95  Graphcore Ltd\n\t0004  Colossus IPU [M2000] (ipufs)\n\t\t1d95 0002  M2000 (ipufs)\nC 12" in out
