"""Logs that tell the story: one INFO line per message, run start and run end.

`LogObserver` (installed from the start, see `channelkit.observability.hub`) writes,
on the logger ``channelkit.observability``:

* ``inbound message: platform=... channel=... chat=... outcome=... run=...`` for every
  message a person sent (``outcome``: ``accepted``, ``busy``, ``closed``);
* ``run started: run=... platform=... channel=... chat=... kind=... waited=...s``;
* ``run ended: run=... ... outcome=... waited=...s ran=...s first_reaction=...s``;
* ``connection NAME: OLD -> NEW`` for every long-connection status change;
* ``summary: ...`` once on shutdown (runs, messages and deliveries by outcome).

``chat`` is a keyed hash (`channelkit.observability.observer.chat_hash`), never the
chat id; no line holds a message, an answer or a user id. Each record also carries its
fields as attributes (``event``, ``run_id``, ``platform``, ``outcome``, ...), which
`JsonFormatter` writes as JSON keys. `configure_logging()` sets up the root logger
for ``channelkit serve`` and ``channelkit playground`` (``--log-format text|json``).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections import Counter
from typing import Any

from channelkit.errors import ConfigurationError
from channelkit.observability.observer import Observer, RunReport
from channelkit.observability.tracing import log_ids

__all__ = ["LOG_FORMATS", "JsonFormatter", "LogObserver", "configure_logging"]

logger = logging.getLogger("channelkit.observability")

#: The values of ``--log-format``.
LOG_FORMATS = ("text", "json")

_MAX_SUMMARY_KEYS = 1000


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}s"


class LogObserver(Observer):
    """Writes the INFO lines of the module docstring and keeps the shutdown summary's
    counts (bounded)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str]] = Counter()

    def _count(self, kind: str, outcome: str) -> None:
        with self._lock:
            key = (kind, outcome)
            if key in self._counts or len(self._counts) < _MAX_SUMMARY_KEYS:
                self._counts[key] += 1

    def counts(self) -> dict[str, dict[str, int]]:
        """``{"runs": {"completed": 3, ...}, "inbound": {...}, "deliveries": {...}}``."""
        with self._lock:
            items = list(self._counts.items())
        result: dict[str, dict[str, int]] = {}
        for (kind, outcome), count in sorted(items):
            result.setdefault(kind, {})[outcome] = count
        return result

    def inbound(self, platform: str, channel: str, chat: str, outcome: str, run_id: str) -> None:
        self._count("inbound", outcome)
        if not logger.isEnabledFor(logging.INFO):
            return
        logger.info(
            "inbound message: platform=%s channel=%s chat=%s outcome=%s run=%s",
            platform,
            channel,
            chat,
            outcome,
            run_id or "-",
            extra={
                "event": "inbound",
                "platform": platform,
                "channel": channel,
                "chat": chat,
                "outcome": outcome,
                "run_id": run_id or None,
            },
        )

    def run_started(self, report: RunReport) -> None:
        if not logger.isEnabledFor(logging.INFO):
            return
        logger.info(
            "run started: run=%s platform=%s channel=%s chat=%s kind=%s waited=%s",
            report.run_id,
            report.platform,
            report.channel,
            report.chat,
            report.kind,
            _seconds(report.waited_s),
            extra=_run_fields("run_start", report),
        )

    def run_ended(self, report: RunReport) -> None:
        self._count("runs", report.outcome)
        if not logger.isEnabledFor(logging.INFO):
            return
        logger.info(
            "run ended: run=%s platform=%s channel=%s chat=%s kind=%s outcome=%s waited=%s "
            "ran=%s first_reaction=%s",
            report.run_id,
            report.platform,
            report.channel,
            report.chat,
            report.kind,
            report.outcome,
            _seconds(report.waited_s),
            _seconds(report.ran_s),
            _seconds(report.first_reaction_s),
            extra=_run_fields("run_end", report),
        )

    def delivery(self, channel: str, outcome: str) -> None:
        self._count("deliveries", outcome)

    def connection_state(self, connection: str, old: str, new: str) -> None:
        logger.info(
            "connection %s: %s -> %s",
            connection,
            old,
            new,
            extra={"event": "connection", "connection": connection, "old": old, "new": new},
        )

    def shutdown(self) -> None:
        counts = self.counts()
        parts = [
            f"{kind} " + " ".join(f"{outcome}={n}" for outcome, n in sorted(by.items()))
            for kind, by in sorted(counts.items())
        ]
        logger.info(
            "summary: %s",
            "; ".join(parts) or "nothing happened",
            extra={"event": "summary", "counts": counts},
        )


def _run_fields(event: str, report: RunReport) -> dict[str, Any]:
    return {
        "event": event,
        "run_id": report.run_id,
        "platform": report.platform,
        "channel": report.channel,
        "chat": report.chat,
        "kind": report.kind,
        "outcome": report.outcome,
        "waited_s": round(report.waited_s, 6),
        "ran_s": round(report.ran_s, 6),
        "first_reaction_s": (
            None if report.first_reaction_s is None else round(report.first_reaction_s, 6)
        ),
    }


#: The attributes every LogRecord has; anything else on a record is an ``extra`` field.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


def _scrubbed(value: Any) -> Any:
    """``value`` with registered secrets scrubbed from its strings (extras included)."""
    from channelkit.http.redact import REDACTOR

    if isinstance(value, str):
        return REDACTOR.scrub(value)
    if isinstance(value, dict):
        return {str(k): _scrubbed(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrubbed(v) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return REDACTOR.scrub(str(value))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time`` (UTC, ISO 8601 with milliseconds), ``level``,
    ``logger``, ``message``, ``thread``, the record's extra fields (``event``,
    ``run_id``, ``platform``, ...), ``trace_id`` and ``span_id`` (hex) when an
    OpenTelemetry span is current on the logging thread
    (`channelkit.observability.tracing`), and ``exception`` when there is one. Strings pass
    through the process-wide redaction filter (`channelkit.http.redact.REDACTOR`), so
    registered secrets never reach the output, whatever field they hide in."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        document: dict[str, Any] = {
            "time": f"{stamp}.{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": _scrubbed(record.getMessage()),
            "thread": record.threadName,
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in document and not key.startswith("_"):
                document[key] = _scrubbed(value)
        if "trace_id" not in document:
            ids = log_ids()
            if ids is not None:
                document["trace_id"], document["span_id"] = ids
        if record.exc_info and record.exc_info[1] is not None:
            text = record.exc_text or self.formatException(record.exc_info)
            document["exception"] = _scrubbed(text)
        elif record.exc_text:
            document["exception"] = _scrubbed(record.exc_text)
        if record.stack_info:
            document["stack"] = _scrubbed(record.stack_info)
        return json.dumps(document, ensure_ascii=False, default=str)


def configure_logging(
    level: int | str,
    log_format: str = "text",
    *,
    text_format: str = "%(asctime)s %(levelname)s %(name)s: %(message)s",
) -> logging.Handler:
    """Log to stderr at ``level``: ``text`` lines in ``text_format``, or ``json`` (one
    `JsonFormatter` object per line), like ``logging.basicConfig``: nothing changes
    when the root logger has handlers already (an application or a test configured
    it). The handler made for it."""
    if log_format not in LOG_FORMATS:
        raise ConfigurationError(f"must be one of {', '.join(LOG_FORMATS)}", "log_format")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else logging.Formatter(text_format)
    )
    logging.basicConfig(level=level, handlers=[handler])
    return handler
