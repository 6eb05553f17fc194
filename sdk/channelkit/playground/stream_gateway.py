"""The DingTalk emulator's Stream mode gateway: tickets, a WebSocket server, CALLBACK frames.

``POST /v1.0/gateway/connections/open`` (answered by the DingTalk emulator) calls
`StreamGateway.open()`: it starts the WebSocket server on 127.0.0.1 on first use
(``websockets.sync.server`` in a daemon thread), remembers the subscriptions and issues
a one-time ticket valid for ``ticket_lifetime`` seconds. A handshake without a valid
ticket is refused with HTTP 401.

`StreamGateway.deliver()` sends a ``CALLBACK`` frame (a fresh ``messageId``) to the
bot's live connection and waits for its ACK. A frame that was not ACKed when the
connection ended is sent again on the next connection (the same ``messageId``), as
DingTalk redelivers; a delivery gives up after ``ack_timeout`` seconds (status 0).

Faults for tests: `drop()` (the socket dies, no close frame), `disconnect()`
(the ``SYSTEM`` ``disconnect`` frame), `refuse_handshakes()` (the next n handshakes
get HTTP 503), `expire_tickets()` and `expire_next_tickets()` (HTTP 401),
`send_raw()` (any text, e.g. garbage JSON), `lose_acks()` (the next n ACKs are
dropped with the connection, so their frames are redelivered) and `ping()` (a
``SYSTEM`` ``ping``; returns the echoed data).
"""

from __future__ import annotations

import json
import logging
import secrets
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from channelkit.playground.ws_gateway import WsGateway, bounded_put

__all__ = ["DEFAULT_TICKET_LIFETIME", "StreamAck", "StreamGateway"]

logger = logging.getLogger(__name__)

#: Seconds an issued ticket stays usable.
DEFAULT_TICKET_LIFETIME = 90.0

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


class StreamGateway(WsGateway[StreamAck]):
    """One app's Stream gateway; see the module docstring.

    ``counts``: ``opens``, ``connections``, ``refused``, ``drops``, ``redelivered``.
    """

    _log = logger
    _ws_logger = _WS_LOGGER
    _label = "stream gateway"
    _thread_name = "channelkit-emulator-stream"
    _busy_text = "try again later\n"

    def __init__(
        self,
        app_key: str,
        *,
        ticket_lifetime: float = DEFAULT_TICKET_LIFETIME,
        ack_timeout: float = 10.0,
    ) -> None:
        super().__init__(ack_timeout=ack_timeout)
        self.app_key = app_key
        self.ticket_lifetime = ticket_lifetime
        self._tickets: OrderedDict[str, float] = OrderedDict()
        self._topics: set[str] = set()
        self._stale = 0

    # -- the gateway call ------------------------------------------------------------------
    def open(self, topics: Iterable[str]) -> tuple[str, str]:
        """Subscribe ``topics``; ``(endpoint, ticket)`` (the server starts on first use)."""
        self.listen()
        ticket = secrets.token_urlsafe(24)
        with self._cond:
            self._topics.update(topics)
            lifetime = self.ticket_lifetime
            if self._stale > 0:  # issued already expired (a slow client's ticket)
                self._stale -= 1
                lifetime = -1.0
            bounded_put(self._tickets, ticket, time.time() + lifetime)
            self._count("opens")
        return f"ws://127.0.0.1:{self.port}/connect", ticket

    def subscribed(self, topic: str) -> bool:
        """A bot opened a Stream connection for ``topic`` (its callbacks come here)."""
        with self._cond:
            return topic in self._topics

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
        return message_id, self._deliver(message_id, [frame])

    # -- faults --------------------------------------------------------------------------
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

    def expire_tickets(self) -> None:
        """Every ticket issued so far stops being usable."""
        with self._cond:
            self._tickets.clear()

    def expire_next_tickets(self, count: int) -> None:
        """The next ``count`` tickets are expired by the time the bot connects with them."""
        with self._cond:
            self._stale = count

    # -- the WebSocket server -------------------------------------------------------------
    def _admit(self, connection: Any, query: dict[str, list[str]]) -> Any:  # lock held
        ticket = (query.get("ticket") or [""])[0]
        expiry = self._tickets.pop(ticket, None)  # one-time
        if expiry is None or expiry < time.time():
            self._count("bad_tickets")
            return connection.respond(HTTPStatus.UNAUTHORIZED, "invalid or expired ticket\n")
        return None

    def _on_frame(self, connection: Any, raw: str | bytes) -> None:
        try:
            frame = json.loads(raw)
            headers = frame["headers"]
            message_id = str(headers["messageId"])
            ack = StreamAck(message_id, int(frame["code"]), str(frame.get("data", "")))
        except (ValueError, KeyError, TypeError):
            return  # not an ACK
        self._record_ack(connection, message_id, ack)
