"""Channels run as one service: long connections, health and a bounded shutdown.

``channelkit serve`` builds a `ChannelService` around its channels::

    service = ChannelService(channels, bridge=bridge)
    app = create_wsgi_app(service.http_channels, health=service.health)
    service.start()                 # every channel's long connections, own threads
    ...                             # serve ``app`` until SIGTERM / SIGINT
    clean = service.shutdown(10.0)  # stop, cancel, finalize, settle - within 10 s

`ChannelService.shutdown()` stops the long connections (no new messages), then
closes every channel (live runs cancelled, their cards finalized, pending questions
settled, pools joined), then closes the agent bridge; the channels are closed side by
side so one slow channel does not eat the others' time, and the whole shutdown is
bounded by the grace period.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from channelkit.platforms.common.connection import LongConnection, connections_of
from channelkit.web.health import health_report

__all__ = ["ChannelService"]

logger = logging.getLogger(__name__)


def _run_bounded(tasks: Sequence[tuple[str, Callable[[], object]]], deadline: float) -> list[str]:
    """Run ``tasks`` side by side on daemon threads; the names of those still running at
    ``deadline`` (a ``time.monotonic()`` instant) or that returned False. A task that
    raises is logged."""
    failed: list[str] = []

    def guarded(name: str, task: Callable[[], object]) -> None:
        try:
            if task() is False:
                failed.append(name)
        except Exception:
            logger.exception("shutdown: %s failed", name)

    threads = [
        threading.Thread(
            target=guarded, args=(name, task), name=f"channelkit-shutdown-{name}", daemon=True
        )
        for name, task in tasks
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    late = [name for (name, _), thread in zip(tasks, threads, strict=True) if thread.is_alive()]
    return late + [name for name in failed if name not in late]


class ChannelService:
    """Run ``channels`` together (see the module docstring).

    ``bridge`` is the agent bridge the service owns and closes last (None: the caller
    closes it). ``http_channels`` are the channels with ingress routes to mount.
    """

    def __init__(self, channels: Iterable[Any], *, bridge: Any = None) -> None:
        self.channels: list[Any] = list(channels)
        self.bridge = bridge
        self.connections: list[LongConnection] = []
        self._lock = threading.Lock()
        self._stopped = False

    @property
    def http_channels(self) -> list[Any]:
        """The channels that mount ingress routes (webhooks, card callbacks)."""
        return [c for c in self.channels if callable(getattr(c, "ingress_routes", None))]

    def start(self) -> list[LongConnection]:
        """Start every channel's long connections, each on its own thread; then let each
        channel with a ``recover_interrupted_runs()`` tell the people whose runs the
        previous process left unfinished (``channelkit.platforms.common.run_journal``)."""
        with self._lock:
            if self._stopped:
                return []
            for channel in self.channels:
                for connection in connections_of(channel):
                    connection.start()
                    self.connections.append(connection)
            for channel in self.channels:  # tell the runs a crash cut off (run_journal)
                recover = getattr(channel, "recover_interrupted_runs", None)
                if callable(recover):
                    try:
                        recover()
                    except Exception:
                        logger.exception("%s: recovering interrupted runs failed", channel)
            return list(self.connections)

    def health(self) -> dict[str, Any]:
        """The ``/healthz`` document of the channels (see `channelkit.web.health`)."""
        return health_report(self.channels)

    def shutdown(self, grace: float) -> bool:
        """Stop connections, close channels, close the bridge within ``grace`` seconds.

        Idempotent. True when everything finished in time; otherwise what is left is
        logged (it runs on daemon threads and cannot keep the process alive).
        """
        with self._lock:
            if self._stopped:
                return True
            self._stopped = True
            connections = list(self.connections)
            for channel in self.channels:  # connections a channel made after start()
                connections.extend(c for c in connections_of(channel) if c not in connections)
        deadline = time.monotonic() + max(0.0, grace)

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        def stopper(connection: LongConnection) -> Callable[[], object]:
            return lambda: connection.stop(left())

        def closer(channel: Any) -> Callable[[], object]:
            return lambda: channel.close(timeout=left())

        late = _run_bounded([(c.name, stopper(c)) for c in connections], deadline)
        late += _run_bounded(
            [(str(getattr(ch, "name", i)), closer(ch)) for i, ch in enumerate(self.channels)],
            deadline,
        )
        from channelkit.cluster_config import close_store

        def store_closer(channel: Any) -> Callable[[], object]:
            return lambda: close_store(channel)

        late += _run_bounded(  # the shared stores (state.redis), once their channels closed
            [(f"store-{i}", store_closer(ch)) for i, ch in enumerate(self.channels)], deadline
        )
        close = getattr(self.bridge, "close", None)
        if callable(close):
            late += _run_bounded([("agent", close)], deadline)
        if late:
            logger.warning(
                "shutdown: still running after the %.1f s grace period: %s",
                grace,
                ", ".join(late),
            )
        from channelkit.observability import hub

        hub.shutdown()  # the summary log line
        return not late
