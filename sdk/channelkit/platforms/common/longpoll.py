"""Long polling: an HTTP session whose blocked reads can be cut, and the connection base.

A long poll holds an HTTP request open for up to tens of seconds. Stopping the channel
must not wait for it, so `InterruptibleSession` remembers the socket of every
connection it opens and `InterruptibleSession.interrupt()` shuts them down: a read
blocked in another thread returns at once (as a connection error, which the stopping
poller ignores).

`PollingConnection` is the `LongConnection`
of a polling ingress: `PollingConnection.serve_once()` calls `poll_once()`
until the connection stops; any failure ends it and the base waits a capped, jittered
backoff before polling again. A `RateLimited` that names
``retry_after`` is waited out exactly (never shorter), then polling resumes.
"""

from __future__ import annotations

import logging
import socket
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from channelkit.errors import RateLimited
from channelkit.platforms.common.connection import Backoff, LongConnection
from channelkit.runtime.clock import Clock

if TYPE_CHECKING:
    import requests

__all__ = ["InterruptibleSession", "PollingConnection"]

logger = logging.getLogger(__name__)


class InterruptibleSession:
    """A ``requests.Session`` (``.session``) whose open sockets `interrupt()` shuts down.

    Built like `channelkit.http.transport.make_session()` (no urllib3 retries), with
    connection classes that record their socket once connected.
    """

    def __init__(self, pool_size: int = 2) -> None:
        import requests
        from requests.adapters import HTTPAdapter
        from urllib3.connection import HTTPConnection, HTTPSConnection
        from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

        self._sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._interrupted = False
        track = self._track

        class _Http(HTTPConnection):
            def connect(self) -> None:
                super().connect()
                track(self.sock)

        class _Https(HTTPSConnection):
            def connect(self) -> None:
                super().connect()
                track(self.sock)

        class _HttpPool(HTTPConnectionPool):
            ConnectionCls = _Http

        class _HttpsPool(HTTPSConnectionPool):
            ConnectionCls = _Https

        class _Adapter(HTTPAdapter):
            def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
                super().init_poolmanager(*args, **kwargs)
                self.poolmanager.pool_classes_by_scheme = {"http": _HttpPool, "https": _HttpsPool}

        self.session: requests.Session = requests.Session()
        adapter = _Adapter(pool_connections=pool_size, pool_maxsize=pool_size, max_retries=0)
        self.session.mount("https://", adapter)
        self.session.mount("http://", adapter)

    def _track(self, sock: Any) -> None:
        if not isinstance(sock, socket.socket):
            return
        with self._lock:
            if not self._interrupted:
                self._sockets.add(sock)
                return
        _shutdown(sock)  # connected after interrupt(): cut at once

    def interrupt(self) -> None:
        """Shut down every open socket: blocked reads and writes fail at once. Final:
        connections opened later are cut as soon as they connect."""
        with self._lock:
            self._interrupted = True
            sockets = list(self._sockets)
            self._sockets.clear()
        for sock in sockets:
            _shutdown(sock)

    def close(self) -> None:
        """Interrupt, then release the connection pool."""
        self.interrupt()
        self.session.close()


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed


class PollingConnection(LongConnection):
    """A polling ingress: `poll_once()` again and again until stopped.

    Subclasses implement `poll_once()` (one request: fetch, hand every item on, move
    the cursor past what was handed on) and may override `prepare()` (once per
    connection, e.g. ``deleteWebhook``). ``session`` is the
    `InterruptibleSession` the subclass's client sends through; `interrupt()`
    cuts its reads.
    """

    def __init__(
        self,
        name: str,
        session: InterruptibleSession,
        *,
        clock: Clock | None = None,
        backoff: Backoff | None = None,
        wait: Callable[[threading.Event, float], bool] | None = None,
    ) -> None:
        super().__init__(name, clock=clock, backoff=backoff, wait=wait)
        self.session = session

    def prepare(self) -> None:
        """Once per connection, before the first poll (raise to back off and retry)."""

    def poll_once(self) -> None:
        """One poll: fetch, hand on, advance the cursor (raise on a failure)."""
        raise NotImplementedError

    def serve_once(self) -> None:
        try:
            self.prepare()
            first = True
            while not self.stopping:
                self.poll_once()
                if first and not self.stopping:
                    self.connected()
                    first = False
        except RateLimited as exc:
            if self.stopping or exc.retry_after is None:
                raise
            logger.warning("%s: rate limited; polling again in %.1f s", self.name, exc.retry_after)
            self._wait(self._stop, exc.retry_after)  # a clean end: poll again at once

    def interrupt(self) -> None:
        self.session.interrupt()
