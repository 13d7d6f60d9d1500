# What `ipufs exporter` tells Prometheus about each IPU, read at every
# scrape exactly as `ipufs info` reads it (ipufs/tools/info.py, plus the
# daemon's counters from its control socket). Names follow Prometheus's
# conventions: an `ipufs_` prefix, base units (celsius, watts, hertz, a
# ratio), `_total` on counters; each series carries the IPU's id, board
# type, board serial and PCI address. docs/monitoring.md documents each.
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.registry import Collector

from ipufs.client.status import STATUS_EXCEPTION, STATUS_ICU_UNRESPONSIVE, STATUS_LINK_DOWN, STATUS_READY
from ipufs.monitoring import health
from ipufs.tools import devices, info
from ipufs.problems import Problem

LABELS = ["ipu", "board", "serial", "pci_address"]
#: The conditions `ipufs_ipu_condition` reports, by STATUS bit.
CONDITIONS = {"not_ready": STATUS_READY, "exception_held": STATUS_EXCEPTION, "link_down": STATUS_LINK_DOWN,
              "icu_unresponsive": STATUS_ICU_UNRESPONSIVE}


def _number(text: str, unit: str) -> float | None:
    """A value as `ipufs info` prints it ("45.0 C", "1330MHz"), as a number;
    None for N/A."""
    if text == info.NA:
        return None
    return float(text.removesuffix(unit).strip())


class IpuCollector(Collector):
    """Reads every IPU under ``root`` at each scrape."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def collect(self) -> Iterator[Any]:
        g = _Families()
        try:
            indices = devices.indices(self.root)
        except Problem:
            indices = []  # no IPUs (yet): no series, and the exporter's own gauge says so
        for index in indices:
            try:
                self._one(index, g)
            except OSError:
                g.unreadable.add_metric([str(index)], 1)
        g.ipus.add_metric([], len(indices))
        yield from g.all()

    def _one(self, index: int, g: _Families) -> None:
        # Every read first, each once: an IPU that fails half-way adds no
        # series at all, and the attributes, the verdict and the counters
        # come from the same reading.
        registers = devices.registers(self.root, index)
        view = devices.daemon_view(self.root, index) or {}
        text = {f.key: f.text for f in info.fields_from(self.root, index, registers, view)}
        verdict = health.judged(index, registers)
        labels = [str(index), text["board type"], text["board serial number"], text["pci id"]]
        g.healthy.add_metric(labels, 1 if verdict.health.healthy else 0)
        for name, bit in CONDITIONS.items():
            on = not verdict.status.bits & bit if name == "not_ready" else bool(verdict.status.bits & bit)
            g.condition.add_metric(labels + [name], 1 if on else 0)
        for family, key, unit, scale in (
                (g.die_temperature, "average die temp", "C", 1.0),
                (g.board_temperature, "average board temp", "C", 1.0),
                (g.power, "ipu power", "W", 1.0),
                (g.board_power, "total board power", "W", 1.0),
                (g.clock, "clock", "MHz", 1e6),
                (g.utilisation, "ipu utilisation", "%", 0.01)):
            value = _number(text[key], unit)
            if value is not None:  # N/A: no sample, as exporters leave out what a device cannot measure
                family.add_metric(labels, value * scale)
        attached = view.get("attached")
        g.attached.add_metric(labels, 1 if attached else 0)
        if attached:
            g.process.add_metric(labels, {"pid": str(attached["pid"]), "user": str(attached["user"]),
                                          "executable": text.get("user executable", "unknown")})
        if view:
            g.exceptions.add_metric(labels, view["exception_count"])
            g.parity.add_metric(labels, view["parity_errors"])
            g.resets.add_metric(labels, view["reset_count"])
            for signal, count in view["signals_sent"].items():
                g.signals.add_metric(labels + [signal], count)


class _Families:
    """One scrape's metric families."""

    def __init__(self) -> None:
        def gauge(name: str, doc: str, extra: tuple[str, ...] = ()) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, labels=LABELS + list(extra))

        def counter(name: str, doc: str, extra: tuple[str, ...] = ()) -> CounterMetricFamily:
            return CounterMetricFamily(name, doc, labels=LABELS + list(extra))

        self.healthy = gauge("ipufs_ipu_healthy", "1 while the IPU is fit to use (the device plugin's verdict)")
        self.condition = gauge("ipufs_ipu_condition", "1 while the condition holds", ("condition",))
        self.die_temperature = gauge("ipufs_ipu_temperature_celsius", "IPU die temperature")
        self.board_temperature = gauge("ipufs_ipu_board_temperature_celsius", "board temperature (the ICU's)")
        self.power = gauge("ipufs_ipu_power_watts", "IPU power from the power model (boards with a sensor per IPU)")
        self.board_power = gauge("ipufs_ipu_board_power_watts", "total board power (the ICU's)")
        self.clock = gauge("ipufs_ipu_clock_hertz", "IPU clock")
        self.utilisation = gauge("ipufs_ipu_utilisation_ratio", "share of the tiles' time busy over the last second, 0..1")
        self.attached = gauge("ipufs_ipu_attached", "1 while a process is attached")
        self.process = InfoMetricFamily("ipufs_ipu_process", "the attached process", labels=LABELS)
        self.exceptions = counter("ipufs_ipu_exceptions", "exceptions raised since the last clear or reset")
        self.parity = gauge("ipufs_ipu_parity_errors", "tile memory words whose parity is bad now")
        self.resets = counter("ipufs_ipu_resets", "device resets")
        self.signals = counter("ipufs_ipu_signals_sent", "signals sent to the attached process", ("signal",))
        self.unreadable = GaugeMetricFamily("ipufs_ipu_unreadable", "1 when the IPU could not be read this scrape",
                                            labels=["ipu"])
        self.ipus = GaugeMetricFamily("ipufs_ipus", "IPUs found in the nodes' directory")

    def all(self) -> Iterator[Any]:
        return iter(vars(self).values())
