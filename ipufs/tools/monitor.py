# `ipufs monitor`: what gc-monitor shows, printed once (gc-monitor's own
# habit; `--watch` refreshes it): a boxed card table (serial, ICU firmware,
# type, id, PCIe id, clock, temperature, board power, and the IPU's power and
# utilisation from what its tiles run) and a table of the attached
# processes (the samples of Graphcore's command-line tools documentation), plus
# what only ipufs knows: signals sent and dropped. Telemetry is read from
# config space; who is attached and the counts come from the daemon.
from __future__ import annotations

from pathlib import Path
from typing import Any

from ipufs.abi.pci import pci_address
from ipufs.abi.registers import BOARD_CODES
from ipufs.abi.serial import serial_text
from ipufs.tools import devices

BOARD_NAMES = {v: k for k, v in BOARD_CODES.items()}


def snapshot(root: Path) -> list[dict[str, Any]]:
    rows = []
    for index in devices.indices(root):
        r = devices.registers(root, index)
        view = devices.daemon_view(root, index)
        attached = view["attached"] if view else None
        fw = r["FIRMWARE_VERSION"]
        rows.append({
            "ipu": index,
            "serial": serial_text(r["BOARD_SERIAL_HI"] << 32 | r["BOARD_SERIAL_LO"]),
            "icu_firmware": f"{fw >> 16}.{(fw >> 8) & 0xFF}.{fw & 0xFF}",
            "type": BOARD_NAMES.get(r["BOARD_TYPE"], "unknown"),
            "pci_id": pci_address(index),
            "attached": bool(attached),
            "pid": attached["pid"] if attached else None,  # None too when not in this PID namespace
            "command": attached["command"] if attached else None,
            "user": attached["user"] if attached else None,
            "signals_sent": sum(view["signals_sent"].values()) if view else 0,
            "signals_dropped": sum(view["signals_dropped"].values()) if view else 0,
            "clock_mhz": r["CLOCK"],
            "temperature_c": r["TEMPERATURE"] / 1000,
            "power_w": r["POWER"] / 1000,
            "ipu_power_w": r["IPU_POWER"] / 1000 if r["IPU_POWER"] else None,
            "utilisation_percent": r["UTILISATION"] / 100,
            "resets": r["RESET_COUNT"],
            "error": r["ERROR_STATE"],
        })
    return rows


def _box(head: list[str], rows: list[list[str]]) -> list[str]:
    """A table boxed with +, - and |, columns as wide as their widest cell."""
    widths = [max(len(c) for c in column) for column in zip(head, *rows)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(cells: list[str]) -> str:
        return "|" + "|".join(f" {c:>{w}} " for c, w in zip(cells, widths)) + "|"

    return [rule, line(head), rule, *(line(r) for r in rows), rule]


def render(rows: list[dict[str, Any]], *, card_info: bool = True) -> str:
    lines: list[str] = []
    if card_info:
        lines += _box(
            ["Serial #", "ICU FW", "Type", "ID", "PCIe ID", "IPU Clk", "IPU Temp", "Board power", "IPU power",
             "IPU util", "Resets"],
            [[r["serial"], r["icu_firmware"], r["type"], str(r["ipu"]), r["pci_id"], f"{r['clock_mhz']}MHz",
              f"{r['temperature_c']:.1f} C", f"{r['power_w']:.1f} W",
              "N/A" if r["ipu_power_w"] is None else f"{r['ipu_power_w']:.1f} W",
              f"{r['utilisation_percent']:.2f}%", str(r["resets"])] for r in rows])
    attached = [r for r in rows if r["attached"]]
    lines += _box(["ID", "PID", "Command", "User", "Signals", "Dropped"],
                  [[str(r["ipu"]), "-" if r["pid"] is None else str(r["pid"]), r["command"] or "-", r["user"] or "-",
                    str(r["signals_sent"]), str(r["signals_dropped"])] for r in attached]
                  or [["-", "-", "no attached processes", "-", "-", "-"]])
    return "\n".join(lines)
