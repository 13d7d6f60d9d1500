# Every metric the exporter serves, as one table: its name, type, help, the
# typed value it comes from, and for an IPU's metric how that value is
# taken from one Reading (reading.py). The exporter builds its families
# from this table alone (a name not here cannot be served), the metric list
# of docs/monitoring.md is generated from it (`./dev generate`), and a test
# checks the Grafana dashboard's queries against it. Names follow
# Prometheus's conventions: the `ipufs_` prefix, base units in the name
# (celsius, watts, joules, hertz, bytes, seconds), `_total` on counters,
# `_info` on info metrics; no series carries a process id.
from __future__ import annotations

import socket
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric as Family

from ipufs.abi.ipu_view import IpuView
from ipufs.client.status import STATUS_EXCEPTION, STATUS_ICU_UNRESPONSIVE, STATUS_LINK_DOWN, STATUS_READY
from ipufs.monitoring.reading import Reading

#: The labels of every IPU's series: its id (`ipufs ls`), the device id the
#: device plugin advertises (`ipu0`...: unique on the node, stable across
#: restarts), its board type and serial, its PCI address, and the pod,
#: namespace and container it is allocated to (empty: none).
IPU_LABELS = ("ipu", "device", "board", "serial", "pci_address", "pod", "namespace", "container")
#: The conditions of `ipufs_ipu_condition`: STATUS bit, and whether the
#: condition is the bit being clear.
CONDITIONS = {"not_ready": (STATUS_READY, True), "exception_held": (STATUS_EXCEPTION, False),
              "link_down": (STATUS_LINK_DOWN, False), "icu_unresponsive": (STATUS_ICU_UNRESPONSIVE, False)}
#: An IPU metric's samples: the values of its extra labels, and the value.
Sample = tuple[tuple[str, ...], float]
Read = Callable[[Reading], Iterable[Sample]]
KINDS = ("gauge", "counter", "info")


@dataclass(frozen=True)
class Metric:
    """One row: ``read`` gives an IPU's samples (None: a metric of the
    exporter itself, filled in by the scraper); ``labels``: its labels
    beyond IPU_LABELS (all of them for the exporter's own)."""

    name: str
    kind: str
    help: str
    source: str
    read: Read | None = None
    labels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        suffix = {"counter": "_total", "info": "_info"}.get(self.kind, "")
        if self.kind not in KINDS or not self.name.startswith("ipufs_") or not self.name.endswith(suffix):
            raise ValueError(f"metric {self.name}: a {self.kind} is named ipufs_..{suffix}")

    @property
    def all_labels(self) -> tuple[str, ...]:
        return (*IPU_LABELS, *self.labels) if self.read is not None else self.labels

    def family(self) -> Family:
        """An empty family of this metric (an info metric's own labels are
        added per sample, with the IPU's)."""
        if self.kind == "counter":
            return CounterMetricFamily(self.name.removesuffix("_total"), self.help, labels=self.all_labels)
        if self.kind == "info":
            keys = IPU_LABELS if self.read is not None else ()
            return InfoMetricFamily(self.name.removesuffix("_info"), self.help, labels=keys)
        return GaugeMetricFamily(self.name, self.help, labels=self.all_labels)


def add(metric: Metric, family: Family, labels: tuple[str, ...], sample: Sample) -> None:
    """Put one sample into ``family``: ``labels`` the IPU's (or none)."""
    extra, value = sample
    if metric.kind == "info":
        family.add_metric(list(labels), dict(zip(metric.labels, extra)))  # type: ignore[attr-defined]
    else:
        family.add_metric([*labels, *extra], value)  # type: ignore[attr-defined]


def _one(get: Callable[[Reading], float | None]) -> Read:
    def read(r: Reading) -> list[Sample]:
        value = get(r)
        return [] if value is None else [((), float(value))]
    return read


def attribute(key: str, scale: float = 1.0) -> Read:
    """The typed value of gc-info attribute ``key``, times ``scale`` (no
    sample while N/A)."""
    return _one(lambda r: None if r.value(key) is None else r.value(key) * scale)


def daemon(get: Callable[[IpuView], float | None]) -> Read:
    """A value of the daemon's view (no sample while it does not answer)."""
    return _one(lambda r: None if r.view is None else get(r.view))


def _status(bit: int, clear: bool) -> Callable[[Reading], float]:
    return lambda r: float(bool(r.registers["STATUS"] & bit) != clear)


def _conditions(r: Reading) -> list[Sample]:
    return [((name,), _status(bit, clear)(r)) for name, (bit, clear) in CONDITIONS.items()]


def _identity(r: Reading) -> list[Sample]:
    keys = ("driver version", "firmware version", "icu bootloader version", "board variant", "ipu architecture",
            "target")
    return [((*(str(r.value(k)) for k in keys), socket.gethostname()), 1.0)]


def _process(r: Reading) -> list[Sample]:
    if r.value("user name") is None:
        return []
    return [((str(r.value("user name")), str(r.value("user executable"))), 1.0)]


def _memory_used(r: Reading) -> list[Sample]:
    return [(("exchange",), float(r.exchange.st_blocks * 512)),
            (("host_exchange",), float(r.value("hexopt active size (bytes)")))]


def _memory_total(r: Reading) -> list[Sample]:
    return [(("exchange",), float(r.exchange.st_size)), (("host_exchange",), float(r.value("hexopt total size (bytes)")))]


def _signals(view: IpuView) -> Iterator[Sample]:
    return (((name,), float(count)) for name, count in view["signals_sent"].items())


def _attached(view: IpuView) -> float:
    return float(view["attached"] is not None)


def _ipu_metrics() -> tuple[Metric, ...]:
    m = Metric
    return (
        m("ipufs_ipu_info", "info", "the IPU's versions, board, target and host (always 1)",
          "gc-info attributes `driver version`, `firmware version`, `icu bootloader version`, `board variant`, "
          "`ipu architecture`, `target`; the host name", _identity,
          ("driver_version", "firmware_version", "icu_bootloader_version", "board_variant", "ipu_architecture",
           "target", "hostname")),
        m("ipufs_ipu_healthy", "gauge", "1 while the IPU is fit to use (the device plugin's verdict)",
          "STATUS and ERROR_STATE, judged as the device plugin does",
          _one(lambda r: float(r.verdict.health.healthy))),
        m("ipufs_ipu_condition", "gauge", "1 while the condition holds",
          "STATUS bits READY (clear), EXCEPTION, LINK_DOWN, ICU_UNRESPONSIVE", _conditions, ("condition",)),
        m("ipufs_ipu_temperature_celsius", "gauge", "IPU die temperature", "`average die temp` (TEMPERATURE)",
          attribute("average die temp")),
        m("ipufs_ipu_board_temperature_celsius", "gauge", "board temperature (the ICU's)", "`average board temp`",
          attribute("average board temp")),
        m("ipufs_ipu_power_watts", "gauge", "IPU power from the power model (boards with a sensor per IPU)",
          "`ipu power` (IPU_POWER)", attribute("ipu power")),
        m("ipufs_ipu_board_power_watts", "gauge", "total board power (the ICU's)", "`total board power`",
          attribute("total board power")),
        m("ipufs_ipu_energy_joules_total", "counter", "energy the IPU drew since the daemon started",
          "the daemon's `energy_j`: `ipu power` integrated over the tiles' busy time",
          daemon(lambda v: v["energy_j"])),
        m("ipufs_ipu_clock_hertz", "gauge", "IPU clock", "`clock` (CLOCK, MHz) × 10⁶", attribute("clock", 1e6)),
        m("ipufs_ipu_utilisation_ratio", "gauge", "share of the tiles' time busy over the last second, 0..1",
          "`ipu utilisation` (UTILISATION, %) / 100", attribute("ipu utilisation", 0.01)),
        m("ipufs_ipu_memory_used_bytes", "gauge", "bytes of the IPU's memory that hold data",
          "`exchange`: ipuN_ex's st_blocks × 512 (tile memory windows, by page); "
          "`host_exchange`: `hexopt active size (bytes)`", _memory_used, ("memory",)),
        m("ipufs_ipu_memory_total_bytes", "gauge", "size of the IPU's memory",
          "`exchange`: ipuN_ex's size; `host_exchange`: `hexopt total size (bytes)`",
          _memory_total, ("memory",)),
        m("ipufs_ipu_link_up", "gauge", "1 while the IPU's link is up", "STATUS bit LINK_DOWN clear",
          _one(_status(STATUS_LINK_DOWN, True))),
        m("ipufs_ipu_link_speed_transfers_per_second", "gauge", "the link's speed",
          "`link speed` (LINK_SPEED, GT/s) × 10⁹", attribute("link speed", 1e9)),
        m("ipufs_ipu_link_width_lanes", "gauge", "the link's width", "`link width` (LINK_WIDTH)",
          attribute("link width")),
        m("ipufs_ipu_link_correctable_errors_total", "counter", "errors the link corrected since the daemon started",
          "`link correctable error count` (the daemon's `link_errors`)", daemon(lambda v: v["link_errors"])),
        m("ipufs_ipu_attached", "gauge", "1 while a process is attached", "the daemon's `attached`",
          daemon(_attached)),
        m("ipufs_ipu_process_info", "info", "the attached process, replaced when another attaches (no sample "
          "while none)", "`user name`, `user executable`", _process, ("user", "executable")),
        m("ipufs_ipu_process_id", "gauge", "the attached process's pid as the exporter sees it",
          "`user process id`", attribute("user process id")),
        m("ipufs_ipu_process_start_time_seconds", "gauge", "when the attached process started, since the epoch",
          "`process start time`", attribute("process start time")),
        m("ipufs_ipu_exceptions_total", "counter", "exceptions raised since the last clear or reset",
          "the daemon's `exception_count`", daemon(lambda v: v["exception_count"])),
        m("ipufs_ipu_parity_errors", "gauge", "tile memory words whose parity is bad now",
          "the daemon's `parity_errors`", daemon(lambda v: v["parity_errors"])),
        m("ipufs_ipu_resets_total", "counter", "device resets", "RESET_COUNT",
          _one(lambda r: r.registers["RESET_COUNT"])),
        m("ipufs_ipu_signals_sent_total", "counter", "signals sent to the attached process",
          "the daemon's `signals_sent`", lambda r: [] if r.view is None else _signals(r.view), ("signal",)),
    )


def _exporter_metrics() -> tuple[Metric, ...]:
    m = Metric
    return (
        m("ipufs_up", "gauge", "1 when this scrape read the IPUs through a daemon that answered; 0 when it is "
          "gone, stopped or the IPUs could not be read", "the daemon's `status` answer, within its timeout"),
        m("ipufs_ipus", "gauge", "IPUs found in the nodes' directory", "the `ipuN` nodes"),
        m("ipufs_ipu_unreadable", "gauge", "1 when the IPU's nodes could not be read in this scrape",
          "a failed read of its nodes", labels=("ipu",)),
        m("ipufs_exporter_scrape_duration_seconds", "gauge", "how long the last reading of the IPUs took",
          "the exporter's clock"),
        m("ipufs_exporter_scrapes_total", "counter", "readings of the IPUs (an answer from the cache is none)",
          "the exporter's count"),
        m("ipufs_exporter_scrape_errors_total", "counter", "readings that failed, by reason",
          "`daemon_gone`, `daemon_timeout`, `unreadable`, `stuck` (an earlier reading still waits on the nodes)",
          labels=("reason",)),
        m("ipufs_exporter_cached_answers_total", "counter", "scrapes answered from the last reading",
          "the exporter's count"),
        m("ipufs_exporter_connections", "gauge", "open HTTP connections", "the exporter's count"),
        m("ipufs_exporter_connections_dropped_total", "counter", "connections the exporter closed, by reason",
          "`timeout` (no whole request in time, or an answer not read), `tls` (a failed handshake)",
          labels=("reason",)),
        m("ipufs_exporter_requests_total", "counter", "HTTP requests answered, by status code",
          "the exporter's count", labels=("code",)),
        m("ipufs_exporter_pod_resources_up", "gauge", "1 when the kubelet's pod-resources API answered the last "
          "reading (absent when its socket is not there)", "the kubelet's List answer"),
    )


METRICS: dict[str, Metric] = {m.name: m for m in (*_exporter_metrics(), *_ipu_metrics())}


def ipu_families(readings: Iterable[Reading]) -> Iterator[Family]:
    """Every IPU metric's family with the samples of ``readings``."""
    readings = list(readings)
    for metric in METRICS.values():
        if metric.read is None:
            continue
        family = metric.family()
        for r in readings:
            labels = (str(r.index), r.device, str(r.value("board type")), str(r.value("board serial number")),
                      str(r.value("pci id")), r.pod.pod, r.pod.namespace, r.pod.container)
            for sample in metric.read(r):
                add(metric, family, labels, sample)
        yield family


def family(name: str, samples: Iterable[Sample] = ()) -> Family:
    """The family of the exporter's own metric ``name`` with ``samples``
    (KeyError for a name the table does not hold)."""
    metric = METRICS[name]
    built = metric.family()
    for sample in samples:
        add(metric, built, (), sample)
    return built


def render_table() -> str:
    """The metric list of docs/monitoring.md."""
    rows = ["| metric | type | labels | what | from |", "|---|---|---|---|---|"]
    for m in METRICS.values():
        labels = ", ".join(f"`{name}`" for name in m.labels) or "—"
        if m.read is not None:
            labels = "IPU's" + (f", {labels}" if m.labels else "")
        rows.append(f"| `{m.name}` | {m.kind} | {labels} | {m.help} | {m.source} |")
    return "\n".join(rows) + "\n"


def names() -> set[str]:
    """Every series name the exporter can serve."""
    return set(METRICS)
