"""Observability: metrics, logs and the observer interface they share.

* `channelkit.observability.observer` - `Observer` (what channelkit reports),
  `RunReport`, `chat_hash()`, `platform_of()`;
* `channelkit.observability.hub` - where the core, the HTTP layer and the shared
  platform code report (`add_observer()` installs your own);
* `channelkit.observability.logs` - the INFO lines, `JsonFormatter`,
  `configure_logging()`;
* `channelkit.observability.metrics` - Prometheus metrics (`install_metrics()`,
  `metrics_route()`; the ``metrics`` extra);
* `channelkit.observability.tracing` - OpenTelemetry spans (the ``otel`` extra:
  `install_tracing()`, the span names; the core's seam: `span()`, `bind()`...).

See docs/operations.md. This package imports neither prometheus_client nor
OpenTelemetry until metrics are installed or a channel is built.
"""

from __future__ import annotations

from channelkit.observability.hub import add_observer, remove_observer
from channelkit.observability.logs import JsonFormatter, LogObserver, configure_logging
from channelkit.observability.observer import Observer, RunReport, chat_hash, platform_of

__all__ = [
    "JsonFormatter",
    "LogObserver",
    "Observer",
    "RunReport",
    "add_observer",
    "chat_hash",
    "configure_logging",
    "platform_of",
    "remove_observer",
]
