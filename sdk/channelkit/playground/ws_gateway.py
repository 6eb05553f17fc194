"""The plumbing shared by the emulators' WebSocket gateways.

`WsGateway` is the base of the DingTalk Stream mode gateway
(`channelkit.playground.stream_gateway`) and the Feishu long-connection gateway
(`channelkit.playground.feishu.gateway`): a ``websockets.sync.server`` on
127.0.0.1 started on first use in a daemon thread, one live bot connection (a new one
replaces it), frames kept until their ACK (sent again on the next connection when the
connection ended first), bounded ACK bookkeeping and the faults tests inject
(`drop()`, `refuse_handshakes()`,
`send_raw()`, `lose_acks()`,
`redeliver()`). A subclass admits handshakes (`WsGateway._admit()`),
reads frames (`WsGateway._on_frame()`) and builds what it delivers.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from http import HTTPStatus
from typing import Any, Generic, TypeVar
from urllib.parse import parse_qs, urlsplit

__all__ = ["MAX_KEPT", "WsGateway", "bounded_put"]

#: Frames, tickets/keys and ACKs kept (oldest dropped).
MAX_KEPT = 1_000

AckT = TypeVar("AckT")
#: One WebSocket frame as sent (text or binary).
Frame = str | bytes


def bounded_put(store: OrderedDict[str, Any], key: str, value: Any) -> None:
    """``store[key] = value``, dropping the oldest entries beyond `MAX_KEPT`."""
    store[key] = value
    while len(store) > MAX_KEPT:
        store.popitem(last=False)


def _kill(connection: Any) -> None:
    """Shut the connection's socket down (no close frame)."""
    try:
        connection.socket.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class WsGateway(Generic[AckT]):
    """One app's emulated WebSocket gateway; see the module docstring.

    Subclasses set ``_log`` (their module's logger), ``_ws_logger`` (the silenced
    ``websockets`` logger), ``_label`` (how log lines name the gateway),
    ``_thread_name``, ``_busy_text`` (the body of a 503 handshake) and ``_ack_count``
    (the ``counts`` key bumped per ACK, or None).
    """

    _log: logging.Logger = logging.getLogger(__name__)
    _ws_logger: logging.Logger = logging.getLogger(__name__ + ".websockets")
    _label = "gateway"
    _thread_name = "channelkit-emulator-ws"
    _busy_text = "try again later\n"
    _ack_count: str | None = None

    def __init__(self, *, ack_timeout: float) -> None:
        self.ack_timeout = ack_timeout
        #: the port the WebSocket server binds on 127.0.0.1 when it starts (0: a free one)
        self.listen_port = 0
        self._cond = threading.Condition()
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._live: Any = None  # the bot's current connection
        self._pending: OrderedDict[str, Sequence[Frame]] = OrderedDict()  # id -> frames
        self._sent: OrderedDict[str, Sequence[Frame]] = OrderedDict()  # ACKed frames
        self._acks: OrderedDict[str, AckT] = OrderedDict()
        self._refuse = 0
        self._lose = 0
        self.counts: dict[str, int] = {}

    @property
    def port(self) -> int:
        """The WebSocket server's port (0 before the server started)."""
        server = self._server
        return int(server.socket.getsockname()[1]) if server is not None else 0

    @property
    def connected(self) -> bool:
        """The bot holds a live connection."""
        with self._cond:
            return self._live is not None

    def wait_connected(self, timeout: float = 10.0, *, connections: int = 1) -> bool:
        """Wait until the bot is connected and at least ``connections`` were accepted."""
        return self.wait_for(
            lambda: self._live is not None and self.counts.get("connections", 0) >= connections,
            timeout,
        )

    def wait_for(self, predicate: Callable[[], object], timeout: float = 10.0) -> bool:
        """Wait (bounded) until ``predicate()`` (called with the lock held) is true."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def _count(self, name: str) -> None:  # with the lock held
        self.counts[name] = self.counts.get(name, 0) + 1
        self._cond.notify_all()

    # -- delivering --------------------------------------------------------------------
    def _deliver(self, message_id: str, frames: Sequence[Frame]) -> AckT | None:
        """Keep ``frames`` until ACKed, send them on the live connection (if any) and
        wait for the ACK (None when none came within ``ack_timeout``)."""
        with self._cond:
            bounded_put(self._pending, message_id, frames)
            live = self._live
        if live is not None:
            for frame in frames:
                self._send(live, frame)
        return self.wait_ack(message_id, self.ack_timeout)

    def wait_ack(self, message_id: str, timeout: float) -> AckT | None:
        """The ACK of ``message_id`` once it arrived (None after ``timeout``)."""
        self.wait_for(lambda: message_id in self._acks, timeout)
        with self._cond:
            return self._acks.get(message_id)

    def acks(self) -> list[AckT]:
        """Every ACK received (oldest first, bounded)."""
        with self._cond:
            return list(self._acks.values())

    def redeliver(self, message_id: str) -> AckT | None:
        """Send an already ACKed message again (as after a lost ACK); the new ACK."""
        with self._cond:
            frames = self._sent.get(message_id)
            live = self._live
            if frames is None or live is None:
                raise KeyError(message_id)
            self._acks.pop(message_id, None)
            bounded_put(self._pending, message_id, frames)
        for frame in frames:
            self._send(live, frame)
        return self.wait_ack(message_id, self.ack_timeout)

    def _send(self, connection: Any, data: Frame) -> None:
        try:
            connection.send(data)
        except Exception as exc:  # the connection died; pending frames wait for the next
            self._log.debug("%s: send failed: %s", self._label, type(exc).__name__)

    def _record_ack(self, connection: Any, message_id: str, ack: AckT) -> None:
        """Store the ACK of ``message_id`` (its frames are done with), unless a
        `lose_acks()` fault loses it with the connection."""
        with self._cond:
            lose = self._lose > 0 and message_id in self._pending
            if lose:
                self._lose -= 1
            else:
                frames = self._pending.pop(message_id, None)
                if frames is not None:
                    bounded_put(self._sent, message_id, frames)
                bounded_put(self._acks, message_id, ack)
                if self._ack_count is not None:
                    self._count(self._ack_count)
                self._cond.notify_all()
        if lose:
            _kill(connection)

    # -- faults --------------------------------------------------------------------------
    def drop(self) -> bool:
        """Kill the live connection's socket (no close frame); False if none."""
        with self._cond:
            live = self._live
            if live is not None:
                self._count("drops")
        if live is None:
            return False
        _kill(live)
        return True

    def send_raw(self, data: Frame) -> bool:
        """Send ``data`` as one frame to the live connection; False if not connected."""
        with self._cond:
            live = self._live
        if live is None:
            return False
        self._send(live, data)
        return True

    def refuse_handshakes(self, count: int) -> None:
        """Refuse the next ``count`` handshakes with HTTP 503."""
        with self._cond:
            self._refuse = count

    def lose_acks(self, count: int) -> None:
        """The next ``count`` ACKs are lost with their connection (dropped at once): the
        messages stay unACKed and are redelivered on the next connection."""
        with self._cond:
            self._lose = count

    # -- the WebSocket server -------------------------------------------------------------
    def listen(self) -> None:
        """Start the WebSocket server now, once (later calls do nothing): binds
        `listen_port` (0: a free port), so a port already taken raises `OSError` here."""
        with self._cond:
            if self._server is not None:
                return
            from websockets.sync.server import serve

            self._server = serve(
                self._handle,
                "127.0.0.1",
                self.listen_port,
                process_request=self._process_request,
                compression=None,
                max_size=1 << 20,
                logger=self._ws_logger,
            )
            self._thread = threading.Thread(
                target=self._server.serve_forever, name=self._thread_name, daemon=True
            )
            self._thread.start()

    def _process_request(self, connection: Any, request: Any) -> Any:
        query = parse_qs(urlsplit(request.path).query)
        with self._cond:
            if self._refuse > 0:
                self._refuse -= 1
                self._count("refused")
                return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE, self._busy_text)
            return self._admit(connection, query)

    def _admit(self, connection: Any, query: dict[str, list[str]]) -> Any:  # lock held
        """None to accept the handshake of ``query``, else the refusal response."""
        raise NotImplementedError

    def _handle(self, connection: Any) -> None:
        with self._cond:
            previous, self._live = self._live, connection
            self._count("connections")
            backlog = [f for frames in self._pending.values() for f in frames]
        if previous is not None:
            previous.close()
        for frame in backlog:
            with self._cond:
                self._count("redelivered")
            self._send(connection, frame)
        try:
            for raw in connection:
                self._on_frame(connection, raw)
        except Exception as exc:
            self._log.debug("%s: connection ended: %s", self._label, type(exc).__name__)
        finally:
            with self._cond:
                if self._live is connection:
                    self._live = None
                self._cond.notify_all()

    def _on_frame(self, connection: Any, raw: Frame) -> None:
        """Read one frame from the bot (an ACK goes to `_record_ack()`)."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop the server and close the live connection."""
        with self._cond:
            server, self._server = self._server, None
            live, self._live = self._live, None
            thread, self._thread = self._thread, None
        if live is not None:
            live.close()
        if server is not None:
            server.shutdown()
        if thread is not None:
            thread.join(5.0)
