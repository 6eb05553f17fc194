"""The Discord emulator's Gateway: a WebSocket server playing Discord's side of the session.

`DiscordGatewayServer` starts on 127.0.0.1 on first use (`WsGateway`'s server, a daemon
thread) and speaks the Gateway protocol a bot expects (JSON frames ``{"op", "d", "s",
"t"}``):

* every connection is greeted with HELLO (op 10, ``d.heartbeat_interval`` in ms);
* IDENTIFY (op 2) with the bot token starts a new session: READY (op 0) with
  ``session_id`` and ``resume_gateway_url`` (``ws://127.0.0.1:<port>/resume``); a wrong
  token is closed with 4004 (authentication failed);
* HEARTBEAT (op 1) is answered with HEARTBEAT ACK (op 11), unless `withhold_acks()`
  asked for silence (the bot then sees a zombie connection and reconnects);
* RESUME (op 6) with the live session's id and the last ``seq`` the bot handled sends
  again every dispatch after that ``seq`` (in order, with their sequence numbers), then
  RESUMED; an unknown session is INVALID SESSION (op 9, ``d: false``).

`DiscordGatewayServer.dispatch()` sends an event (``MESSAGE_CREATE``,
``INTERACTION_CREATE``...) with the session's next sequence number. Numbering and
sending share one lock, so sequence numbers leave in order; a dispatch made while the
bot has no identified connection (a dropped socket) is kept in the session's bounded
replay buffer (`MAX_REPLAY`) and sent when the bot resumes. Nothing is sent before the
first IDENTIFY (there is no session to receive it): `dispatch()` waits for one (bounded,
as a person's message sent while the bot starts) and then returns None.

Faults for tests: `reconnect()` (op 7), `invalidate_session()` (op 9), `withhold_acks()`,
and the base's `drop()` (a socket killed without a close frame), `send_raw()` (garbage)
and `refuse_handshakes()`.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from channelkit.playground.ws_gateway import WsGateway

__all__ = ["DEFAULT_HEARTBEAT_MS", "MAX_REPLAY", "DiscordGatewayServer"]

logger = logging.getLogger(__name__)

#: The heartbeat interval HELLO announces (Discord's usual 41.25 s).
DEFAULT_HEARTBEAT_MS = 41_250
#: How long a dispatch waits for the bot's session while the bot connects (seconds).
FIRST_SESSION_WAIT_S = 10.0
#: Dispatches a session keeps for a resume (oldest dropped).
MAX_REPLAY = 1_000
#: Sessions remembered (oldest dropped).
MAX_SESSIONS = 16

OP_DISPATCH, OP_HEARTBEAT, OP_IDENTIFY, OP_RESUME = 0, 1, 2, 6
OP_RECONNECT, OP_INVALID_SESSION, OP_HELLO, OP_HEARTBEAT_ACK = 7, 9, 10, 11
_CLOSE_UNKNOWN_OP, _CLOSE_DECODE, _CLOSE_AUTH = 4001, 4002, 4004

_WS_LOGGER = logging.getLogger("channelkit.playground.discord_gateway.websockets")
_WS_LOGGER.addHandler(logging.NullHandler())
_WS_LOGGER.propagate = False


@dataclass
class _Session:
    session_id: str
    seq: int = 0
    sent: deque[tuple[int, str]] = field(default_factory=lambda: deque(maxlen=MAX_REPLAY))


class DiscordGatewayServer(WsGateway[dict[str, Any]]):
    """One bot's emulated Gateway; see the module docstring.

    ``token``: the bot token IDENTIFY and RESUME must carry (without ``Bot ``).
    ``ready_user``: the ``user`` object READY carries. ``counts``: ``connections``,
    ``identifies``, ``resumes``, ``replayed``, ``dispatched``, ``heartbeats``,
    ``acks_sent``, ``acks_withheld``, ``reconnects``, ``invalid_sessions``, ``garbage``,
    ``auth_failures``, ``drops``, ``refused``.
    """

    _log = logger
    _ws_logger = _WS_LOGGER
    _label = "discord gateway"
    _thread_name = "channelkit-emulator-discord-gateway"
    _busy_text = "try again later\n"

    def __init__(
        self,
        token: str,
        *,
        ready_user: Mapping[str, Any],
        application_id: str,
        heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_MS,
    ) -> None:
        super().__init__(ack_timeout=0.0)
        self.token = token
        self.ready_user = dict(ready_user)
        self.application_id = application_id
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self._order = threading.Lock()  # numbering + sending dispatches, in order
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._current: _Session | None = None  # the session new dispatches belong to
        self._identified: Any = None  # the connection that identified or resumed
        self._withhold = 0
        #: the request path of every accepted handshake (oldest first, bounded)
        self.paths: deque[str] = deque(maxlen=100)

    # -- URLs -----------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """The gateway URL a bot connects to (the server starts on first use)."""
        self.listen()
        return f"ws://127.0.0.1:{self.port}"

    @property
    def session_id(self) -> str | None:
        """The live session's id (None before the first IDENTIFY)."""
        with self._cond:
            return self._current.session_id if self._current is not None else None

    @property
    def identified(self) -> bool:
        """The bot holds a connection that identified or resumed."""
        with self._cond:
            return self._identified is not None

    def wait_identified(self, timeout: float = 10.0, *, sessions: int = 1) -> bool:
        """Wait (bounded) until the bot holds an identified connection and at least
        ``sessions`` IDENTIFY + RESUME frames were answered."""
        return self.wait_for(
            lambda: self._identified is not None
            and self.counts.get("identifies", 0) + self.counts.get("resumes", 0) >= sessions,
            timeout,
        )

    # -- delivering -----------------------------------------------------------------------
    def dispatch(self, event: str, data: Mapping[str, Any]) -> int | None:
        """Send the ``event`` dispatch with the session's next sequence number; that
        number, or None when no session exists yet (the bot never identified). A
        dispatch made while the bot is disconnected waits for its resume; one made while
        the bot has no session yet (it is still connecting, or re-identifies after an
        invalid session) waits for that session, at most `FIRST_SESSION_WAIT_S`."""
        with self._cond:  # not under ``_order``: IDENTIFY takes ``_order`` first
            self._cond.wait_for(lambda: self._current is not None, FIRST_SESSION_WAIT_S)
        with self._order:
            with self._cond:
                session = self._current
                live = self._identified
                if session is None:
                    return None
                session.seq += 1
                seq = session.seq
                frame = json.dumps(
                    {"op": OP_DISPATCH, "s": seq, "t": event, "d": dict(data)},
                    ensure_ascii=False,
                )
                session.sent.append((seq, frame))
                self._count("dispatched")
            if live is not None:
                self._send(live, frame)
        return seq

    # -- faults ---------------------------------------------------------------------------
    def reconnect(self) -> bool:
        """Send RECONNECT (op 7); False if not connected."""
        with self._cond:
            self._count("reconnects")
        return self.send_raw(json.dumps({"op": OP_RECONNECT, "d": None}))

    def invalidate_session(self, resumable: bool = False) -> bool:
        """Send INVALID SESSION (op 9, ``d: resumable``); a session that is not resumable
        is forgotten (the bot must identify anew). False if not connected."""
        with self._cond:
            self._count("invalid_sessions")
            if not resumable and self._current is not None:
                self._sessions.pop(self._current.session_id, None)
                self._current = None
                self._identified = None
        return self.send_raw(json.dumps({"op": OP_INVALID_SESSION, "d": resumable}))

    def withhold_acks(self, count: int) -> None:
        """Answer none of the next ``count`` heartbeats."""
        with self._cond:
            self._withhold = count

    # -- the protocol ---------------------------------------------------------------------
    def _admit(self, connection: Any, query: dict[str, list[str]]) -> Any:  # lock held
        request = getattr(connection, "request", None)
        self.paths.append(str(getattr(request, "path", "")))
        return None

    def _handle(self, connection: Any) -> None:
        with self._cond:
            previous, self._live = self._live, connection
            if self._identified is previous:
                self._identified = None
            self._count("connections")
        if previous is not None:
            previous.close()
        hello = {"op": OP_HELLO, "d": {"heartbeat_interval": self.heartbeat_interval_ms}}
        self._send(connection, json.dumps(hello))
        try:
            for raw in connection:
                self._on_frame(connection, raw)
        except Exception as exc:
            logger.debug("discord gateway: connection ended: %s", type(exc).__name__)
        finally:
            with self._cond:
                if self._live is connection:
                    self._live = None
                if self._identified is connection:
                    self._identified = None
                self._cond.notify_all()

    def _on_frame(self, connection: Any, raw: str | bytes) -> None:
        try:
            frame = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            frame = None
        op = frame.get("op") if isinstance(frame, dict) else None
        if not isinstance(op, int) or isinstance(op, bool):
            with self._cond:
                self._count("garbage")
            connection.close(_CLOSE_DECODE, "Decode error")
            return
        data = frame.get("d")
        if op == OP_HEARTBEAT:
            with self._cond:
                self._count("heartbeats")
                withhold = self._withhold > 0
                if withhold:
                    self._withhold -= 1
                    self._count("acks_withheld")
                else:
                    self._count("acks_sent")
            if not withhold:
                self._send(connection, json.dumps({"op": OP_HEARTBEAT_ACK}))
        elif op == OP_IDENTIFY:
            self._identify(connection, data)
        elif op == OP_RESUME:
            self._resume(connection, data)
        else:
            connection.close(_CLOSE_UNKNOWN_OP, "Unknown opcode")

    def _token_ok(self, connection: Any, data: Any) -> bool:
        token = data.get("token") if isinstance(data, Mapping) else None
        if isinstance(token, str) and secrets.compare_digest(token, self.token):
            return True
        with self._cond:
            self._count("auth_failures")
        connection.close(_CLOSE_AUTH, "Authentication failed")
        return False

    def _identify(self, connection: Any, data: Any) -> None:
        if not self._token_ok(connection, data):
            return
        session = _Session(secrets.token_hex(16))
        ready = {
            "v": 10,
            "user": self.ready_user,
            "guilds": [],
            "session_id": session.session_id,
            "resume_gateway_url": f"ws://127.0.0.1:{self.port}/resume",
            "application": {"id": self.application_id, "flags": 0},
        }
        with self._order:
            with self._cond:
                self._sessions[session.session_id] = session
                while len(self._sessions) > MAX_SESSIONS:
                    self._sessions.popitem(last=False)
                self._current = session
                self._identified = connection
                self._count("identifies")
            session.seq += 1
            frame = json.dumps({"op": OP_DISPATCH, "s": session.seq, "t": "READY", "d": ready})
            session.sent.append((session.seq, frame))
            self._send(connection, frame)

    def _resume(self, connection: Any, data: Any) -> None:
        if not self._token_ok(connection, data):
            return
        fields = data if isinstance(data, Mapping) else {}
        session_id, seq = fields.get("session_id"), fields.get("seq")
        with self._order:
            with self._cond:
                session = self._sessions.get(str(session_id))
                if session is not self._current or session is None:
                    session = None
                    self._count("invalid_sessions")
            if session is None:
                self._send(connection, json.dumps({"op": OP_INVALID_SESSION, "d": False}))
                return
            after = seq if isinstance(seq, int) and not isinstance(seq, bool) else 0
            missed = [frame for number, frame in session.sent if number > after]
            with self._cond:
                self._identified = connection
                self._count("resumes")
                for _ in missed:
                    self._count("replayed")
            for frame in missed:
                self._send(connection, frame)
            session.seq += 1
            resumed = json.dumps({"op": OP_DISPATCH, "s": session.seq, "t": "RESUMED", "d": {}})
            session.sent.append((session.seq, resumed))
            self._send(connection, resumed)
