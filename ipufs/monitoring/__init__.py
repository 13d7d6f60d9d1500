"""Monitoring an ipufs mount the way real IPUs are monitored: a
gcipuinfo-compatible API (``ipuinfo``), its device health check
(``health``), and Prometheus metrics (``metrics``, ``exporter``). Values
come from the same reads as `ipufs info` (ipufs/tools/info.py); see
docs/monitoring.md."""
