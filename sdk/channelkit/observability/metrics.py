"""Prometheus metrics (the ``metrics`` extra: ``pip install 'channelkit[metrics]'``).

`install_metrics()` installs a `PrometheusObserver` (once per process) that turns
channelkit's reports (`channelkit.observability.hub`) into the metrics below;
`metrics_route()` is ``GET /metrics`` in the Prometheus text format, which
``channelkit serve`` and ``channelkit playground`` mount. Without ``prometheus_client``
the SDK works as before; ``/metrics`` then answers 503 saying what to install.

| name | type | labels |
|---|---|---|
| ``channelkit_runs_total`` | counter | platform, outcome |
| ``channelkit_first_reaction_seconds`` | histogram | platform |
| ``channelkit_run_duration_seconds`` | histogram | platform, outcome |
| ``channelkit_runs_queued`` | gauge | platform |
| ``channelkit_pending_questions`` | gauge | platform |
| ``channelkit_deliveries_total`` | counter | platform, outcome |
| ``channelkit_platform_api_calls_total`` | counter | platform, operation, status |
| ``channelkit_ingress_total`` | counter | platform, outcome |
| ``channelkit_connections`` | gauge | connection, status |
| ``channelkit_store_operation_seconds`` | histogram | store, operation |

docs/operations.md explains each. No label carries a user id, a chat id or text: the
label values are platform names, operation ids of the OpenAPI documents, HTTP
statuses, connection names, the store kinds (``memory``, ``redis``), the store
operations (`channelkit.state.base.STORE_OPERATIONS`; never a key) and the
fixed outcome words.

Several processes (``serve --workers N``): when ``PROMETHEUS_MULTIPROC_DIR`` is set
(``serve`` sets it for its workers), prometheus_client keeps each process's values in
that directory and ``/metrics`` of any worker answers the sum over all of them;
gauges add the values of the live processes.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from channelkit.ingress import IngressRequest, IngressResponse, IngressRoute
from channelkit.observability import hub
from channelkit.observability.observer import Observer, RunReport

__all__ = [
    "METRICS_PATH",
    "MISSING_MESSAGE",
    "MULTIPROC_ENV",
    "PrometheusObserver",
    "install_metrics",
    "mark_process_dead",
    "metrics_available",
    "metrics_route",
    "render_metrics",
]

logger = logging.getLogger(__name__)

#: Where the metrics are served.
METRICS_PATH = "/metrics"
#: prometheus_client's multiprocess directory variable.
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
#: What ``/metrics`` answers without prometheus_client.
MISSING_MESSAGE = (
    "channelkit metrics need prometheus_client, which is not installed: "
    "python -m pip install 'channelkit[metrics]'\n"
)

#: Seconds until a person first sees something: 50 ms to 30 s.
FIRST_REACTION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0)
#: Seconds a run takes: 100 ms to 30 min.
RUN_DURATION_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 1800.0)
#: Seconds a state-store operation takes: 50 microseconds (memory) to 2.5 s (Redis).
STORE_OPERATION_BUCKETS = (
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    1.0,
    2.5,
)


def metrics_available() -> bool:
    """True when ``prometheus_client`` can be imported."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        return False
    return True


class PrometheusObserver(Observer):
    """The metrics of the module docstring, registered in prometheus_client's default
    registry (make one per process: `install_metrics()` does)."""

    def __init__(self) -> None:
        from prometheus_client import Counter, Gauge, Histogram

        self.runs_total = Counter(
            "channelkit_runs_total",
            "Runs that ended, by platform and outcome (completed, failed, cancelled, rejected).",
            ["platform", "outcome"],
        )
        self.first_reaction_seconds = Histogram(
            "channelkit_first_reaction_seconds",
            "Seconds from a person's message until they first saw something of its run.",
            ["platform"],
            buckets=FIRST_REACTION_BUCKETS,
        )
        self.run_duration = Histogram(
            "channelkit_run_duration_seconds",
            "Seconds from a run's start to its end, by platform and outcome.",
            ["platform", "outcome"],
            buckets=RUN_DURATION_BUCKETS,
        )
        self.queued_gauge = Gauge(
            "channelkit_runs_queued",
            "Runs admitted and waiting to start.",
            ["platform"],
            multiprocess_mode="livesum",
        )
        self.pending_gauge = Gauge(
            "channelkit_pending_questions",
            "Questions and permission requests waiting for a person's answer.",
            ["platform"],
            multiprocess_mode="livesum",
        )
        self.deliveries_total = Counter(
            "channelkit_deliveries_total",
            "Final-answer delivery events (delivered, retried, alternate_path, lost, "
            "uncertain).",
            ["platform", "outcome"],
        )
        self.api_calls_total = Counter(
            "channelkit_platform_api_calls_total",
            "Platform API call attempts by operation and HTTP status (timeout, error: no "
            "answer).",
            ["platform", "operation", "status"],
        )
        self.ingress_total = Counter(
            "channelkit_ingress_total",
            "Inbound requests and messages by outcome (accepted, busy, refused, closed, "
            "bad_signature, replay, store_unavailable).",
            ["platform", "outcome"],
        )
        self.connections_gauge = Gauge(
            "channelkit_connections",
            "Long connections by status (1 for the current status of each connection).",
            ["connection", "status"],
            multiprocess_mode="livesum",
        )

        self.store_operation_seconds = Histogram(
            "channelkit_store_operation_seconds",
            "Seconds a state-store operation took (failures included), by store (memory, "
            "redis) and operation (put, get, delete, add, replace, scan, push, ping, "
            "hold_lease, write_if, claim_matching, take_token).",
            ["store", "operation"],
            buckets=STORE_OPERATION_BUCKETS,
        )

    def ingress(self, platform: str, outcome: str) -> None:
        self.ingress_total.labels(platform, outcome).inc()

    def first_reaction(self, platform: str, seconds: float) -> None:
        self.first_reaction_seconds.labels(platform).observe(seconds)

    def run_ended(self, report: RunReport) -> None:
        self.runs_total.labels(report.platform, report.outcome).inc()
        if report.outcome != "rejected":
            self.run_duration.labels(report.platform, report.outcome).observe(report.ran_s)

    def runs_queued(self, channel: str, delta: int) -> None:
        self.queued_gauge.labels(hub.platform_for(channel)).inc(delta)

    def pending_questions(self, channel: str, delta: int) -> None:
        self.pending_gauge.labels(hub.platform_for(channel)).inc(delta)

    def delivery(self, channel: str, outcome: str) -> None:
        self.deliveries_total.labels(hub.platform_for(channel), outcome).inc()

    def api_call(self, platform: str, operation: str, status: str, seconds: float) -> None:
        self.api_calls_total.labels(platform, operation, status).inc()

    def store_operation(self, store: str, operation: str, seconds: float) -> None:
        self.store_operation_seconds.labels(store, operation).observe(seconds)

    def connection_state(self, connection: str, old: str, new: str) -> None:
        if old != "idle":  # a connection is counted from its first change on
            self.connections_gauge.labels(connection, old).dec()
        if new != "idle":
            self.connections_gauge.labels(connection, new).inc()


_install_lock = threading.Lock()
_installed: PrometheusObserver | None = None


def install_metrics() -> PrometheusObserver | None:
    """Install the `PrometheusObserver` (once per process); None when
    ``prometheus_client`` is not installed (see `MISSING_MESSAGE`)."""
    global _installed
    with _install_lock:
        if _installed is None:
            if not metrics_available():
                return None
            _installed = PrometheusObserver()
            hub.add_observer(_installed)
        return _installed


def render_metrics() -> tuple[bytes, str]:
    """The current metrics in the Prometheus text format and their content type: with
    `MULTIPROC_ENV` set, the sum over every process writing there. Raises
    ``ImportError`` without prometheus_client."""
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

    registry: Any = REGISTRY
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess as _multiprocess

        multiprocess: Any = _multiprocess  # annotated in some releases only
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    return generate_latest(registry), CONTENT_TYPE_LATEST


def _handle(_: IngressRequest) -> IngressResponse:
    try:
        body, content_type = render_metrics()
    except ImportError:
        return IngressResponse(
            503, MISSING_MESSAGE.encode(), (("Content-Type", "text/plain; charset=utf-8"),)
        )
    return IngressResponse(200, body, (("Content-Type", content_type),))


def metrics_route(path: str = METRICS_PATH) -> IngressRoute:
    """``GET /metrics`` as an `IngressRoute` to mount beside the channels'
    (``create_wsgi_app([*channels, metrics_route()])``); it installs the metrics."""
    install_metrics()
    return IngressRoute(path, _handle, methods=("GET",), name="metrics")


def mark_process_dead(pid: int, directory: str | None = None) -> None:
    """Forget the live gauges of a worker process that exited, in ``directory`` (default:
    `MULTIPROC_ENV`); nothing without prometheus_client or a directory."""
    path = directory or os.environ.get(MULTIPROC_ENV)
    if not path or not metrics_available():
        return
    from prometheus_client import multiprocess as _multiprocess

    multiprocess: Any = _multiprocess  # annotated in some releases only
    try:
        multiprocess.mark_process_dead(pid, path)
    except OSError:
        logger.debug("forgetting the metrics of process %d failed", pid, exc_info=True)
