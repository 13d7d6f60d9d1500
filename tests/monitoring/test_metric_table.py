# The metric table (ipufs/monitoring/metrics.py) is the one list of what
# the exporter serves: docs/monitoring.md's metric list is its rendering,
# a scrape serves exactly its names, and every query of the Grafana
# dashboard in docs/ names metrics and labels that exist.
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ipufs.monitoring.metrics import IPU_LABELS, METRICS, Metric, render_table
from scripts import generate_metrics_doc
from tests.integration.harness import PyClient, RunningDaemon
from tests.monitoring.conftest import ExporterProcess
from tests.monitoring.test_exporter import scrape

DOCS = Path(__file__).resolve().parents[2] / "docs"
DASHBOARD = DOCS / "grafana-ipufs.json"
#: PromQL words that name no metric: keywords, and the aggregations, which
#: may have their grouping between name and parenthesis (`sum by (pod) (...)`).
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or", "unless",
            "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
            "quantile"}
#: Labels Prometheus adds to every series it scrapes.
TARGET_LABELS = {"instance", "job"}


def test_the_docs_list_is_the_table() -> None:
    text = (DOCS / "monitoring.md").read_text()
    assert generate_metrics_doc.render(text) == text, "docs/monitoring.md's metric list drifted: run ./dev generate"
    assert render_table() in text


def test_names_follow_prometheus_conventions() -> None:
    for m in METRICS.values():
        assert re.fullmatch(r"ipufs_[a-z0-9_]+", m.name), m.name
        assert (m.kind == "counter") == m.name.endswith("_total"), m.name
        assert "pid" not in m.all_labels, m.name  # a label per process would grow without bound
    with pytest.raises(ValueError):
        Metric("ipufs_resets", "counter", "no _total", "—")


@pytest.mark.mount
def test_a_scrape_serves_the_table(board: RunningDaemon, attached: PyClient, tmp_path: Path) -> None:
    e = ExporterProcess(board.mountpoint)
    try:
        scrape(e)
        served = {name for name, _ in scrape(e)}
    finally:
        e.close()
    sometimes = {"ipufs_ipu_unreadable", "ipufs_exporter_pod_resources_up", "ipufs_exporter_connections_dropped_total",
                 "ipufs_exporter_scrape_errors_total"}  # only once there is something to say
    assert served <= set(METRICS) and set(METRICS) - sometimes <= served


def _expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    found = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        query = variable.get("query", "")
        if query.startswith("label_values("):
            metric, _, label = query.removeprefix("label_values(").removesuffix(")").rpartition(",")
            found.append(f"sum by ({label.strip()}) ({metric})")
    return found


def names_and_labels(expr: str) -> tuple[set[str], set[str]]:
    """The metric names and label names a PromQL expression uses."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # label values and strings
    text = re.sub(r"\$\w+", "", text)  # Grafana's variables
    text = re.sub(r"\[[^\]]*\]", "", text)  # range durations
    labels = set()
    for matchers in re.findall(r"\{([^}]*)\}", text):
        labels |= set(re.findall(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)", matchers))
    text = re.sub(r"\{[^}]*\}", "", text)
    for grouping in re.findall(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", text):
        labels |= {g.strip() for g in grouping.split(",") if g.strip()}
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", r"\1", text)
    names = {word for word, call in re.findall(r"([A-Za-z_:][\w:]*)\s*(\(?)", text)
             if not call and word not in KEYWORDS and not re.fullmatch(r"\d.*|e\d+", word)}
    return names, labels


def test_every_dashboard_query_names_metrics_and_labels_that_exist() -> None:
    expressions = _expressions()
    assert len(expressions) >= 15
    for expr in expressions:
        names, labels = names_and_labels(expr)
        assert names, expr
        unknown = names - set(METRICS)
        assert not unknown, f"{expr}: no such metric {sorted(unknown)}"
        known = TARGET_LABELS | {"__name__"} | {label for n in names for label in METRICS[n].all_labels}
        # an info metric's own labels come with its samples
        known |= {label for n in names if METRICS[n].kind == "info" for label in METRICS[n].labels}
        assert labels <= known, f"{expr}: no such label {sorted(labels - known)} on {sorted(names)}"


def test_the_query_reader_finds_what_it_should() -> None:
    names, labels = names_and_labels('sum by (pod) (rate(ipufs_ipu_energy_joules_total{device=~"$d"}[5m])) '
                                     '/ on (instance) group_left ipufs_up * 1e9')
    assert names == {"ipufs_ipu_energy_joules_total", "ipufs_up"} and labels == {"pod", "device", "instance"}
    assert set(IPU_LABELS) >= {"pod", "device"}


@pytest.mark.mount
def test_adding_a_metric_is_one_row(board: RunningDaemon, monkeypatch: pytest.MonkeyPatch) -> None:
    """The recipe of docs/architecture.md, "Adding a metric"."""
    from ipufs.monitoring import metrics
    from ipufs.monitoring.scrape import read_all

    row = metrics.Metric("ipufs_ipu_numa_node", "gauge", "the NUMA node the IPU is attached to",
                         "`numa node` (NUMA_NODE)", metrics.attribute("numa node"))
    monkeypatch.setitem(metrics.METRICS, row.name, row)
    assert f"| `{row.name}` | gauge | IPU's |" in render_table()
    families = {f.name: f for f in metrics.ipu_families(read_all(board.mountpoint, None, 5.0).readings)}
    assert [(s.labels["device"], s.value) for s in families[row.name].samples] == [(f"ipu{i}", 0.0) for i in range(4)]
