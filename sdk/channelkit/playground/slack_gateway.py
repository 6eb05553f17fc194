"""The Slack emulator's Socket Mode gateway: one-time URLs, a WebSocket server, envelopes.

``POST /apps.connections.open`` (answered by the Slack emulator with the app-level token)
calls `SlackSocketGateway.open()`: it starts the WebSocket server on 127.0.0.1 on
first use (`WsGateway`) and answers a URL with a
one-time ticket. A handshake without a valid ticket is refused with HTTP 401. Every
connection is greeted with a ``hello`` envelope.

`SlackSocketGateway.deliver()` sends an envelope (``events_api`` or ``interactive``,
a fresh ``envelope_id``) to the app's live connection and waits for its ACK
``{"envelope_id": ...}``. An envelope not ACKed when the connection ended is sent again
on the next connection; a delivery gives up after ``ack_timeout`` seconds.

Faults for tests: `disconnect()` (the ``disconnect`` envelope Slack sends before
closing), and the base's `drop()`, `send_raw()` (garbage),
`refuse_handshakes()` and `lose_acks()`.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from channelkit.playground.ws_gateway import WsGateway, bounded_put

__all__ = ["SlackSocketGateway"]

logger = logging.getLogger(__name__)

#: Seconds an issued URL stays usable (Slack: a short while, once).
URL_LIFETIME = 90.0

_WS_LOGGER = logging.getLogger("channelkit.playground.slack_gateway.websockets")
_WS_LOGGER.addHandler(logging.NullHandler())
_WS_LOGGER.propagate = False


class SlackSocketGateway(WsGateway[dict[str, Any]]):
    """One app's Socket Mode gateway; see the module docstring.

    ``counts``: ``opens``, ``connections``, ``refused``, ``drops``, ``redelivered``,
    ``acks``, ``disconnects``.
    """

    _log = logger
    _ws_logger = _WS_LOGGER
    _label = "slack socket gateway"
    _thread_name = "channelkit-emulator-slack-socket"
    _busy_text = "try again later\n"
    _ack_count = "acks"

    def __init__(self, *, ack_timeout: float = 10.0) -> None:
        super().__init__(ack_timeout=ack_timeout)
        self._tickets: OrderedDict[str, float] = OrderedDict()

    def open(self) -> str:
        """A fresh one-time WebSocket URL (the server starts on first use)."""
        self.listen()
        ticket = secrets.token_urlsafe(24)
        with self._cond:
            bounded_put(self._tickets, ticket, time.time() + URL_LIFETIME)
            self._count("opens")
        return f"ws://127.0.0.1:{self.port}/link/?ticket={ticket}"

    def deliver(
        self, kind: str, payload: Mapping[str, Any], *, retry_attempt: int = 0
    ) -> tuple[str, dict[str, Any] | None]:
        """Send ``payload`` in a ``kind`` envelope; ``(envelope_id, ACK or None)``."""
        envelope_id = uuid.uuid4().hex
        frame = json.dumps(
            {
                "envelope_id": envelope_id,
                "type": kind,
                "payload": payload,
                "accepts_response_payload": kind == "interactive",
                "retry_attempt": retry_attempt,
                "retry_reason": "timeout" if retry_attempt else "",
            },
            ensure_ascii=False,
        )
        return envelope_id, self._deliver(envelope_id, [frame])

    def disconnect(self, reason: str = "refresh_requested") -> bool:
        """Send the ``disconnect`` envelope; False if not connected."""
        with self._cond:
            self._count("disconnects")
        frame = {"type": "disconnect", "reason": reason, "debug_info": {"host": "emulator"}}
        return self.send_raw(json.dumps(frame))

    def _admit(self, connection: Any, query: dict[str, list[str]]) -> Any:  # lock held
        ticket = (query.get("ticket") or [""])[0]
        expiry = self._tickets.pop(ticket, None)  # one-time
        if expiry is None or expiry < time.time():
            self._count("bad_tickets")
            return connection.respond(HTTPStatus.UNAUTHORIZED, "invalid or expired ticket\n")
        return None

    def _handle(self, connection: Any) -> None:
        hello = {
            "type": "hello",
            "num_connections": 1,
            "connection_info": {"app_id": "A0PLAYGROUND"},
            "debug_info": {"host": "emulator"},
        }
        self._send(connection, json.dumps(hello))
        super()._handle(connection)

    def _on_frame(self, connection: Any, raw: str | bytes) -> None:
        try:
            frame = json.loads(raw)
            envelope_id = str(frame["envelope_id"])
        except (ValueError, KeyError, TypeError):
            return  # not an ACK
        ack = dict(frame)
        ack["at"] = time.time()
        self._record_ack(connection, envelope_id, ack)
