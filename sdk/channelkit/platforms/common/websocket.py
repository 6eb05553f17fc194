"""WebSocket long connections: the socket plumbing DingTalk Stream mode, Slack Socket Mode
and the Feishu long connection share.

A `WebSocketConnection` is a `LongConnection` whose
`serve_once()` connects one ``websockets`` synchronous client socket
(`WebSocketConnection._connect()`: a refused handshake or a failed connect becomes a
`TransportError` that never carries the URL, which holds a ticket or credential),
then reads it until it ends (`WebSocketConnection._serve()`: the socket is kept for
`interrupt()`, a close becomes a `TransportError` unless the connection is
stopping). It counts frames by outcome in ``counts``. ``websockets`` is imported only
when a connection starts.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from channelkit.errors import TransportError
from channelkit.platforms.common.connection import Backoff, LongConnection
from channelkit.runtime.clock import Clock

__all__ = ["WebSocketConnection", "silent_logger"]


def silent_logger(name: str) -> logging.Logger:
    """A logger for ``websockets``' connections that emits nothing: it logs frames (user
    text) and the handshake URL (a ticket or credential) at DEBUG."""
    ws_logger = logging.getLogger(name)
    ws_logger.addHandler(logging.NullHandler())
    ws_logger.propagate = False
    return ws_logger


class WebSocketConnection(LongConnection):
    """A long connection over one WebSocket at a time; see the module docstring."""

    def __init__(
        self,
        name: str,
        *,
        clock: Clock | None = None,
        backoff: Backoff | None = None,
        wait: Callable[[threading.Event, float], bool] | None = None,
        open_timeout: float = 10.0,
    ) -> None:
        super().__init__(name, clock=clock, backoff=backoff, wait=wait)
        self._open_timeout = open_timeout
        self._socket: Any = None
        self._socket_lock = threading.Lock()
        self._counts_lock = threading.Lock()
        #: frames by outcome
        self.counts: dict[str, int] = {}

    def _refused(self, peer: str, response: Any) -> str:
        """The error text of a handshake ``peer`` refused with HTTP ``response``."""
        return f"{peer} refused the connection: HTTP {response.status_code}"

    def _connect(self, url: str, peer: str, **options: Any) -> Any:
        """Connect the socket at ``url`` (``options``: more ``connect`` arguments);
        ``peer`` names the other end in the errors."""
        from websockets.exceptions import InvalidStatus
        from websockets.sync.client import connect

        try:
            return connect(
                url,
                open_timeout=self._open_timeout,
                close_timeout=2.0,
                **options,
            )
        except InvalidStatus as exc:  # e.g. 401: a ticket expired before the handshake
            raise TransportError(self._refused(peer, exc.response)) from None
        except Exception as exc:  # the message may carry the URL (and so the ticket)
            raise TransportError(f"connecting {peer} failed: {type(exc).__name__}") from None

    def _serve(self, socket: Any, read: Callable[[Any], None], label: str) -> None:
        """Read ``socket`` with ``read`` until it ends, then close it; ``label`` names the
        connection in the error of an unexpected close."""
        from websockets.exceptions import ConnectionClosed

        with socket:  # closes it however the read loop ends
            with self._socket_lock:
                self._socket = socket
            try:
                if self.stopping:
                    return
                self.connected()
                read(socket)
            except ConnectionClosed as exc:
                if self.stopping:
                    return
                code = exc.rcvd.code if exc.rcvd is not None else None
                raise TransportError(f"{label} closed (code {code})") from None
            finally:
                with self._socket_lock:
                    self._socket = None

    def _read_until_disconnect(
        self, socket: Any, handle: Callable[[Any, Callable[[str], None]], str | None]
    ) -> None:
        """Hand each frame to ``handle`` until the server asks for a reconnect (at once,
        no backoff) or the connection stops."""
        while not self.stopping:
            if handle(socket.recv(), socket.send) == "disconnect":
                return

    def interrupt(self) -> None:
        """Close the socket so a blocked read ends (called by `stop()`)."""
        with self._socket_lock:
            socket = self._socket
        if socket is not None:
            socket.close()

    def _count(self, outcome: str) -> None:
        with self._counts_lock:
            self.counts[outcome] = self.counts.get(outcome, 0) + 1
