# `ipufs monitor`: a live view like gc-monitor. Per IPU: the attached
# process (pid, command, user), signals sent, and telemetry. Telemetry is
# read from config space; who is attached and the counts come from the
# daemon's control channel.
from __future__ import annotations

from pathlib import Path
from typing import Any

from ipufs.tools import devices


def snapshot(root: Path) -> list[dict[str, Any]]:
    rows = []
    for index in devices.indices(root):
        r = devices.registers(root, index)
        view = devices.daemon_view(root, index) or {}
        attached = view.get("attached")
        rows.append({
            "ipu": index,
            "pid": attached["pid"] if attached else None,
            "command": attached["command"] if attached else None,
            "user": attached["user"] if attached else None,
            "signals_sent": sum(view.get("signals_sent", {}).values()),
            "signals_dropped": sum(view.get("signals_dropped", {}).values()),
            "clock_mhz": r["CLOCK"],
            "temperature_c": r["TEMPERATURE"] / 1000,
            "power_w": r["POWER"] / 1000,
            "resets": r["RESET_COUNT"],
            "error": r["ERROR_STATE"],
        })
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    head = f"{'IPU':>3}  {'PID':>7}  {'Command':<16} {'User':<10} {'Signals':>8} {'Dropped':>8}  " \
           f"{'Clock':>8} {'Temp':>7} {'Power':>8} {'Resets':>6}"
    lines = [head, "-" * len(head)]
    for row in rows:
        pid = str(row["pid"]) if row["pid"] else "-"
        lines.append(
            f"{row['ipu']:>3}  {pid:>7}  {(row['command'] or '-')[:16]:<16} {(row['user'] or '-')[:10]:<10} "
            f"{row['signals_sent']:>8} {row['signals_dropped']:>8}  {row['clock_mhz']:>5}MHz "
            f"{row['temperature_c']:>5.1f} C {row['power_w']:>6.1f} W {row['resets']:>6}"
        )
    return "\n".join(lines)
