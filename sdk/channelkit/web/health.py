"""What ``GET /healthz`` reports about running channels.

`health_report()` turns channels into one JSON document::

    {"ok": false,
     "channels": {
       "dingtalk": {"ok": false, "closed": false,
                    "connections": [{"name": "dingtalk-stream", "status": "reconnecting",
                                     "attempt": 3, "last_error": "ConnectionError: ...",
                                     "since": 1718000000.0}],
                    "delivery": {"delivered": 12, "retried": 1, "failed": 0,
                                 "uncertain": 0}}}}

A channel is ok when it is not closed and every long connection it owns
(``channel.connections``, see `channelkit.platforms.common.connection`) is
``connected``; ``delivery`` holds the channel's final-answer delivery counters
(``channel.delivery_health``) where it has them. The document is ok when every channel
is; `health_response()` answers it with 200 when ok and 503 otherwise.

Channels sharing a state store (``state.redis``) add ``state``: per channel, the
store's ping (`channelkit.platforms.common.store_watch.StoreWatch.health()`), e.g.
``{"dingtalk": {"ok": false, "store": "redis", "url": "redis://:***@host:6379/0",
"error": "StateStoreUnavailable (ConnectionError)"}}``; a store that does not answer
makes the document not ok (503) until it answers again. Each store is pinged once per
probe, bounded by its socket timeout.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from channelkit.ingress import IngressRequest, IngressResponse
from channelkit.platforms.common.connection import connections_of

__all__ = ["channel_health", "health_report", "health_response", "store_health"]

logger = logging.getLogger(__name__)


def _name(channel: object) -> str:
    name = getattr(channel, "name", None)
    return name if isinstance(name, str) and name else type(channel).__name__


def channel_health(channel: object) -> dict[str, Any]:
    """One channel's entry: ``ok``, ``closed``, ``connections`` and ``delivery``."""
    closed = bool(getattr(channel, "closed", False))
    connections = [c.state().to_dict() for c in connections_of(channel)]
    entry: dict[str, Any] = {
        "ok": not closed and all(c["status"] == "connected" for c in connections),
        "closed": closed,
        "connections": connections,
    }
    counters = getattr(channel, "delivery_health", None)
    snapshot = getattr(counters, "snapshot", None)
    if callable(snapshot):
        try:
            entry["delivery"] = dict(snapshot())
        except Exception:  # a health probe never fails because of one counter
            logger.exception("reading the delivery health of %s failed", _name(channel))
    return entry


def health_report(channels: Iterable[object]) -> dict[str, Any]:
    """The ``/healthz`` document of ``channels`` (see the module docstring)."""
    channels = list(channels)
    entries = {_name(channel): channel_health(channel) for channel in channels}
    document: dict[str, Any] = {"ok": all(e["ok"] for e in entries.values()), "channels": entries}
    state = store_health(channels)
    if state:
        document["state"] = state
        document["ok"] = document["ok"] and all(e["ok"] for e in state.values())
    return document


def store_health(channels: Iterable[object]) -> dict[str, dict[str, Any]]:
    """Per channel with a ``state_store``: its store's health (each store pinged once)."""
    from channelkit.platforms.common.store_watch import watch_of

    seen: dict[int, dict[str, Any]] = {}
    out: dict[str, dict[str, Any]] = {}
    for channel in channels:
        store = getattr(channel, "state_store", None)
        if store is None or not callable(getattr(store, "ping", None)):
            continue
        entry = seen.get(id(store))
        if entry is None:
            entry = seen[id(store)] = watch_of(store).health()
        out[_name(channel)] = entry
    return out


def health_response(
    report: Callable[[], Mapping[str, Any]],
) -> Callable[[IngressRequest], IngressResponse]:
    """A ``/healthz`` handler answering ``report()``: 200 when ``ok``, else 503."""

    def handler(_: IngressRequest) -> IngressResponse:
        document = dict(report())
        return IngressResponse.json(200 if document.get("ok") else 503, document)

    return handler
