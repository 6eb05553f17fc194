"""The Discord Gateway: the bot's outbound WebSocket, the default way Discord's events
reach it (no public URL needed).

One `DiscordGateway` (a `WebSocketConnection`) per channel. One connection's life
(`DiscordGateway.serve_once()`):

1. connect to the gateway URL (``wss://gateway.discord.gg/?v=10&encoding=json``), or, when
   a session can be resumed, to the ``resume_gateway_url`` its ``READY`` named;
2. read HELLO (op 10, ``d.heartbeat_interval`` in milliseconds; within `HELLO_TIMEOUT`);
3. send RESUME (op 6: token, ``session_id``, the last ``seq``) for a live session, else
   IDENTIFY (op 2: token, `intents`, connection properties);
4. heartbeat (op 1 with the last ``seq``) on the shared scheduler: the first after
   ``interval * jitter()`` (jitter in [0, 1)), then every interval. A heartbeat whose
   predecessor got no HEARTBEAT ACK (op 11) means a zombie connection: the socket is
   closed with code 4000 (a resumable close) and the connection reconnects and resumes.
   A heartbeat request from Discord (op 1) is answered at once;
5. read frames until the connection ends:

   * DISPATCH (op 0): ``s`` is the event's sequence number. An event at or below the last
     sequence handled is a replay (a resume sends again what followed the ``seq`` it was
     given) and is skipped, so no event is handled twice; ``READY`` records
     ``session_id`` and ``resume_gateway_url``; the events in ``events``
     (``MESSAGE_CREATE`` and ``INTERACTION_CREATE`` by default) go to
     ``on_dispatch(event_name, data)`` on the connection's thread: it must only verify,
     claim and hand work on, like a web handler. An error it raises is logged, never ends
     the connection;
   * RECONNECT (op 7): close and reconnect at once, resuming;
   * INVALID SESSION (op 9): ``d: true`` reconnects and resumes; ``d: false`` forgets
     the session, waits 1-5 s (Discord asks for it) and identifies anew;
   * anything else that is not a JSON object with an integer ``op`` is garbage: logged
     (without its content) and skipped.

A close code that ends a session (`SESSION_ENDING_CLOSES`: invalid sequence, session
timed out...) makes the next connection identify; 4004 (authentication failed) is an
`AuthError` (the long connection backs off as for refused credentials); 4013/4014
(invalid or disallowed intents: the Message Content intent must be switched on in the
developer portal) name the fix in the error. The token is never logged, and neither is
a frame's content. ``websockets`` is imported only when a connection starts.
"""

from __future__ import annotations

import json
import logging
import platform
import threading
from collections.abc import Callable, Collection, Mapping
from typing import Any

from channelkit.errors import AuthError, ConfigurationError, TransportError
from channelkit.http import retry
from channelkit.ingress import loads_json
from channelkit.platforms.common.connection import Backoff
from channelkit.platforms.common.websocket import WebSocketConnection, silent_logger
from channelkit.runtime.scheduler import Scheduler, TimerHandle

__all__ = [
    "DEFAULT_EVENTS",
    "DEFAULT_GATEWAY_URL",
    "DEFAULT_INTENTS",
    "HELLO_TIMEOUT",
    "INTENT_DIRECT_MESSAGES",
    "INTENT_GUILDS",
    "INTENT_GUILD_MESSAGES",
    "INTENT_MESSAGE_CONTENT",
    "MAX_FRAME_BYTES",
    "SESSION_ENDING_CLOSES",
    "DiscordGateway",
]

logger = logging.getLogger(__name__)

#: The gateway Discord serves (API v10, JSON frames).
DEFAULT_GATEWAY_URL = "wss://gateway.discord.gg/?v=10&encoding=json"
_QUERY = "v=10&encoding=json"

#: Guild, channel and thread lifecycle events.
INTENT_GUILDS = 1 << 0
#: Messages in guild channels.
INTENT_GUILD_MESSAGES = 1 << 9
#: Messages in DMs.
INTENT_DIRECT_MESSAGES = 1 << 12
#: The text of messages (a privileged intent: switch it on in the developer portal).
INTENT_MESSAGE_CONTENT = 1 << 15
#: What a chat bot needs.
DEFAULT_INTENTS = (
    INTENT_GUILDS | INTENT_GUILD_MESSAGES | INTENT_DIRECT_MESSAGES | INTENT_MESSAGE_CONTENT
)
#: The dispatches handed to ``on_dispatch`` by default.
DEFAULT_EVENTS = frozenset({"MESSAGE_CREATE", "INTERACTION_CREATE"})

#: Seconds to wait for HELLO after connecting.
HELLO_TIMEOUT = 20.0
#: Largest frame accepted (a bigger one closes the connection; it reconnects).
MAX_FRAME_BYTES = 1 << 22
#: Close codes after which the session cannot be resumed (the next connection identifies).
SESSION_ENDING_CLOSES = frozenset({4007, 4009})
_AUTH_FAILED = 4004
_INTENT_CLOSES = {
    4013: "Discord refused the intents as invalid",
    4014: (
        "Discord refused a privileged intent: switch on the Message Content intent for the "
        "bot in the developer portal (Bot > Privileged Gateway Intents)"
    ),
}
_FATAL_CLOSES = {
    4010: "Discord refused the shard",
    4011: "Discord requires sharding for this bot",
    4012: "Discord refused the gateway version",
}
_MAX_FRAMES_BEFORE_HELLO = 8
_ZOMBIE_CLOSE = 4000  # a close that keeps the session resumable

OP_DISPATCH, OP_HEARTBEAT, OP_IDENTIFY, OP_RESUME = 0, 1, 2, 6
OP_RECONNECT, OP_INVALID_SESSION, OP_HELLO, OP_HEARTBEAT_ACK = 7, 9, 10, 11

_WS_LOGGER = silent_logger("channelkit.platforms.discord.gateway.websockets")

DispatchHandler = Callable[[str, Mapping[str, Any]], None]


def _with_query(url: str) -> str:
    if "?" in url:
        return url
    return f"{url.rstrip('/')}/?{_QUERY}"


class DiscordGateway(WebSocketConnection):
    """The Gateway connection of one bot; see the module docstring.

    ``token`` is the bot token (without ``Bot ``); ``on_dispatch(name, data)`` receives
    the ``events`` dispatches; ``scheduler`` holds the heartbeat timers (its clock is the
    connection's clock). ``jitter()`` returns a fraction in [0, 1): of the first heartbeat
    interval to wait, and of the 1-5 s spread before a re-identify (default: a generator of
    its own, not the `random` module's). ``wait`` and ``backoff`` are `LongConnection`'s
    (tests inject a ``wait`` that returns at once); ``wait`` also spends the 1-5 s before
    a re-identify.
    """

    def __init__(
        self,
        token: str,
        on_dispatch: DispatchHandler,
        *,
        scheduler: Scheduler,
        url: str = DEFAULT_GATEWAY_URL,
        intents: int = DEFAULT_INTENTS,
        events: Collection[str] = DEFAULT_EVENTS,
        name: str = "discord-gateway",
        jitter: Callable[[], float] = retry.jitter,
        backoff: Backoff | None = None,
        wait: Callable[[threading.Event, float], bool] | None = None,
        open_timeout: float = 10.0,
        hello_timeout: float = HELLO_TIMEOUT,
    ) -> None:
        if not isinstance(token, str) or not token.strip():
            raise ConfigurationError("a bot token is required", "token")
        if not isinstance(intents, int) or intents < 0:
            raise ConfigurationError("must be a non-negative integer bit set", "intents")
        if not url.startswith(("ws://", "wss://")):
            raise ConfigurationError("must be a ws:// or wss:// URL", "url")
        super().__init__(
            name, clock=scheduler.clock, backoff=backoff, wait=wait, open_timeout=open_timeout
        )
        self._token = token.strip()
        self._on_dispatch = on_dispatch
        self._scheduler = scheduler
        self._url = _with_query(url)
        self.intents = intents
        self._events = frozenset(events)
        self._jitter = jitter
        self._hello_timeout = hello_timeout
        self._session_lock = threading.Lock()
        # the session (kept across connections while it can be resumed)
        self._session_id: str | None = None
        self._resume_url: str | None = None
        self._seq: int | None = None
        # the current connection's heartbeat
        self._heartbeat: TimerHandle | None = None
        self._interval = 0.0
        self._awaiting_ack = False
        self._generation = 0
        #: frames by outcome (``hellos``, ``identifies``, ``resumes``, ``dispatched``,
        #: ``replays``, ``heartbeats``, ``acks``, ``zombies``, ``reconnects``,
        #: ``invalid_sessions``, ``garbage``, ``ignored``, ``handler_errors``)
        self.counts: dict[str, int] = {}

    # -- state, for the channel and for tests ---------------------------------------------
    @property
    def session_id(self) -> str | None:
        """The session to resume, or None (the next connection identifies)."""
        with self._session_lock:
            return self._session_id

    @property
    def seq(self) -> int | None:
        """The sequence number of the last dispatch handled."""
        with self._session_lock:
            return self._seq

    # -- one connection -------------------------------------------------------------------
    def serve_once(self) -> None:
        """Connect (resuming when a session is live), read until the connection ends."""
        with self._session_lock:
            resuming = self._session_id is not None and self._resume_url is not None
            url = _with_query(self._resume_url or "") if resuming else self._url
        socket = self._connect(
            url,
            "the Discord gateway",
            max_size=MAX_FRAME_BYTES,
            compression=None,
            user_agent_header="channelkit",
            logger=_WS_LOGGER,
        )
        self._serve(socket, self._read, "the Discord gateway connection")

    def _read(self, socket: Any) -> None:
        from websockets.exceptions import ConnectionClosed

        generation = self._begin()
        try:
            self._hello(socket, generation)
            self._read_until_disconnect(socket, self.handle_frame)
        except ConnectionClosed as exc:
            self._closed(exc.rcvd.code if exc.rcvd is not None else None)
            raise
        except TimeoutError:
            raise TransportError("the Discord gateway sent no HELLO in time") from None
        finally:
            self._end(generation)

    def _begin(self) -> int:
        with self._session_lock:
            self._generation += 1
            self._awaiting_ack = False
            return self._generation

    def _end(self, generation: int) -> None:
        with self._session_lock:
            if self._generation == generation:
                self._generation += 1  # a late heartbeat of this connection does nothing
            timer, self._heartbeat = self._heartbeat, None
        if timer is not None:
            timer.cancel()

    def _hello(self, socket: Any, generation: int) -> None:
        """Read HELLO, identify or resume, start the heartbeat."""
        for _ in range(_MAX_FRAMES_BEFORE_HELLO):
            frame = self._parse(socket.recv(timeout=self._hello_timeout))
            if frame is not None and frame["op"] == OP_HELLO:
                break
        else:
            raise TransportError("the Discord gateway sent no HELLO first")
        data = frame.get("d")
        interval_ms = data.get("heartbeat_interval") if isinstance(data, Mapping) else None
        if not isinstance(interval_ms, int | float) or isinstance(interval_ms, bool):
            raise TransportError("the Discord gateway's HELLO has no heartbeat_interval")
        if interval_ms <= 0:
            raise TransportError("the Discord gateway's HELLO has no heartbeat_interval")
        self._count("hellos")
        with self._session_lock:
            self._interval = float(interval_ms) / 1000.0
            session_id, seq = self._session_id, self._seq
        if session_id is not None:
            self._count("resumes")
            payload = {"token": self._token, "session_id": session_id, "seq": seq}
            socket.send(_frame(OP_RESUME, payload))
        else:
            self._count("identifies")
            socket.send(_frame(OP_IDENTIFY, self._identify_payload()))
        first = self._interval * min(max(self._jitter(), 0.0), 1.0)
        self._schedule_heartbeat(socket, generation, first)

    def _identify_payload(self) -> dict[str, Any]:
        return {
            "token": self._token,
            "intents": self.intents,
            "properties": {
                "os": platform.system().lower() or "unknown",
                "browser": "channelkit",
                "device": "channelkit",
            },
        }

    # -- heartbeat (on the scheduler) -----------------------------------------------------
    def _schedule_heartbeat(self, socket: Any, generation: int, delay: float) -> None:
        with self._session_lock:
            if generation != self._generation or self.stopping:
                return
            self._heartbeat = self._scheduler.call_later(delay, self._beat, socket, generation)

    def _beat(self, socket: Any, generation: int) -> None:
        """One heartbeat; a missing ACK for the last one closes the (zombie) socket."""
        with self._session_lock:
            if generation != self._generation:
                return
            zombie = self._awaiting_ack
            self._awaiting_ack = True
            seq, interval = self._seq, self._interval
        if zombie:
            self._count("zombies")
            logger.warning("[%s] no heartbeat ACK from Discord: reconnecting", self.name)
            _close_quietly(socket, _ZOMBIE_CLOSE)
            return
        # the next beat is timed before this one is sent: the interval counts from here
        self._schedule_heartbeat(socket, generation, interval)
        if _send_quietly(socket, _frame(OP_HEARTBEAT, seq)):
            self._count("heartbeats")

    # -- frames ---------------------------------------------------------------------------
    def _parse(self, raw: str | bytes) -> dict[str, Any] | None:
        try:
            frame = loads_json(raw)
        except ValueError:
            frame = None
        op = frame.get("op") if isinstance(frame, dict) else None
        if not isinstance(frame, dict) or not isinstance(op, int) or isinstance(op, bool):
            self._count("garbage")
            logger.warning("[%s] skipped a gateway frame that is not a Discord payload", self.name)
            return None
        return frame

    def handle_frame(self, raw: str | bytes, send: Callable[[str], None]) -> str | None:
        """Handle one frame read from the socket; ``"disconnect"`` when the connection must
        be closed and opened again at once, else None. ``send`` writes a frame back."""
        frame = self._parse(raw)
        if frame is None:
            return None
        op = frame["op"]
        if op == OP_DISPATCH:
            self._dispatch(frame)
            return None
        if op == OP_HEARTBEAT_ACK:
            self._count("acks")
            with self._session_lock:
                self._awaiting_ack = False
            return None
        if op == OP_HEARTBEAT:  # Discord asks for one now
            send(_frame(OP_HEARTBEAT, self.seq))
            self._count("heartbeats")
            return None
        if op == OP_RECONNECT:
            self._count("reconnects")
            logger.info("[%s] Discord asked for a reconnect", self.name)
            return "disconnect"
        if op == OP_INVALID_SESSION:
            self._count("invalid_sessions")
            if frame.get("d") is not True:
                self._forget_session()
                logger.info("[%s] Discord invalidated the session: identifying anew", self.name)
                # Discord asks for a random 1-5 s before the next identify
                if self._wait(self._stop, 1.0 + 4.0 * self._jitter()):
                    return "disconnect"
            else:
                logger.info("[%s] Discord invalidated the connection: resuming", self.name)
            return "disconnect"
        self._count("ignored")
        return None

    def _dispatch(self, frame: Mapping[str, Any]) -> None:
        seq = frame.get("s")
        name = frame.get("t")
        data = frame.get("d")
        with self._session_lock:
            if isinstance(seq, int) and not isinstance(seq, bool):
                if self._seq is not None and seq <= self._seq:
                    replay = True
                else:
                    replay = False
                    self._seq = seq
            else:
                replay = False
            if not replay and name == "READY" and isinstance(data, Mapping):
                session_id = data.get("session_id")
                resume_url = data.get("resume_gateway_url")
                if isinstance(session_id, str) and session_id:
                    self._session_id = session_id
                if isinstance(resume_url, str) and resume_url.startswith(("ws://", "wss://")):
                    self._resume_url = resume_url
        if replay:
            self._count("replays")
            return
        if not isinstance(name, str) or name not in self._events or not isinstance(data, Mapping):
            self._count("ignored")
            return
        self._count("dispatched")
        try:
            self._on_dispatch(name, data)
        except Exception:
            self._count("handler_errors")
            logger.exception("[%s] the %s handler failed", self.name, name)

    # -- closes ---------------------------------------------------------------------------
    def _forget_session(self) -> None:
        with self._session_lock:
            self._session_id = None
            self._resume_url = None
            self._seq = None

    def _closed(self, code: int | None) -> None:
        """Decide what the next connection does after Discord closed with ``code``."""
        if self.stopping or code is None:
            return
        if code == _AUTH_FAILED:
            self._forget_session()
            raise AuthError("Discord refused the bot token (close 4004)", status=401)
        if code in _INTENT_CLOSES or code in _FATAL_CLOSES:
            self._forget_session()
            reason = _INTENT_CLOSES.get(code) or _FATAL_CLOSES[code]
            raise TransportError(f"{reason} (close {code})")
        if code in SESSION_ENDING_CLOSES:
            self._forget_session()


def _frame(op: int, data: Any) -> str:
    return json.dumps({"op": op, "d": data}, separators=(",", ":"))


def _send_quietly(socket: Any, frame: str) -> bool:
    """Send on a socket another thread reads; False when it is closed already."""
    try:
        socket.send(frame)
        return True
    except Exception:  # the read loop sees the close and reconnects
        logger.debug("heartbeat on a closed gateway socket", exc_info=True)
        return False


def _close_quietly(socket: Any, code: int) -> None:
    try:
        socket.close(code)
    except Exception:
        logger.debug("closing the gateway socket failed", exc_info=True)
