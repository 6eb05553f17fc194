"""Slack Socket Mode: the app connects out to Slack, so it needs no public URL.

One `SlackSocket` (a `LongConnection`)
per channel with ``ingress="socket"``. Each connection's life (`SlackSocket.serve_once()`):

1. ``apps.connections.open`` with the app-level token (``xapp-...``) answers
   ``{ok, url}``: a one-time WebSocket URL (a new one for every connection);
2. the WebSocket connects to it (``websockets``' synchronous client);
3. envelopes are read one at a time on the connection's thread. Every envelope is
   ``{envelope_id, type, payload, retry_attempt, retry_reason,
   accepts_response_payload}``:

   * ``hello``: the connection is ready (counted);
   * ``disconnect``: Slack is about to close it (``reason``: ``warning``,
     ``refresh_requested``, ``link_disabled``...): the socket is closed and a new
     connection opened at once;
   * ``events_api`` (``payload``: the ``event_callback`` body the Events API would POST)
     and ``interactive`` (``payload``: the ``block_actions`` body): the ACK
     ``{"envelope_id": ...}`` is written FIRST (Slack wants it within 3 s), then the
     payload goes through exactly the handlers the Events API route uses after its
     signature check (the connection itself is authenticated by the app-level token),
     and only then their deferred work (the agent run, responders, Web API calls) is
     handed to the pool;
   * anything else (``slash_commands``, unknown types, frames that are not JSON) is
     ACKed when it carries an ``envelope_id`` and otherwise ignored; it never ends the
     connection.

Every envelope is processed once: its ``envelope_id`` is remembered (bounded, for
`DEDUP_TTL` seconds, across reconnects); a redelivery is ACKed again and dropped. A
retry of an event Slack saw no ACK for comes in a new envelope with the same
``event_id``; the channel deduplicates those (as it does Events API retries).

A dropped socket, a refused handshake or a failed ``apps.connections.open`` end the
connection with an error: `LongConnection` reconnects after its capped, jittered
backoff. The URL (it carries a ticket) and the tokens are never logged. ``websockets`` is
imported only when a connection starts.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from channelkit.ingress import IngressResponse, loads_json
from channelkit.platforms.common.connection import Backoff
from channelkit.platforms.common.replay import ReplayGuard
from channelkit.platforms.common.websocket import WebSocketConnection, silent_logger
from channelkit.runtime.clock import Clock

__all__ = ["DEDUP_TTL", "MAX_FRAME_BYTES", "SlackSocket", "ack_envelope"]

logger = logging.getLogger(__name__)

#: Largest frame accepted (bigger ones close the connection; it reconnects).
MAX_FRAME_BYTES = 1 << 20
#: Seconds a processed ``envelope_id`` is remembered.
DEDUP_TTL = 3600.0

# websockets logs frames (user text) and the handshake URL (a ticket) at DEBUG: its
# connections log here, and nothing is emitted from this logger.
_WS_LOGGER = silent_logger("channelkit.platforms.slack.socket_mode.websockets")

EventHandler = Callable[[Mapping[str, Any], bool], IngressResponse]
InteractionHandler = Callable[[Mapping[str, Any]], IngressResponse]


def ack_envelope(envelope_id: str) -> str:
    """The ACK frame of ``envelope_id``."""
    return json.dumps({"envelope_id": envelope_id}, separators=(",", ":"))


class SlackSocket(WebSocketConnection):
    """The Socket Mode connection of one channel; see the module docstring.

    ``open_url()`` returns a fresh WebSocket URL (the channel passes
    `open_socket_url()`). ``on_event`` /
    ``on_interaction`` are the channel's transport-neutral handlers. ``backoff`` and
    ``wait`` are `LongConnection`'s (tests inject a ``wait`` that records the delay
    and returns at once).
    """

    def __init__(
        self,
        open_url: Callable[[], str],
        on_event: EventHandler,
        on_interaction: InteractionHandler,
        *,
        name: str = "slack-socket",
        clock: Clock | None = None,
        backoff: Backoff | None = None,
        wait: Callable[[threading.Event, float], bool] | None = None,
        open_timeout: float = 10.0,
        ping_interval: float | None = 20.0,
        ping_timeout: float | None = 20.0,
    ) -> None:
        super().__init__(name, clock=clock, backoff=backoff, wait=wait, open_timeout=open_timeout)
        self._open_url = open_url
        self._on_event = on_event
        self._on_interaction = on_interaction
        self._ping_interval = ping_interval
        self._ping_timeout = ping_timeout
        self._seen = ReplayGuard(self._clock.time, ttl=DEDUP_TTL)
        #: envelopes by outcome (``events``, ``interactions``, ``duplicates``, ``hellos``,
        #: ``disconnects``, ``garbage``, ``ignored``)
        self.counts: dict[str, int] = {}

    # -- the connection ------------------------------------------------------------------
    def serve_once(self) -> None:
        """Open a connection (a new URL), read and ACK envelopes until it ends."""
        url = self._open_url()
        socket = self._connect(
            url,
            "Socket Mode",
            max_size=MAX_FRAME_BYTES,
            ping_interval=self._ping_interval,
            ping_timeout=self._ping_timeout,
            compression=None,
            user_agent_header="channelkit",
            logger=_WS_LOGGER,
        )
        # Slack may ask for a reconnect: at once, no backoff
        self._serve(
            socket,
            lambda s: self._read_until_disconnect(s, self.handle_frame),
            "the Socket Mode connection",
        )

    # -- envelopes -----------------------------------------------------------------------
    def handle_frame(self, raw: str | bytes, send: Callable[[str], None]) -> str | None:
        """Handle one frame read from the socket; ``"disconnect"`` when Slack asked for a
        reconnect, else None. ``send`` writes a frame back."""
        try:
            envelope = loads_json(raw)
        except ValueError:
            envelope = None
        if not isinstance(envelope, Mapping):
            self._count("garbage")
            logger.warning("[%s] ignored a Socket Mode frame that is not a JSON object", self.name)
            return None
        kind = envelope.get("type")
        if kind == "hello":
            self._count("hellos")
            return None
        if kind == "disconnect":
            self._count("disconnects")
            logger.info("[%s] Slack asked for a reconnect (%s)", self.name, envelope.get("reason"))
            return "disconnect"
        envelope_id = envelope.get("envelope_id")
        if not isinstance(envelope_id, str) or not envelope_id:
            self._count("ignored")
            return None
        send(ack_envelope(envelope_id))  # ACK first: Slack wants it within 3 s
        if not self._seen.first(envelope_id):
            self._count("duplicates")
            return None
        payload = envelope.get("payload")
        if kind not in ("events_api", "interactive") or not isinstance(payload, Mapping):
            self._count("ignored")
            return None
        if kind == "interactive":
            self._count("interactions")
            response = self._on_interaction(payload)
        elif payload.get("type") == "event_callback":
            self._count("events")
            attempt = envelope.get("retry_attempt")
            response = self._on_event(payload, isinstance(attempt, int) and attempt > 0)
        else:
            self._count("ignored")
            return None
        response.run_after()
        return None

    def seen_size(self) -> int:
        """``envelope_id``\\ s remembered (bounded)."""
        return len(self._seen)
