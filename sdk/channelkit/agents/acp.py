"""A bridge to agents that speak the Agent Client Protocol (ACP) over stdio.

:class:`AcpBridge` spawns an ACP agent (for example ``qwen --acp`` or
``gemini --experimental-acp``) and talks JSON-RPC 2.0 to it, one JSON object per line, on
the child's stdin/stdout. It implements :class:`~channelkit.agents.base.AgentBridge`:

* ``prompt(session_id, text, sink)`` lazily starts the process (``initialize``), lazily
  creates one ACP session per channelkit session id (``session/new``), sends
  ``session/prompt`` and blocks until the agent answers with a ``stopReason``. It returns
  the concatenation of the ``agent_message_chunk`` texts streamed during the turn.
* ``session/update`` notifications become sink events: ``agent_message_chunk`` text ->
  ``text_chunk``; ``tool_call`` / ``tool_call_update`` -> ``tool_call``; every other kind
  is ignored.
* ``session/request_permission`` (a request from the agent) becomes ``response_boundary``
  followed by ``permission_request``; the bridge generates the ``request_id`` and keeps
  the ACP ``toolCall`` verbatim (``_meta`` included). ``respond_to_permission`` sends
  the response (``outcome`` and, when present, ``answers``) as the JSON-RPC result. A
  permission nobody answers within ``permission_timeout`` is answered ``cancelled``.
* Requests the bridge does not implement (``fs/*``, ``terminal/*``, anything unknown) get
  a JSON-RPC error reply (``-32601``), never silence.
* When the process dies, a waiting ``prompt`` raises :class:`AgentProcessError`, pending
  permissions settle ``cancelled`` (``permission_resolved``), and ``session_died`` is
  emitted for every session the process held. The next ``prompt`` starts a new process.

Threads: one reader thread per process (stdout: responses, notifications, agent
requests; it calls the sink, so sinks must return quickly), one stderr drain thread, and
the callers' threads (``prompt`` blocks on a condition with a timeout). Writes to stdin
go through one lock. The bridge owns no timer thread: permission expiry runs on an
injected scheduler (anything with ``call_later(delay, fn) -> handle.cancel()``, such as
``channelkit.runtime.Scheduler``), or, without one, is checked by the threads waiting in
``prompt``.

The ``agent-client-protocol`` package was evaluated and not used: it is asyncio-based
(and requires pydantic), which does not fit channelkit's synchronous threading model.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import signal
import subprocess
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

from channelkit.agents.base import (
    AgentEventSink,
    PermissionOption,
    PermissionRequest,
    PermissionResolved,
    PermissionResponse,
    SessionDied,
    ToolCallEvent,
)
from channelkit.errors import (
    AcpError,
    AcpRequestError,
    AcpTimeoutError,
    AgentProcessError,
    ConfigurationError,
)

__all__ = [
    "ACP_PROTOCOL_VERSION",
    "AcpBridge",
    "AcpError",
    "AcpRequestError",
    "AcpTimeoutError",
    "AgentProcessError",
]

logger = logging.getLogger(__name__)

#: The ACP protocol version this bridge speaks.
ACP_PROTOCOL_VERSION = 1

#: JSON-RPC error codes used in replies to the agent.
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602

_CANCELLED: Mapping[str, Any] = {"outcome": "cancelled"}
_MAX_LINE_BYTES = 16 * 1024 * 1024
_STDERR_TAIL_LINES = 50
_STDERR_LINE_CHARS = 500
_MAX_PENDING_PERMISSIONS = 1000
_MAX_TOOL_CALLS_PER_TURN = 1000


class _TimerHandle(Protocol):
    def cancel(self) -> Any: ...


class _Scheduler(Protocol):
    def call_later(self, delay: float, fn: Callable[[], None], /) -> _TimerHandle: ...


@dataclass
class _Call:
    """One request the bridge sent; settled by the reader thread."""

    method: str
    done: bool = False
    result: Any = None
    error: BaseException | None = None


@dataclass
class _Session:
    session_id: str
    acp_session_id: str
    sink: AgentEventSink | None = None


@dataclass
class _Turn:
    session_id: str
    sink: AgentEventSink
    acp_session_id: str = ""
    sent: bool = False  # session/prompt is (being) written
    written: bool = False  # session/prompt has been written: later cancels follow it
    cancel_requested: bool = False
    cancel_raced_prompt: bool = False  # a cancel went out while the prompt was being written
    chunks: list[str] = field(default_factory=list)
    tool_calls: OrderedDict[str, dict[str, Any]] = field(default_factory=OrderedDict)


@dataclass
class _Permission:
    request_id: str
    rpc_id: Any
    session_id: str
    acp_session_id: str
    sink: AgentEventSink
    deadline: float
    timer: _TimerHandle | None = None
    scheduled: bool = False  # a scheduler owns the expiry timer


class _Process:
    """One spawned agent process with its threads and in-flight calls."""

    def __init__(self, popen: subprocess.Popen[bytes], generation: int) -> None:
        self.popen = popen
        self.generation = generation
        self.calls: dict[int, _Call] = {}
        self.dead = False
        self.reader: threading.Thread | None = None
        self.stderr_reader: threading.Thread | None = None
        self.agent_info: Mapping[str, Any] = {}


class AcpBridge:
    """Runs an ACP agent process and adapts it to the ``AgentBridge`` protocol.

    ``command`` is the agent's argv (``["qwen", "--acp"]``). ``cwd`` is the working
    directory of both the process and its sessions (default: the current directory).
    ``env`` entries are added to the inherited environment. ``request_timeout`` bounds
    every request except ``session/prompt`` (bounded by ``prompt_timeout``);
    ``permission_timeout`` is how long a permission request may stay unanswered before
    the bridge answers it ``cancelled``; ``close_timeout`` is the grace given to the
    process at each step of :meth:`close`. ``max_sessions`` bounds the session map
    (least recently used sessions are forgotten first). ``scheduler`` (optional) owns the
    permission expiry timers; see the module docstring.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        request_timeout: float = 60.0,
        prompt_timeout: float = 1800.0,
        permission_timeout: float = 300.0,
        close_timeout: float = 5.0,
        max_sessions: int = 1000,
        auth_method: str | None = None,
        client_info: Mapping[str, Any] | None = None,
        scheduler: _Scheduler | None = None,
    ) -> None:
        if isinstance(command, str) or not command:
            raise ConfigurationError("must be a non-empty sequence of strings", "command")
        if not all(isinstance(part, str) for part in command):
            raise ConfigurationError("every item must be a string", "command")
        for name, value in (
            ("request_timeout", request_timeout),
            ("prompt_timeout", prompt_timeout),
            ("permission_timeout", permission_timeout),
            ("close_timeout", close_timeout),
        ):
            if not value > 0:
                raise ConfigurationError(f"must be > 0 (got {value!r})", name)
        if max_sessions < 1:
            raise ConfigurationError(f"must be >= 1 (got {max_sessions!r})", "max_sessions")
        self.command: tuple[str, ...] = tuple(command)
        self.cwd = os.path.abspath(os.fspath(cwd) if cwd is not None else os.getcwd())
        self.env = dict(env) if env is not None else None
        self.request_timeout = float(request_timeout)
        self.prompt_timeout = float(prompt_timeout)
        self.permission_timeout = float(permission_timeout)
        self.close_timeout = float(close_timeout)
        self.max_sessions = int(max_sessions)
        self.auth_method = auth_method
        self.client_info = dict(client_info or {"name": "channelkit", "version": _version()})
        self._scheduler = scheduler

        # One condition guards all mutable state below and wakes every waiter.
        self._cond = threading.Condition(threading.RLock())
        self._write_lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._session_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._permission_ids = itertools.count(1)
        self._generations = itertools.count(1)
        self._proc: _Process | None = None
        self._closed = False
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._by_acp_session: dict[str, str] = {}
        self._active: dict[str, _Turn] = {}  # channelkit session id -> running turn
        self._turns: dict[str, _Turn] = {}  # acp session id -> running turn (routing)
        self._permissions: dict[str, _Permission] = {}
        self._stderr_tail: deque[str] = deque(maxlen=_STDERR_TAIL_LINES)

    # ------------------------------------------------------------------ public API
    @property
    def agent_info(self) -> Mapping[str, Any]:
        """The ``initialize`` result of the running process ({} before it started)."""
        with self._cond:
            return dict(self._proc.agent_info) if self._proc else {}

    @property
    def pid(self) -> int | None:
        """The running agent process id, or None."""
        with self._cond:
            proc = self._proc
            return proc.popen.pid if proc and not proc.dead else None

    def stderr_tail(self) -> list[str]:
        """The last lines the agent wrote to stderr (for diagnostics; may hold anything)."""
        with self._cond:
            return list(self._stderr_tail)

    def start(self) -> None:
        """Start the agent process and run ``initialize`` now (``prompt`` does it lazily)."""
        self._ensure_process()

    def prompt(self, session_id: str, text: str, sink: AgentEventSink) -> str:
        """Run one turn; block until the agent's ``stopReason`` and return the streamed text.

        Raises :class:`AgentProcessError` if the process dies or the bridge closes,
        :class:`AcpRequestError` if the agent rejects the prompt, and
        :class:`AcpTimeoutError` after ``prompt_timeout`` (the turn is cancelled first).
        """
        if not isinstance(session_id, str) or not session_id:
            raise ConfigurationError("must be a non-empty string", "session_id")
        if not isinstance(text, str):
            raise ConfigurationError("must be a string", "text")
        turn = _Turn(session_id, sink)
        with self._cond:
            if session_id in self._active:
                raise AcpError(f"session {session_id!r} already has a turn running")
            self._active[session_id] = turn
        try:
            proc = self._ensure_process()
            session = self._ensure_session(proc, session_id, sink)
            with self._cond:
                cancelled_early = turn.cancel_requested
                if cancelled_early:
                    logger.debug("acp turn for session %s cancelled before it started", session_id)
                    return ""
                turn.acp_session_id = session.acp_session_id
                turn.sent = True
                self._turns[session.acp_session_id] = turn
                session.sink = sink
            params = {
                "sessionId": session.acp_session_id,
                "prompt": [{"type": "text", "text": text}],
            }
            call, _ = self._send_request(proc, "session/prompt", params)
            with self._cond:
                turn.written = True
                late_cancel = turn.cancel_raced_prompt
            if late_cancel:
                # cancel_session ran while the prompt was being written; its notification
                # may have gone out first, so say it again after the prompt. (A cancel
                # after this point is written after the prompt: no repeat needed.)
                self._send_cancel(proc, session.acp_session_id)
            try:
                result = self._wait(proc, call, self.prompt_timeout)
            except AcpTimeoutError:
                logger.warning(
                    "acp prompt for session %s timed out after %g s; cancelling",
                    session_id,
                    self.prompt_timeout,
                )
                self._send_cancel(proc, session.acp_session_id)
                raise
        finally:
            with self._cond:
                if self._active.get(session_id) is turn:
                    del self._active[session_id]
                if turn.acp_session_id and self._turns.get(turn.acp_session_id) is turn:
                    del self._turns[turn.acp_session_id]
        stop_reason = result.get("stopReason") if isinstance(result, Mapping) else None
        logger.debug("acp turn for session %s ended: %s", session_id, stop_reason)
        return "".join(turn.chunks)

    def cancel_session(self, session_id: str) -> bool:
        """Send ``session/cancel`` for the session's turn; True if the notification went out.

        Pending permission requests of the session are answered ``cancelled`` first (as
        ACP requires) and reported with ``permission_resolved``.
        """
        with self._cond:
            proc = self._proc
            turn = self._active.get(session_id)
            if turn is not None:
                turn.cancel_requested = True
                if not turn.sent:
                    return True  # prompt() sees the flag and never sends the turn
                if not turn.written:
                    turn.cancel_raced_prompt = True  # may overtake the prompt on the wire
            session = self._sessions.get(session_id)
            if proc is None or proc.dead or session is None:
                return False
            pending = [p for p in self._permissions.values() if p.session_id == session_id]
        for permission in pending:
            self._settle_cancelled(permission, reason="cancel")
        return self._send_cancel(proc, session.acp_session_id)

    def respond_to_permission(self, request_id: str, response: PermissionResponse) -> bool:
        """Answer a pending permission request; False when it is no longer pending.

        ``response`` is ``{"outcome": {"outcome": "selected", "optionId": ...}}`` or
        ``{"outcome": {"outcome": "cancelled"}}``, optionally with ``"answers"`` (question
        answers keyed by question index, e.g. ``{"0": "Blue"}``); it is sent as the
        JSON-RPC result, ``answers`` included.
        """
        result = _validate_response(response)
        with self._cond:
            permission = self._permissions.pop(request_id, None)
            proc = self._proc
            if permission is None:
                return False
            self._cond.notify_all()
        _cancel_timer(permission)
        if proc is None or proc.dead:
            return False
        try:
            self._send(proc, {"jsonrpc": "2.0", "id": permission.rpc_id, "result": result})
        except AgentProcessError:
            return False
        return True

    def close(self) -> None:
        """Stop the agent: cancel turns, answer pending permissions ``cancelled``, close
        stdin, terminate then kill after ``close_timeout``, reap the process and join the
        reader threads. Idempotent; a waiting ``prompt`` raises ``AgentProcessError``."""
        with self._cond:
            if self._closed:
                proc = None
            else:
                self._closed = True
                proc = self._proc
            pending = list(self._permissions.values())
            active = list(self._turns.values())
        for permission in pending:
            self._settle_cancelled(permission, reason="close")
        if proc is None:
            return
        if not proc.dead:
            for turn in active:
                self._send_cancel(proc, turn.acp_session_id)
        self._stop_process(proc)
        self._on_process_gone(proc, "agent bridge closed", emit_died=False)

    def __enter__(self) -> AcpBridge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ process
    def _ensure_process(self) -> _Process:
        with self._start_lock:
            with self._cond:
                if self._closed:
                    raise AgentProcessError("agent bridge is closed")
                proc = self._proc
                if proc is not None and not proc.dead:
                    return proc
            if proc is not None:
                self._stop_process(proc)  # already exited, or closed its stdout
            proc = self._spawn()
            try:
                self._initialize(proc)
            except BaseException:
                self._stop_process(proc)
                self._on_process_gone(proc, "agent failed to initialize", emit_died=False)
                raise
            return proc

    def _spawn(self) -> _Process:
        env = None
        if self.env is not None:
            env = dict(os.environ)
            env.update(self.env)
        kwargs: dict[str, Any] = {}
        if os.name == "posix":
            kwargs["start_new_session"] = True
        try:
            popen = subprocess.Popen(
                list(self.command),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.cwd,
                env=env,
                **kwargs,
            )
        except OSError as exc:
            raise AgentProcessError(
                f"cannot start agent {self.command[0]!r}: {exc.strerror or exc}"
            ) from exc
        proc = _Process(popen, next(self._generations))
        proc.reader = threading.Thread(
            target=self._read_stdout,
            args=(proc,),
            name=f"channelkit-acp-reader-{popen.pid}",
            daemon=True,
        )
        proc.stderr_reader = threading.Thread(
            target=self._read_stderr,
            args=(proc,),
            name=f"channelkit-acp-stderr-{popen.pid}",
            daemon=True,
        )
        with self._cond:
            closed = self._closed
            if not closed:
                self._proc = proc
        if closed:  # close() ran while we were spawning: do not leave an orphan
            self._signal(popen, getattr(signal, "SIGKILL", signal.SIGTERM))
            popen.wait(timeout=self.close_timeout)
            for stream in (popen.stdin, popen.stdout, popen.stderr):
                with contextlib.suppress(OSError, ValueError):
                    if stream is not None:
                        stream.close()
            raise AgentProcessError("agent bridge is closed")
        proc.reader.start()
        proc.stderr_reader.start()
        logger.debug("started acp agent %s (pid %s)", self.command[0], popen.pid)
        return proc

    def _initialize(self, proc: _Process) -> None:
        params = {
            "protocolVersion": ACP_PROTOCOL_VERSION,
            "clientCapabilities": {
                "fs": {"readTextFile": False, "writeTextFile": False},
                "terminal": False,
            },
            "clientInfo": self.client_info,
        }
        call, _ = self._send_request(proc, "initialize", params)
        result = self._wait(proc, call, self.request_timeout)
        if not isinstance(result, Mapping):
            raise AcpError("initialize: the agent's result is not an object")
        version = result.get("protocolVersion")
        if version != ACP_PROTOCOL_VERSION:
            logger.warning(
                "acp agent %s speaks protocol version %r (bridge: %d)",
                self.command[0],
                version,
                ACP_PROTOCOL_VERSION,
            )
        with self._cond:
            proc.agent_info = dict(result)
        if self.auth_method:
            call, _ = self._send_request(proc, "authenticate", {"methodId": self.auth_method})
            self._wait(proc, call, self.request_timeout)

    def _ensure_session(self, proc: _Process, session_id: str, sink: AgentEventSink) -> _Session:
        with self._cond:
            session = self._sessions.get(session_id)
            if session is not None:
                self._sessions.move_to_end(session_id)
                return session
        with self._session_lock:
            with self._cond:
                session = self._sessions.get(session_id)
                if session is not None:
                    return session
            call, _ = self._send_request(proc, "session/new", {"cwd": self.cwd, "mcpServers": []})
            result = self._wait(proc, call, self.request_timeout)
            acp_id = result.get("sessionId") if isinstance(result, Mapping) else None
            if not isinstance(acp_id, str) or not acp_id:
                raise AcpError("session/new: the agent's result has no sessionId")
            session = _Session(session_id, acp_id, sink)
            with self._cond:
                if proc.dead:
                    raise AgentProcessError(_death_message(proc), returncode=_rc(proc))
                self._sessions[session_id] = session
                self._by_acp_session[acp_id] = session_id
                self._evict_sessions()
            return session

    def _evict_sessions(self) -> None:
        # Caller holds self._cond.
        while len(self._sessions) > self.max_sessions:
            victim = next(
                (s for s in self._sessions.values() if s.acp_session_id not in self._turns),
                None,
            )
            if victim is None:
                return
            del self._sessions[victim.session_id]
            self._by_acp_session.pop(victim.acp_session_id, None)

    def _stop_process(self, proc: _Process) -> None:
        """Close stdin, wait, SIGTERM, wait, SIGKILL, wait; then reap and join threads."""
        popen = proc.popen
        # A writer blocked on a full pipe (agent not reading) holds the write lock: do not
        # wait for it forever, kill the agent instead, which fails that write.
        locked = self._write_lock.acquire(timeout=self.close_timeout)
        if locked:
            try:
                with contextlib.suppress(OSError, ValueError):
                    if popen.stdin is not None:
                        popen.stdin.close()
            finally:
                self._write_lock.release()
        else:
            self._signal(popen, getattr(signal, "SIGKILL", signal.SIGTERM))
        try:
            popen.wait(timeout=self.close_timeout)
        except subprocess.TimeoutExpired:
            self._signal(popen, signal.SIGTERM)
            try:
                popen.wait(timeout=self.close_timeout)
            except subprocess.TimeoutExpired:
                self._signal(popen, getattr(signal, "SIGKILL", signal.SIGTERM))
                with contextlib.suppress(subprocess.TimeoutExpired):
                    popen.wait(timeout=self.close_timeout)
        self._reap(proc)

    @staticmethod
    def _signal(popen: subprocess.Popen[bytes], sig: int) -> None:
        if popen.poll() is not None:
            return
        try:
            if os.name == "posix":
                os.killpg(popen.pid, sig)
            elif sig == signal.SIGTERM:
                popen.terminate()
            else:
                popen.kill()
        except (ProcessLookupError, PermissionError, OSError):
            with contextlib.suppress(OSError):
                popen.kill() if sig != signal.SIGTERM else popen.terminate()

    def _reap(self, proc: _Process) -> None:
        """Wait for the process and join its threads (bounded)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.popen.wait(timeout=self.close_timeout)
        current = threading.current_thread()
        for thread in (proc.reader, proc.stderr_reader):
            if thread is not None and thread is not current:
                thread.join(timeout=self.close_timeout)
        for stream in (proc.popen.stdout, proc.popen.stderr):
            with contextlib.suppress(OSError, ValueError):
                if stream is not None:
                    stream.close()

    # ------------------------------------------------------------------ writing
    def _send(self, proc: _Process, message: Mapping[str, Any]) -> None:
        data = (json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        stdin = proc.popen.stdin
        with self._write_lock:
            if proc.dead or stdin is None or stdin.closed:
                raise AgentProcessError(_death_message(proc), returncode=_rc(proc))
            try:
                stdin.write(data)
                stdin.flush()
            except (OSError, ValueError) as exc:
                raise AgentProcessError(
                    f"cannot write to agent {self.command[0]!r}: {exc}", returncode=_rc(proc)
                ) from exc

    def _send_request(
        self, proc: _Process, method: str, params: Mapping[str, Any]
    ) -> tuple[_Call, int]:
        rpc_id = next(self._ids)
        call = _Call(method)
        with self._cond:
            if proc.dead:
                raise AgentProcessError(_death_message(proc), returncode=_rc(proc))
            proc.calls[rpc_id] = call
        try:
            self._send(proc, {"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params})
        except AgentProcessError:
            with self._cond:
                proc.calls.pop(rpc_id, None)
            raise
        return call, rpc_id

    def _wait(self, proc: _Process, call: _Call, timeout: float) -> Any:
        """Block until ``call`` settles or ``timeout`` passes.

        The waiting thread also answers overdue permission requests that no scheduler
        times out ``cancelled`` (it wakes at the earliest such deadline).
        """
        deadline = time.monotonic() + timeout
        while True:
            expired: list[_Permission] = []
            with self._cond:
                while not call.done:
                    now = time.monotonic()
                    if now >= deadline:
                        break
                    wake = deadline
                    swept = [p for p in self._permissions.values() if not p.scheduled]
                    if swept:
                        expired = [p for p in swept if p.deadline <= now]
                        if expired:
                            for permission in expired:
                                del self._permissions[permission.request_id]
                            break
                        wake = min(wake, min(p.deadline for p in swept))
                    self._cond.wait(wake - now)
            if not expired:
                break
            for permission in expired:
                self._answer_cancelled(permission, reason="timeout")
        if not call.done:
            with self._cond:
                for rpc_id, pending in list(proc.calls.items()):
                    if pending is call:
                        del proc.calls[rpc_id]
            raise AcpTimeoutError(call.method, timeout)
        if call.error is not None:
            raise call.error
        return call.result

    def _send_cancel(self, proc: _Process, acp_session_id: str) -> bool:
        try:
            self._send(proc, _notification("session/cancel", {"sessionId": acp_session_id}))
        except AgentProcessError:
            return False
        return True

    # ------------------------------------------------------------------ reading
    def _read_stdout(self, proc: _Process) -> None:
        stdout = proc.popen.stdout
        assert stdout is not None
        try:
            while True:
                line = _read_line(stdout)
                if line is None:
                    break
                if not line.strip():
                    continue
                try:
                    self._handle_line(proc, line)
                except Exception:
                    logger.exception("acp bridge failed to handle a message from the agent")
        except Exception:
            logger.exception("acp reader thread failed")
        finally:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(timeout=self.close_timeout)
            with self._cond:
                closing = self._closed
            reason = "agent bridge closed" if closing else _death_message(proc)
            self._on_process_gone(proc, reason, emit_died=not closing)

    def _read_stderr(self, proc: _Process) -> None:
        stderr = proc.popen.stderr
        assert stderr is not None
        try:
            while True:
                line = _read_line(stderr)
                if line is None:
                    break
                text = line.decode("utf-8", "replace").rstrip()[:_STDERR_LINE_CHARS]
                if not text:
                    continue
                with self._cond:
                    self._stderr_tail.append(text)
                logger.debug("acp agent stderr: %s", text)
        except Exception:
            logger.debug("acp stderr reader stopped", exc_info=True)

    def _handle_line(self, proc: _Process, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            logger.warning("acp agent wrote a line that is not JSON (%d bytes); skipped", len(line))
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            logger.warning("acp agent wrote a message that is not JSON-RPC 2.0; skipped")
            return
        method = message.get("method")
        if method is not None:
            if not isinstance(method, str):
                logger.warning("acp agent message has a non-string method; skipped")
                if "id" in message:
                    self._reply_error(proc, message["id"], INVALID_PARAMS, "invalid method")
                return
            params = message.get("params")
            if "id" in message and message["id"] is not None:
                self._handle_request(proc, message["id"], method, params)
            else:
                self._handle_notification(method, params)
            return
        if "id" in message and ("result" in message or "error" in message):
            self._handle_response(proc, message)
            return
        logger.warning("acp agent wrote a JSON-RPC message of unknown shape; skipped")

    def _handle_response(self, proc: _Process, message: Mapping[str, Any]) -> None:
        rpc_id = message.get("id")
        with self._cond:
            call = proc.calls.pop(rpc_id, None) if isinstance(rpc_id, int) else None
            if call is None:
                logger.warning("acp agent answered an unknown request id %r; skipped", rpc_id)
                return
            error = message.get("error")
            if error is not None:
                if isinstance(error, Mapping):
                    call.error = AcpRequestError(
                        call.method,
                        error.get("code"),
                        str(error.get("message", "")),
                        error.get("data"),
                    )
                else:
                    call.error = AcpRequestError(call.method, None, str(error))
            else:
                call.result = message.get("result")
            call.done = True
            self._cond.notify_all()

    def _handle_notification(self, method: str, params: Any) -> None:
        if method != "session/update":
            logger.debug("acp notification %s ignored", method)
            return
        if not isinstance(params, Mapping):
            logger.warning("acp session/update without params object; skipped")
            return
        acp_session_id = params.get("sessionId")
        update = params.get("update")
        if not isinstance(update, Mapping) or not isinstance(acp_session_id, str):
            logger.warning("acp session/update without sessionId/update; skipped")
            return
        with self._cond:
            turn = self._turns.get(acp_session_id)
        if turn is None:
            logger.debug("acp session/update outside a turn ignored")
            return
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            content = update.get("content")
            if isinstance(content, Mapping) and content.get("type") == "text":
                text = content.get("text")
                if isinstance(text, str) and text:
                    turn.chunks.append(text)
                    _emit(turn.sink.text_chunk, turn.session_id, text)
        elif kind in ("tool_call", "tool_call_update"):
            event = _tool_call_event(turn, update)
            if event is not None:
                _emit(turn.sink.tool_call, event)

    def _handle_request(self, proc: _Process, rpc_id: Any, method: str, params: Any) -> None:
        if method == "session/request_permission":
            self._handle_permission(proc, rpc_id, params)
            return
        logger.debug("acp agent called unsupported client method %s", method)
        self._reply_error(proc, rpc_id, METHOD_NOT_FOUND, f"Method not found: {method}")

    def _handle_permission(self, proc: _Process, rpc_id: Any, params: Any) -> None:
        if not isinstance(params, Mapping):
            self._reply_error(proc, rpc_id, INVALID_PARAMS, "params must be an object")
            return
        acp_session_id = params.get("sessionId")
        tool_call = params.get("toolCall")
        if not isinstance(acp_session_id, str) or not isinstance(tool_call, Mapping):
            self._reply_error(proc, rpc_id, INVALID_PARAMS, "sessionId and toolCall required")
            return
        options = _parse_options(params.get("options"))
        request_id = f"acp-{proc.generation}-{next(self._permission_ids)}"
        with self._cond:
            session_id = self._by_acp_session.get(acp_session_id)
            turn = self._turns.get(acp_session_id)
            sink = turn.sink if turn else None
            if sink is None and session_id is not None:
                session = self._sessions.get(session_id)
                sink = session.sink if session else None
            refuse = (
                session_id is None
                or sink is None
                or self._closed
                or len(self._permissions) >= _MAX_PENDING_PERMISSIONS
            )
            permission: _Permission | None = None
            if not refuse:
                assert session_id is not None and sink is not None
                permission = _Permission(
                    request_id,
                    rpc_id,
                    session_id,
                    acp_session_id,
                    sink,
                    deadline=time.monotonic() + self.permission_timeout,
                )
                self._permissions[request_id] = permission
                self._cond.notify_all()
        if permission is None:
            logger.warning("acp permission request for an unknown session; answered cancelled")
            self._reply_result(proc, rpc_id, {"outcome": dict(_CANCELLED)})
            return
        if self._scheduler is not None:
            try:
                permission.timer = self._scheduler.call_later(
                    self.permission_timeout, lambda: self._expire(request_id)
                )
                permission.scheduled = True
            except Exception:
                # e.g. a stopped scheduler: the threads waiting in prompt() expire it.
                logger.warning("acp permission timer could not be scheduled", exc_info=True)
        request = PermissionRequest(
            request_id=request_id,
            session_id=permission.session_id,
            tool_call=tool_call,
            options=options,
        )
        _emit(permission.sink.response_boundary, permission.session_id)
        _emit(permission.sink.permission_request, request)

    def _expire(self, request_id: str) -> None:
        with self._cond:
            permission = self._permissions.pop(request_id, None)
            if permission is not None:
                self._cond.notify_all()
        if permission is not None:
            self._answer_cancelled(permission, reason="timeout")

    def _settle_cancelled(self, permission: _Permission, *, reason: str) -> None:
        with self._cond:
            if self._permissions.pop(permission.request_id, None) is None:
                return
            self._cond.notify_all()
        self._answer_cancelled(permission, reason=reason)

    def _answer_cancelled(self, permission: _Permission, *, reason: str) -> None:
        """Answer an already-removed permission ``cancelled`` and tell its sink."""
        _cancel_timer(permission)
        logger.debug("acp permission %s cancelled (%s)", permission.request_id, reason)
        with self._cond:
            proc = self._proc
        if proc is not None and not proc.dead:
            self._reply_result(proc, permission.rpc_id, {"outcome": dict(_CANCELLED)})
        _emit(
            permission.sink.permission_resolved,
            PermissionResolved(permission.request_id, dict(_CANCELLED)),
        )

    def _reply_result(self, proc: _Process, rpc_id: Any, result: Any) -> None:
        with contextlib.suppress(AgentProcessError):
            self._send(proc, {"jsonrpc": "2.0", "id": rpc_id, "result": result})

    def _reply_error(self, proc: _Process, rpc_id: Any, code: int, message: str) -> None:
        with contextlib.suppress(AgentProcessError):
            self._send(
                proc, {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": message}}
            )

    # ------------------------------------------------------------------ death
    def _on_process_gone(self, proc: _Process, reason: str, *, emit_died: bool) -> None:
        """Fail the process's calls, cancel its permissions, forget its sessions."""
        with self._cond:
            if proc.dead:
                return
            proc.dead = True
            calls = list(proc.calls.values())
            proc.calls.clear()
            error = AgentProcessError(reason, returncode=_rc(proc))
            for call in calls:
                call.error = error
                call.done = True
            current = self._proc is proc
            permissions: list[_Permission] = []
            sessions: list[_Session] = []
            if current:
                permissions = list(self._permissions.values())
                self._permissions.clear()
                sessions = list(self._sessions.values())
                self._sessions.clear()
                self._by_acp_session.clear()
            self._cond.notify_all()
        if emit_died:
            logger.warning("acp agent %s exited (code %s)", self.command[0], _rc(proc))
        for permission in permissions:
            _cancel_timer(permission)
            _emit(
                permission.sink.permission_resolved,
                PermissionResolved(permission.request_id, dict(_CANCELLED)),
            )
        if emit_died:
            for session in sessions:
                if session.sink is not None:
                    _emit(session.sink.session_died, SessionDied(session.session_id, reason))


# ---------------------------------------------------------------------- helpers
def _version() -> str:
    try:
        from channelkit import __version__

        return __version__
    except ImportError:  # pragma: no cover
        return "0"


def _notification(method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def _rc(proc: _Process) -> int | None:
    return proc.popen.poll()


def _death_message(proc: _Process) -> str:
    rc = proc.popen.poll()
    if rc is None:
        return "agent process closed its output"
    return f"agent process exited with code {rc}"


def _read_line(stream: IO[bytes]) -> bytes | None:
    """One line (without bound overflow), or None at EOF. Over-long lines are skipped."""
    line = stream.readline(_MAX_LINE_BYTES)
    if not line:
        return None
    if len(line) >= _MAX_LINE_BYTES and not line.endswith(b"\n"):
        logger.warning("acp agent wrote a line over %d bytes; skipped", _MAX_LINE_BYTES)
        while True:
            rest = stream.readline(_MAX_LINE_BYTES)
            if not rest or rest.endswith(b"\n"):
                break
        return b""
    return line


def _emit(fn: Callable[..., None], *args: Any) -> None:
    try:
        fn(*args)
    except Exception:
        logger.exception("acp bridge event sink raised in %s", getattr(fn, "__name__", fn))


def _cancel_timer(permission: _Permission) -> None:
    timer, permission.timer = permission.timer, None
    if timer is not None:
        with contextlib.suppress(Exception):
            timer.cancel()


def _parse_options(raw: Any) -> tuple[PermissionOption, ...]:
    options: list[PermissionOption] = []
    if isinstance(raw, list):
        for item in raw:
            if not isinstance(item, Mapping):
                continue
            option_id = item.get("optionId")
            if not isinstance(option_id, str):
                continue
            name = item.get("name")
            kind = item.get("kind")
            options.append(
                PermissionOption(
                    option_id=option_id,
                    name=name if isinstance(name, str) else option_id,
                    kind=kind if isinstance(kind, str) else None,
                )
            )
    return tuple(options)


def _tool_call_event(turn: _Turn, update: Mapping[str, Any]) -> ToolCallEvent | None:
    tool_call_id = update.get("toolCallId")
    if not isinstance(tool_call_id, str):
        return None
    known = turn.tool_calls.get(tool_call_id)
    if known is None:
        known = {}
        turn.tool_calls[tool_call_id] = known
        while len(turn.tool_calls) > _MAX_TOOL_CALLS_PER_TURN:
            turn.tool_calls.popitem(last=False)
    for key in ("kind", "title", "status"):
        value = update.get(key)
        if isinstance(value, str) and value:
            known[key] = value
    if "rawInput" in update:
        known["rawInput"] = update.get("rawInput")
    return ToolCallEvent(
        session_id=turn.session_id,
        tool_call_id=tool_call_id,
        kind=known.get("kind", ""),
        title=known.get("title", ""),
        status=known.get("status", ""),
        raw_input=known.get("rawInput"),
    )


def _validate_response(response: PermissionResponse) -> dict[str, Any]:
    if not isinstance(response, Mapping):
        raise ConfigurationError("must be a mapping", "response")
    outcome = response.get("outcome")
    if not isinstance(outcome, Mapping):
        raise ConfigurationError("must be a mapping", "response.outcome")
    kind = outcome.get("outcome")
    if kind == "selected":
        if not isinstance(outcome.get("optionId"), str) or not outcome.get("optionId"):
            raise ConfigurationError("must be a non-empty string", "response.outcome.optionId")
    elif kind != "cancelled":
        raise ConfigurationError(
            f"must be 'selected' or 'cancelled' (got {kind!r})", "response.outcome.outcome"
        )
    answers = response.get("answers")
    if answers is not None and not isinstance(answers, Mapping):
        raise ConfigurationError("must be a mapping of question key to answer", "response.answers")
    result = dict(response)
    result["outcome"] = dict(outcome)
    if answers is not None:
        result["answers"] = dict(answers)
    return result
