"""The DingTalk emulator's Stream mode gateway: tickets, a WebSocket server, CALLBACK frames.

``POST /v1.0/gateway/connections/open`` (answered by the DingTalk emulator) calls
:meth:`StreamGateway.open`: it starts the WebSocket server on 127.0.0.1 on first use
(``websockets.sync.server`` in a daemon thread), remembers the subscriptions and issues
a one-time ticket valid for ``ticket_lifetime`` seconds. A handshake without a valid
ticket is refused with HTTP 401.

:meth:`StreamGateway.deliver` sends a ``CALLBACK`` frame (a fresh ``messageId``) to the
bot's live connection and waits for its ACK. A frame that was not ACKed when the
connection ended is sent again on the next connection (the same ``messageId``), as
DingTalk redelivers; a delivery gives up after ``ack_timeout`` seconds (status 0).

Faults for tests: :meth:`drop` (the socket dies, no close frame), :meth:`disconnect`
(the ``SYSTEM`` ``disconnect`` frame), :meth:`refuse_handshakes` (the next n handshakes
get HTTP 503), :meth:`expire_tickets` and :meth:`expire_next_tickets` (HTTP 401),
:meth:`send_raw` (any text, e.g. garbage JSON), :meth:`lose_acks` (the next n ACKs are
dropped with the connection, so their frames are redelivered) and :meth:`ping` (a
``SYSTEM`` ``ping``; returns the echoed data).
"""

from __future__ import annotations

import json
import logging
import secrets
import socket
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["DEFAULT_TICKET_LIFETIME", "StreamAck", "StreamGateway"]

logger = logging.getLogger(__name__)

#: Seconds an issued ticket stays usable.
DEFAULT_TICKET_LIFETIME = 90.0
#: Tickets, ACKs and unACKed frames kept (oldest dropped).
MAX_KEPT = 1_000

# websockets logs handshakes (the ticket) and frames at DEBUG: nothing is emitted here.
_WS_LOGGER = logging.getLogger("channelkit.playground.stream_gateway.websockets")
_WS_LOGGER.addHandler(logging.NullHandler())
_WS_LOGGER.propagate = False


@dataclass(frozen=True)
class StreamAck:
    """The bot's ACK of one frame."""

    message_id: str
    code: int
    data: str


def _bounded_put(store: OrderedDict[str, Any], key: str, value: Any) -> None:
    store[key] = value
    while len(store) > MAX_KEPT:
        store.popitem(last=False)


class StreamGateway:
    """One app's Stream gateway; see the module docstring."""

    def __init__(
        self,
        app_key: str,
        *,
        ticket_lifetime: float = DEFAULT_TICKET_LIFETIME,
        ack_timeout: float = 10.0,
    ) -> None:
        self.app_key = app_key
        self.ticket_lifetime = ticket_lifetime
        self.ack_timeout = ack_timeout
        self._cond = threading.Condition()
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._tickets: OrderedDict[str, float] = OrderedDict()
        self._topics: set[str] = set()
        self._live: Any = None  # the bot's current connection
        self._pending: OrderedDict[str, str] = OrderedDict()  # messageId -> frame text
        self._acks: OrderedDict[str, StreamAck] = OrderedDict()
        self._frames_sent: OrderedDict[str, str] = OrderedDict()  # ACKed frames
        self._refuse = 0
        self._lose = 0
        self._stale = 0
        #: counts: ``opens``, ``connections``, ``refused``, ``drops``, ``redelivered``
        self.counts: dict[str, int] = {}

    # -- the gateway call ------------------------------------------------------------------
    def open(self, topics: Iterable[str]) -> tuple[str, str]:
        """Subscribe ``topics``; ``(endpoint, ticket)`` (the server starts on first use)."""
        self._ensure_server()
        ticket = secrets.token_urlsafe(24)
        with self._cond:
            self._topics.update(topics)
            lifetime = self.ticket_lifetime
            if self._stale > 0:  # issued already expired (a slow client's ticket)
                self._stale -= 1
                lifetime = -1.0
            _bounded_put(self._tickets, ticket, time.time() + lifetime)
            self._count("opens")
        return f"ws://127.0.0.1:{self.port}/connect", ticket

    def subscribed(self, topic: str) -> bool:
        """A bot opened a Stream connection for ``topic`` (its callbacks come here)."""
        with self._cond:
            return topic in self._topics

    @property
    def port(self) -> int:
        """The WebSocket server's port (0 before the first :meth:`open`)."""
        server = self._server
        return int(server.socket.getsockname()[1]) if server is not None else 0

    @property
    def connected(self) -> bool:
        """The bot holds a live connection."""
        with self._cond:
            return self._live is not None

    def wait_connected(self, timeout: float = 10.0, *, connections: int = 1) -> bool:
        """Wait until the bot is connected and at least ``connections`` were accepted."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._live is None or self.counts.get("connections", 0) < connections:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def _count(self, name: str) -> None:  # with the lock held
        self.counts[name] = self.counts.get(name, 0) + 1
        self._cond.notify_all()

    # -- delivering --------------------------------------------------------------------
    def deliver(self, topic: str, payload: Mapping[str, Any]) -> tuple[str, StreamAck | None]:
        """Send ``payload`` as a ``CALLBACK`` frame on ``topic``; ``(messageId, ACK or
        None when none came within ack_timeout)``."""
        message_id = uuid.uuid4().hex
        frame = json.dumps(
            {
                "specVersion": "1.0",
                "type": "CALLBACK",
                "headers": {
                    "appId": self.app_key,
                    "contentType": "application/json",
                    "messageId": message_id,
                    "time": str(int(time.time() * 1000)),
                    "topic": topic,
                },
                "data": json.dumps(payload, ensure_ascii=False),
            },
            ensure_ascii=False,
        )
        with self._cond:
            _bounded_put(self._pending, message_id, frame)
            live = self._live
        if live is not None:
            self._send(live, frame)
        return message_id, self.wait_ack(message_id, self.ack_timeout)

    def wait_ack(self, message_id: str, timeout: float) -> StreamAck | None:
        """The ACK of ``message_id`` once it arrived (None after ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while message_id not in self._acks:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)
            return self._acks[message_id]

    def acks(self) -> list[StreamAck]:
        """Every ACK received (oldest first, bounded)."""
        with self._cond:
            return list(self._acks.values())

    def redeliver(self, message_id: str) -> StreamAck | None:
        """Send an already ACKed frame again (as after a lost ACK); the new ACK."""
        with self._cond:
            frame = self._frames_sent.get(message_id)
            live = self._live
            if frame is None or live is None:
                raise KeyError(message_id)
            self._acks.pop(message_id, None)
            _bounded_put(self._pending, message_id, frame)
        self._send(live, frame)
        return self.wait_ack(message_id, self.ack_timeout)

    @staticmethod
    def _send(connection: Any, text: str) -> None:
        try:
            connection.send(text)
        except Exception as exc:  # the connection died; the frame waits for the next one
            logger.debug("stream gateway: send failed: %s", type(exc).__name__)

    # -- faults --------------------------------------------------------------------------
    def drop(self) -> bool:
        """Kill the live connection's socket (no close frame); False if none."""
        with self._cond:
            live = self._live
            if live is not None:
                self._count("drops")
        if live is None:
            return False
        try:
            live.socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        return True

    def disconnect(self) -> bool:
        """Send the ``SYSTEM`` ``disconnect`` frame; False if not connected."""
        return self.send_raw(self._system("disconnect", "{}")[1])

    def ping(self, data: str = '{"opaque":"emulator"}') -> StreamAck | None:
        """Send a ``SYSTEM`` ``ping``; the bot's answer (its ``data`` echoes ``data``)."""
        message_id, frame = self._system("ping", data)
        if not self.send_raw(frame):
            return None
        return self.wait_ack(message_id, self.ack_timeout)

    def _system(self, topic: str, data: str) -> tuple[str, str]:
        message_id = uuid.uuid4().hex
        headers = {"messageId": message_id, "topic": topic, "contentType": "application/json"}
        frame = {"specVersion": "1.0", "type": "SYSTEM", "headers": headers, "data": data}
        return message_id, json.dumps(frame)

    def send_raw(self, text: str) -> bool:
        """Send ``text`` as one frame to the live connection; False if not connected."""
        with self._cond:
            live = self._live
        if live is None:
            return False
        self._send(live, text)
        return True

    def refuse_handshakes(self, count: int) -> None:
        """Refuse the next ``count`` handshakes with HTTP 503."""
        with self._cond:
            self._refuse = count

    def expire_tickets(self) -> None:
        """Every ticket issued so far stops being usable."""
        with self._cond:
            self._tickets.clear()

    def expire_next_tickets(self, count: int) -> None:
        """The next ``count`` tickets are expired by the time the bot connects with them."""
        with self._cond:
            self._stale = count

    def lose_acks(self, count: int) -> None:
        """The next ``count`` ACKs are lost with their connection (dropped at once): the
        frames stay unACKed and are redelivered on the next connection."""
        with self._cond:
            self._lose = count

    # -- the WebSocket server -------------------------------------------------------------
    def _ensure_server(self) -> None:
        with self._cond:
            if self._server is not None:
                return
            from websockets.sync.server import serve

            self._server = serve(
                self._handle,
                "127.0.0.1",
                0,
                process_request=self._process_request,
                compression=None,
                max_size=1 << 20,
                logger=_WS_LOGGER,
            )
            self._thread = threading.Thread(
                target=self._server.serve_forever, name="channelkit-emulator-stream", daemon=True
            )
            self._thread.start()

    def _process_request(self, connection: Any, request: Any) -> Any:
        query = parse_qs(urlsplit(request.path).query)
        ticket = (query.get("ticket") or [""])[0]
        with self._cond:
            if self._refuse > 0:
                self._refuse -= 1
                self._count("refused")
                return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE, "try again later\n")
            expiry = self._tickets.pop(ticket, None)  # one-time
        if expiry is None or expiry < time.time():
            with self._cond:
                self._count("bad_tickets")
            return connection.respond(HTTPStatus.UNAUTHORIZED, "invalid or expired ticket\n")
        return None

    def _handle(self, connection: Any) -> None:
        with self._cond:
            previous, self._live = self._live, connection
            self._count("connections")
            backlog = list(self._pending.values())
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
            logger.debug("stream gateway: connection ended: %s", type(exc).__name__)
        finally:
            with self._cond:
                if self._live is connection:
                    self._live = None
                self._cond.notify_all()

    def _on_frame(self, connection: Any, raw: str | bytes) -> None:
        try:
            frame = json.loads(raw)
            headers = frame["headers"]
            message_id = str(headers["messageId"])
            ack = StreamAck(message_id, int(frame["code"]), str(frame.get("data", "")))
        except (ValueError, KeyError, TypeError):
            return  # not an ACK
        with self._cond:
            if self._lose > 0 and message_id in self._pending:
                self._lose -= 1
                lose = True
            else:
                lose = False
                frame_text = self._pending.pop(message_id, None)
                if frame_text is not None:
                    _bounded_put(self._frames_sent, message_id, frame_text)
                _bounded_put(self._acks, message_id, ack)
                self._cond.notify_all()
        if lose:
            try:
                connection.socket.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

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
