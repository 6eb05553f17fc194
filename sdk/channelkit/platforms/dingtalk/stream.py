"""DingTalk Stream mode: the bot connects out to DingTalk, so it needs no public URL.

One `DingtalkStream` (a `LongConnection`)
per channel. Each connection's life (`DingtalkStream.serve_once()`):

1. ``POST /v1.0/gateway/connections/open`` with the client id and secret and two
   ``CALLBACK`` subscriptions (robot messages `ROBOT_TOPIC`, card callbacks
   `CARD_TOPIC`) answers ``{endpoint, ticket}``; a new ticket for every connection
   (tickets are short-lived and one-time);
2. the WebSocket connects at ``endpoint?ticket=...`` (``websockets``' synchronous client);
3. frames are read one at a time on the connection's thread:

   * ``SYSTEM`` ``ping``: answered at once, echoing its ``data``;
   * ``SYSTEM`` ``disconnect``: the socket is closed and a new connection opened at once;
   * ``CALLBACK``: the frame's ``data`` (a JSON string) goes through exactly the path the
     HTTP handlers use after their signature check
     (`dispatch_robot_message()`,
     `dispatch_card_callback()`:
     parse, correlate, authorize, claim; no signature, the connection is authenticated by
     its ticket), the ACK frame is written, and only then the deferred work (the agent
     run, responders, card writes) is handed to the pool;
   * anything else (``EVENT`` frames, unknown topics, frames that are not JSON) is ACKed
     when it has a ``messageId`` and otherwise ignored; it never ends the connection.

Every ``CALLBACK`` is processed once: its ``messageId`` is remembered (bounded, for
`DEDUP_TTL` seconds, across reconnects), and a redelivery (DingTalk resends what it
saw no ACK for) is ACKed again without being processed. A callback the channel refused
(closed: ACK code 500) is forgotten, so a redelivery may be served.

A dropped socket, a refused handshake, an expired ticket or a failed ``open`` call end
the connection with an error: `LongConnection` reconnects after its capped,
jittered backoff. ``websockets`` is imported only when a connection starts.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol
from urllib.parse import quote

from channelkit.ingress import IngressResponse, loads_json
from channelkit.platforms.common.connection import Backoff
from channelkit.platforms.common.replay import ReplayGuard
from channelkit.platforms.common.websocket import WebSocketConnection, silent_logger
from channelkit.runtime.clock import Clock

__all__ = [
    "CARD_TOPIC",
    "DEDUP_TTL",
    "MAX_FRAME_BYTES",
    "ROBOT_TOPIC",
    "TOPICS",
    "DingtalkStream",
    "StreamHandlers",
    "ack_frame",
]

logger = logging.getLogger(__name__)

#: Robot messages (``CALLBACK``).
ROBOT_TOPIC = "/v1.0/im/bot/messages/get"
#: Card action callbacks of cards created with ``callbackType: "STREAM"`` (``CALLBACK``).
CARD_TOPIC = "/v1.0/card/instances/callback"
#: The topics a channel subscribes to.
TOPICS = (ROBOT_TOPIC, CARD_TOPIC)
#: Largest frame accepted (bigger ones close the connection; it reconnects).
MAX_FRAME_BYTES = 1 << 20
#: Seconds a processed ``messageId`` is remembered (a redelivery within it is not run).
DEDUP_TTL = 3600.0

# websockets logs frames (user text) and the handshake URL (the ticket) at DEBUG: its
# connections log here, and nothing is emitted from this logger.
_WS_LOGGER = silent_logger("channelkit.platforms.dingtalk.stream.websockets")


class StreamHandlers(Protocol):
    """What the connection hands callbacks to (the channel)."""

    def dispatch_robot_message(self, payload: Any) -> IngressResponse: ...

    def dispatch_card_callback(self, payload: Any) -> IngressResponse: ...


def ack_frame(message_id: str, code: int, data: str, message: str = "OK") -> str:
    """The ACK frame for ``message_id`` (``data``: the response JSON as text)."""
    return json.dumps(
        {
            "code": code,
            "headers": {"messageId": message_id, "contentType": "application/json"},
            "message": message,
            "data": data,
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )


def _ack_code(status: int) -> tuple[int, str]:
    if status == 200:
        return 200, "OK"
    if status == 404:
        return 404, "not implemented"
    if 400 <= status < 500:
        return 400, "bad request"
    return 500, "unavailable"


def ticket_url(endpoint: str, ticket: str) -> str:
    """``endpoint?ticket=...`` (the ticket URL-quoted)."""
    separator = "&" if "?" in endpoint else "?"
    return f"{endpoint}{separator}ticket={quote(ticket, safe='')}"


class DingtalkStream(WebSocketConnection):
    """The Stream mode connection of one channel; see the module docstring.

    ``open_connection()`` returns ``(endpoint, ticket)`` (the channel passes
    `open_stream_connection()`).
    ``backoff`` and ``wait`` are `LongConnection`'s (tests inject a ``wait`` that
    records the delay and returns at once). ``ping_interval``/``ping_timeout``: the
    WebSocket keepalive that detects a half-open socket.
    """

    def __init__(
        self,
        handlers: StreamHandlers,
        open_connection: Callable[[], tuple[str, str]],
        *,
        name: str = "dingtalk-stream",
        clock: Clock | None = None,
        backoff: Backoff | None = None,
        wait: Callable[[threading.Event, float], bool] | None = None,
        open_timeout: float = 10.0,
        ping_interval: float | None = 20.0,
        ping_timeout: float | None = 20.0,
    ) -> None:
        super().__init__(name, clock=clock, backoff=backoff, wait=wait, open_timeout=open_timeout)
        self._handlers = handlers
        self._open_connection = open_connection
        self._ping_interval = ping_interval
        self._ping_timeout = ping_timeout
        self._seen = ReplayGuard(self._clock.time, ttl=DEDUP_TTL)
        #: frames by outcome (``callbacks``, ``duplicates``, ``pings``, ``ignored``...)
        self.counts: dict[str, int] = {}

    # -- the connection ------------------------------------------------------------------
    def serve_once(self) -> None:
        """Open a connection (new ticket), read and ACK frames until it ends."""
        endpoint, ticket = self._open_connection()
        socket = self._connect(
            ticket_url(endpoint, ticket),
            "the Stream endpoint",
            max_size=MAX_FRAME_BYTES,
            ping_interval=self._ping_interval,
            ping_timeout=self._ping_timeout,
            compression=None,
            user_agent_header="channelkit",
            logger=_WS_LOGGER,
        )
        # the server may ask for a reconnect: at once, no backoff
        self._serve(
            socket,
            lambda s: self._read_until_disconnect(s, self.handle_frame),
            "the Stream connection",
        )

    # -- frames --------------------------------------------------------------------------
    def send_frame(self, send: Callable[[str], None], message_id: str, text: str) -> None:
        """Write one frame (an ACK or a pong) for ``message_id``."""
        send(text)

    def handle_frame(self, raw: str | bytes, send: Callable[[str], None]) -> str | None:
        """Handle one frame read from the socket; ``"disconnect"`` when the server asked
        for a reconnect, else None. ``send`` writes a frame back."""
        try:
            frame = loads_json(raw)
        except ValueError:
            frame = None
        if not isinstance(frame, Mapping):
            self._count("garbage")
            logger.warning("[%s] ignored a Stream frame that is not a JSON object", self.name)
            return None
        headers = frame.get("headers")
        headers = headers if isinstance(headers, Mapping) else {}
        kind, topic = frame.get("type"), headers.get("topic")
        message_id = headers.get("messageId")
        message_id = message_id if isinstance(message_id, str) and message_id else None
        if kind == "SYSTEM":
            if topic == "disconnect":
                self._count("disconnects")
                return "disconnect"
            if topic == "ping" and message_id is not None:
                self._count("pings")
                data = frame.get("data")
                echo = data if isinstance(data, str) else "{}"
                self.send_frame(send, message_id, ack_frame(message_id, 200, echo))
            return None
        if message_id is None:
            self._count("ignored")
            return None
        if kind != "CALLBACK":
            self._count("ignored")  # no EVENT subscription; ACKed so it is not resent
            self.send_frame(send, message_id, ack_frame(message_id, 200, "{}"))
            return None
        if not self._seen.first(message_id):
            self._count("duplicates")  # a redelivery: ACK it again, process nothing
            self.send_frame(send, message_id, ack_frame(message_id, 200, "{}"))
            return None
        response = self._dispatch(topic, frame.get("data"))
        if response.status >= 500:
            self._seen.forget(message_id)  # refused (closed): a redelivery may be served
        code, text = _ack_code(response.status)
        self._count("callbacks")
        try:
            self.send_frame(
                send, message_id, ack_frame(message_id, code, response.body.decode(), text)
            )
        finally:
            # after the ACK: hand the slow work to the pool. It runs even when the ACK
            # could not be written: the callback was claimed, and a redelivery is only
            # ACKed again (never processed twice)
            response.run_after()
        return None

    def _dispatch(self, topic: Any, data: Any) -> IngressResponse:
        if topic not in TOPICS:
            return IngressResponse(404, b"{}")
        try:
            payload = loads_json(data) if isinstance(data, str) else None
        except ValueError:
            payload = None
        if not isinstance(payload, Mapping):
            return IngressResponse(400, b"{}")
        if topic == ROBOT_TOPIC:
            return self._handlers.dispatch_robot_message(payload)
        return self._handlers.dispatch_card_callback(payload)

    def seen_size(self) -> int:
        """``messageId``\\ s remembered (bounded)."""
        return len(self._seen)
