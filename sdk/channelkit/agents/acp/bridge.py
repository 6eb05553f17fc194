"""The ACP bridge: `AcpBridge`, turns, sessions and the agent's requests.

The bridge keeps every piece of cross-thread state (the running process, the session
map, running turns, pending permissions) under one condition and composes the other
modules of `channelkit.agents.acp`: `process` starts and
stops the child, `rpc` speaks JSON-RPC over its stdio, and
`permissions` maps permission requests and answers.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import subprocess
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from channelkit.agents.acp import process as _process
from channelkit.agents.acp.content import (
    ContentLimits,
    PromptCapabilities,
    agent_file,
    prompt_blocks,
)
from channelkit.agents.acp.permissions import (
    CANCELLED,
    MAX_PENDING_PERMISSIONS,
    Permission,
    PermissionTable,
    Scheduler,
    parse_params,
    validate_response,
)
from channelkit.agents.acp.process import AgentProcess, Call, read_line
from channelkit.agents.acp.rpc import INVALID_PARAMS, METHOD_NOT_FOUND, RpcPeer
from channelkit.agents.base import (
    AgentEventSink,
    FileEvent,
    PermissionResolved,
    PermissionResponse,
    SessionDied,
    ToolCallEvent,
)
from channelkit.attachments.fetch import DEFAULT_PER_FILE
from channelkit.attachments.model import ReceivedFile
from channelkit.errors import (
    AcpError,
    AcpRequestError,
    AcpTimeoutError,
    AgentProcessError,
    AttachmentError,
    AttachmentTooLarge,
    ConfigurationError,
)
from channelkit.version import __version__

__all__ = ["ACP_PROTOCOL_VERSION", "AcpBridge"]

logger = logging.getLogger(__name__)

#: The ACP protocol version this bridge speaks.
ACP_PROTOCOL_VERSION = 1

_STDERR_TAIL_LINES = 50
_MAX_TOOL_CALLS_PER_TURN = 1000


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


class AcpBridge:
    """Runs an ACP agent process and adapts it to the ``AgentBridge`` protocol.

    ``command`` is the agent's argv (``["qwen", "--acp"]``). ``cwd`` is the working
    directory of both the process and its sessions (default: the current directory).
    ``env`` entries are added to the inherited environment. ``request_timeout`` bounds
    every request except ``session/prompt`` (bounded by ``prompt_timeout``);
    ``permission_timeout`` is how long a permission request may stay unanswered before
    the bridge answers it ``cancelled``; ``close_timeout`` is the grace given to the
    process at each step of `close()`. ``max_sessions`` bounds the session map
    (least recently used sessions are forgotten first). ``scheduler`` (optional) owns the
    permission expiry timers; see the module docstring. ``content_limits`` bounds what
    `prompt_with_attachments` inlines (default `ContentLimits()`: 5 MiB per image or
    audio file, 10 MiB per prompt, 64 KiB per embedded text file). The agent's own
    ``image`` blocks and ``file://`` resource links in its messages are sent to the chat
    as images and files (``files_root``, default ``cwd``, confines the links;
    ``max_file_size``, default 20 MiB, bounds both).
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
        scheduler: Scheduler | None = None,
        content_limits: ContentLimits | None = None,
        files_root: str | os.PathLike[str] | None = None,
        max_file_size: int = DEFAULT_PER_FILE,
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
        self.client_info = dict(client_info or {"name": "channelkit", "version": __version__})
        self._scheduler = scheduler
        if content_limits is not None and not isinstance(content_limits, ContentLimits):
            raise ConfigurationError("must be a ContentLimits", "content_limits")
        #: bounds on the files a prompt carries inline (`prompt_with_attachments`)
        self.content_limits = content_limits or ContentLimits()
        if isinstance(max_file_size, bool) or not isinstance(max_file_size, int):
            raise ConfigurationError(f"must be an int (got {max_file_size!r})", "max_file_size")
        if max_file_size <= 0:
            raise ConfigurationError(f"must be > 0 (got {max_file_size!r})", "max_file_size")
        #: the directory the agent's ``file://`` resource links must lie in (default: cwd)
        self.files_root = os.path.abspath(os.fspath(files_root)) if files_root else self.cwd
        #: the largest image or file the agent may send to the chat, in bytes
        self.max_file_size = max_file_size

        # One condition guards all mutable state below and wakes every waiter.
        self._cond = threading.Condition(threading.RLock())
        self._rpc = RpcPeer(self._cond, self.command[0])
        self._start_lock = threading.Lock()
        self._session_lock = threading.Lock()
        self._permission_ids = itertools.count(1)
        self._generations = itertools.count(1)
        self._proc: AgentProcess | None = None
        self._closed = False
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._by_acp_session: dict[str, str] = {}
        # channelkit session id -> the ACP session id of a process that died: restored
        # with session/load when the next process advertises loadSession (bounded)
        self._lost: OrderedDict[str, str] = OrderedDict()
        self._active: dict[str, _Turn] = {}  # channelkit session id -> running turn
        self._turns: dict[str, _Turn] = {}  # acp session id -> running turn (routing)
        self._permissions = PermissionTable(self._cond)
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

    def start(self, *, timeout: float | None = None) -> None:
        """Start the agent process and run ``initialize`` now (``prompt`` does it lazily).

        ``timeout`` bounds the wait for each start-up answer (``initialize``, then
        ``authenticate`` when configured) instead of ``request_timeout``. Raises
        `AgentProcessError` when the program cannot be started or exits,
        `AcpTimeoutError` when it does not answer in time, `AcpRequestError` when it
        refuses; the process is stopped again in each case.
        """
        if timeout is not None and not timeout > 0:
            raise ConfigurationError(f"must be > 0 (got {timeout!r})", "timeout")
        self._ensure_process(timeout)

    def prompt(self, session_id: str, text: str, sink: AgentEventSink) -> str:
        """Run one turn; block until the agent's ``stopReason`` and return the streamed text.

        Raises `AgentProcessError` if the process dies or the bridge closes,
        `AcpRequestError` if the agent rejects the prompt, and
        `AcpTimeoutError` after ``prompt_timeout`` (the turn is cancelled first).
        """
        if not isinstance(text, str):
            raise ConfigurationError("must be a string", "text")
        return self._run_turn(session_id, sink, lambda proc: [{"type": "text", "text": text}])

    def prompt_with_attachments(
        self,
        session_id: str,
        text: str,
        attachments: Sequence[ReceivedFile],
        sink: AgentEventSink,
    ) -> str:
        """Like `prompt()`, with the person's downloaded files as prompt content blocks.

        The channel calls it when a message carried attachments. Each file becomes the
        block the agent's ``promptCapabilities`` allow (an ``image`` or ``audio`` block,
        an embedded ``resource`` for a small text file, else a ``resource_link`` to the
        local file) or, when it takes none, a text line naming the file's local path;
        what is inlined is bounded by ``content_limits``. See
        `channelkit.agents.acp.content`.
        """
        if not isinstance(text, str):
            raise ConfigurationError("must be a string", "text")
        files = tuple(attachments)
        for index, received in enumerate(files):
            if not isinstance(received, ReceivedFile):
                raise ConfigurationError("must be a ReceivedFile", f"attachments[{index}]")
        limits = self.content_limits

        def blocks(proc: AgentProcess) -> list[dict[str, Any]]:
            capabilities = PromptCapabilities.from_initialize(proc.agent_info)
            return prompt_blocks(text, files, capabilities, limits)

        return self._run_turn(session_id, sink, blocks)

    def prompt_capabilities(self) -> PromptCapabilities:
        """What the running agent advertised for ``session/prompt`` (all false before
        it started; `start()` starts it)."""
        return PromptCapabilities.from_initialize(self.agent_info)

    def _run_turn(
        self,
        session_id: str,
        sink: AgentEventSink,
        build: Callable[[AgentProcess], list[dict[str, Any]]],
    ) -> str:
        """One turn whose prompt `build` makes once the process (and its advertised
        capabilities) is known; the prompt is not kept while the turn runs."""
        if not isinstance(session_id, str) or not session_id:
            raise ConfigurationError("must be a non-empty string", "session_id")
        turn = _Turn(session_id, sink)
        with self._cond:
            if session_id in self._active:
                raise AcpError(f"session {session_id!r} already has a turn running")
            self._active[session_id] = turn
        try:
            proc = self._ensure_process()
            prompt = build(proc)
            session, notice = self._ensure_session(proc, session_id, sink)
            with self._cond:
                cancelled_early = turn.cancel_requested
                if cancelled_early:
                    logger.debug("acp turn for session %s cancelled before it started", session_id)
                    return ""
                turn.acp_session_id = session.acp_session_id
                turn.sent = True
                self._turns[session.acp_session_id] = turn
                session.sink = sink
            if notice:
                turn.chunks.append(notice)
                _emit(sink.text_chunk, session_id, notice)
            params = {"sessionId": session.acp_session_id, "prompt": prompt}
            call = self._rpc.request(proc, "session/prompt", params)
            del params, prompt  # inlined files are not held for the whole turn
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
            pending = self._permissions.pending(session_id)
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
        result = validate_response(response)
        with self._cond:
            permission = self._permissions.pop(request_id)
            proc = self._proc
            if permission is None:
                return False
        permission.cancel_timer()
        if proc is None or proc.dead:
            return False
        try:
            self._rpc.send(proc, {"jsonrpc": "2.0", "id": permission.rpc_id, "result": result})
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
            pending = self._permissions.pending()
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
    def _ensure_process(self, timeout: float | None = None) -> AgentProcess:
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
                self._initialize(proc, self.request_timeout if timeout is None else timeout)
            except BaseException:
                self._stop_process(proc)
                self._on_process_gone(proc, "agent failed to initialize", emit_died=False)
                raise
            return proc

    def _spawn(self) -> AgentProcess:
        popen = _process.spawn(self.command, self.cwd, self.env)
        proc = AgentProcess(popen, next(self._generations))
        _process.reader_threads(proc, self._read_stdout, self._read_stderr)
        with self._cond:
            closed = self._closed
            if not closed:
                self._proc = proc
        if closed:  # close() ran while we were spawning: do not leave an orphan
            _process.kill_orphan(popen, self.close_timeout)
            raise AgentProcessError("agent bridge is closed")
        assert proc.reader is not None and proc.stderr_reader is not None
        proc.reader.start()
        proc.stderr_reader.start()
        logger.debug("started acp agent %s (pid %s)", self.command[0], popen.pid)
        return proc

    def _initialize(self, proc: AgentProcess, timeout: float) -> None:
        params = {
            "protocolVersion": ACP_PROTOCOL_VERSION,
            "clientCapabilities": {
                "fs": {"readTextFile": False, "writeTextFile": False},
                "terminal": False,
            },
            "clientInfo": self.client_info,
        }
        call = self._rpc.request(proc, "initialize", params)
        result = self._wait(proc, call, timeout)
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
            call = self._rpc.request(proc, "authenticate", {"methodId": self.auth_method})
            self._wait(proc, call, timeout)

    def _ensure_session(
        self, proc: AgentProcess, session_id: str, sink: AgentEventSink
    ) -> tuple[_Session, str]:
        """The live session for ``session_id`` and a notice for the person ("" when
        none): a conversation whose agent process died is restored with session/load
        when the new process supports it, else a new one starts and the notice says so."""
        with self._cond:
            session = self._sessions.get(session_id)
            if session is not None:
                self._sessions.move_to_end(session_id)
                return session, ""
        with self._session_lock:
            with self._cond:
                session = self._sessions.get(session_id)
                if session is not None:
                    return session, ""
                lost = self._lost.pop(session_id, None)
                caps = proc.agent_info.get("agentCapabilities")
                can_load = isinstance(caps, Mapping) and caps.get("loadSession") is True
            acp_id: object = None
            notice = ""
            if lost is not None and can_load:
                try:
                    call = self._rpc.request(
                        proc,
                        "session/load",
                        {"sessionId": lost, "cwd": self.cwd, "mcpServers": []},
                    )
                    self._wait(proc, call, self.request_timeout)
                    acp_id = lost
                    logger.info("acp session for %s restored with session/load", session_id)
                except (AcpRequestError, AcpTimeoutError) as exc:
                    logger.warning("acp session/load for %s failed: %s", session_id, exc)
            if lost is not None and acp_id is None:
                notice = CONTEXT_LOST_NOTICE
            if acp_id is None:
                call = self._rpc.request(proc, "session/new", {"cwd": self.cwd, "mcpServers": []})
                result = self._wait(proc, call, self.request_timeout)
                acp_id = result.get("sessionId") if isinstance(result, Mapping) else None
            if not isinstance(acp_id, str) or not acp_id:
                raise AcpError("session/new: the agent's result has no sessionId")
            session = _Session(session_id, acp_id, sink)
            with self._cond:
                if proc.dead:
                    raise AgentProcessError(proc.death_message(), returncode=proc.returncode())
                self._sessions[session_id] = session
                self._by_acp_session[acp_id] = session_id
                self._evict_sessions()
            return session, notice

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

    def _stop_process(self, proc: AgentProcess) -> None:
        """Close stdin, wait, SIGTERM, wait, SIGKILL, wait; then reap and join threads."""
        _process.stop(proc, self._rpc.write_lock, self.close_timeout)

    # ------------------------------------------------------------------ requests
    def _wait(self, proc: AgentProcess, call: Call, timeout: float) -> Any:
        """Block until ``call`` settles or ``timeout`` passes.

        The waiting thread also answers overdue permission requests that no scheduler
        times out ``cancelled`` (it wakes at the earliest such deadline).
        """
        return self._rpc.wait(
            proc,
            call,
            timeout,
            take_overdue=self._permissions.take_overdue,
            answer_overdue=self._answer_overdue,
        )

    def _answer_overdue(self, expired: list[Permission]) -> None:
        for permission in expired:
            self._answer_cancelled(permission, reason="timeout")

    def _send_cancel(self, proc: AgentProcess, acp_session_id: str) -> bool:
        return self._rpc.notify(proc, "session/cancel", {"sessionId": acp_session_id})

    # ------------------------------------------------------------------ reading
    def _read_stdout(self, proc: AgentProcess) -> None:
        stdout = proc.popen.stdout
        assert stdout is not None
        try:
            while True:
                line = read_line(stdout)
                if line is None:
                    break
                if not line.strip():
                    continue
                try:
                    self._rpc.dispatch(proc, line, self._handle_request, self._handle_notification)
                except Exception:
                    logger.exception("acp bridge failed to handle a message from the agent")
        except Exception:
            logger.exception("acp reader thread failed")
        finally:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(timeout=self.close_timeout)
            with self._cond:
                closing = self._closed
            reason = "agent bridge closed" if closing else proc.death_message()
            self._on_process_gone(proc, reason, emit_died=not closing)

    def _read_stderr(self, proc: AgentProcess) -> None:
        stderr = proc.popen.stderr
        assert stderr is not None
        _process.drain_stderr(stderr, self._record_stderr)

    def _record_stderr(self, text: str) -> None:
        with self._cond:
            self._stderr_tail.append(text)

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
            elif isinstance(content, Mapping) and content.get("type") in FILE_CONTENT:
                self._send_agent_file(turn, content)
        elif kind in ("tool_call", "tool_call_update"):
            event = _tool_call_event(turn, update)
            if event is not None:
                _emit(turn.sink.tool_call, event)

    def _send_agent_file(self, turn: _Turn, content: Mapping[str, Any]) -> None:
        """Hand the agent's image block or local file link to the channel (ordered after
        the turn's text so far); one it cannot send is named in the turn's text."""
        try:
            found = agent_file(content, self.files_root, self.max_file_size)
        except AttachmentError as exc:
            logger.warning("acp agent file not sent: %s", exc)
            self._say_not_sent(turn, exc.name, _reason(exc))
            return
        if found is None:
            return
        source, image = found
        deliver = getattr(turn.sink, "file", None)
        if not callable(deliver):
            self._say_not_sent(turn, source.name, "this channel does not send files")
            return
        reply: Future[str] = Future()
        reply.add_done_callback(lambda done: _log_file_reply(source.name, done))
        _emit(deliver, FileEvent(turn.session_id, source, reply, image=image))

    def _say_not_sent(self, turn: _Turn, name: str, reason: str) -> None:
        from channelkit.core.text import MSG_ATTACHMENT_NOT_SENT

        line = f"\n{MSG_ATTACHMENT_NOT_SENT.format(name=name, reason=reason)}\n"
        turn.chunks.append(line)
        _emit(turn.sink.text_chunk, turn.session_id, line)

    def _handle_request(self, proc: AgentProcess, rpc_id: Any, method: str, params: Any) -> None:
        if method == "session/request_permission":
            self._handle_permission(proc, rpc_id, params)
            return
        logger.debug("acp agent called unsupported client method %s", method)
        self._rpc.reply_error(proc, rpc_id, METHOD_NOT_FOUND, f"Method not found: {method}")

    def _handle_permission(self, proc: AgentProcess, rpc_id: Any, params: Any) -> None:
        parsed = parse_params(params)
        if isinstance(parsed, str):
            self._rpc.reply_error(proc, rpc_id, INVALID_PARAMS, parsed)
            return
        acp_session_id, tool_call, options = parsed
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
                or len(self._permissions) >= MAX_PENDING_PERMISSIONS
            )
            permission: Permission | None = None
            if not refuse:
                assert session_id is not None and sink is not None
                permission = Permission(
                    request_id,
                    rpc_id,
                    session_id,
                    acp_session_id,
                    sink,
                    deadline=time.monotonic() + self.permission_timeout,
                )
                self._permissions.add(permission)
        if permission is None:
            logger.warning("acp permission request for an unknown session; answered cancelled")
            self._rpc.reply_result(proc, rpc_id, {"outcome": dict(CANCELLED)})
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
        _emit(permission.sink.response_boundary, permission.session_id)
        _emit(permission.sink.permission_request, permission.to_request(tool_call, options))

    def _expire(self, request_id: str) -> None:
        permission = self._permissions.pop(request_id)
        if permission is not None:
            self._answer_cancelled(permission, reason="timeout")

    def _settle_cancelled(self, permission: Permission, *, reason: str) -> None:
        if self._permissions.pop(permission.request_id) is None:
            return
        self._answer_cancelled(permission, reason=reason)

    def _answer_cancelled(self, permission: Permission, *, reason: str) -> None:
        """Answer an already-removed permission ``cancelled`` and tell its sink."""
        permission.cancel_timer()
        logger.debug("acp permission %s cancelled (%s)", permission.request_id, reason)
        with self._cond:
            proc = self._proc
        if proc is not None and not proc.dead:
            self._rpc.reply_result(proc, permission.rpc_id, {"outcome": dict(CANCELLED)})
        _emit(
            permission.sink.permission_resolved,
            PermissionResolved(permission.request_id, dict(CANCELLED)),
        )

    # ------------------------------------------------------------------ death
    def _on_process_gone(self, proc: AgentProcess, reason: str, *, emit_died: bool) -> None:
        """Fail the process's calls, cancel its permissions, forget its sessions."""
        with self._cond:
            if proc.dead:
                return
            proc.dead = True
            calls = list(proc.calls.values())
            proc.calls.clear()
            error = AgentProcessError(reason, returncode=proc.returncode())
            for call in calls:
                call.error = error
                call.done = True
            current = self._proc is proc
            permissions: list[Permission] = []
            sessions: list[_Session] = []
            if current:
                permissions = self._permissions.take_all()
                sessions = list(self._sessions.values())
                self._sessions.clear()
                self._by_acp_session.clear()
                for lost in sessions:
                    self._lost[lost.session_id] = lost.acp_session_id
                while len(self._lost) > self.max_sessions:
                    self._lost.popitem(last=False)
            self._cond.notify_all()
        if emit_died:
            logger.warning("acp agent %s exited (code %s)", self.command[0], proc.returncode())
        for permission in permissions:
            permission.cancel_timer()
            _emit(
                permission.sink.permission_resolved,
                PermissionResolved(permission.request_id, dict(CANCELLED)),
            )
        if emit_died:
            for session in sessions:
                if session.sink is not None:
                    _emit(session.sink.session_died, SessionDied(session.session_id, reason))


#: Told to the person when the agent restarted and could not restore the conversation.
CONTEXT_LOST_NOTICE = (
    "(The agent restarted and could not restore this conversation; continuing in a new one.)" "\n\n"
)


#: The ``agent_message_chunk`` content types that carry a file for the chat.
FILE_CONTENT = ("image", "resource_link")


# ---------------------------------------------------------------------- helpers
def _reason(error: AttachmentError) -> str:
    if isinstance(error, AttachmentTooLarge):
        from channelkit.core.inbound_files import human_size

        return f"it is larger than the limit of {human_size(error.limit)}"
    reason = getattr(error, "reason", None)
    return reason if isinstance(reason, str) and reason else type(error).__name__


def _log_file_reply(name: str, reply: Future[str]) -> None:
    error = reply.exception()
    if error is not None:
        logger.warning("acp agent file %r was not delivered: %s", name, error)
    else:
        logger.debug("acp agent file %r delivered as message %s", name, reply.result())


def _emit(fn: Callable[..., None], *args: Any) -> None:
    try:
        fn(*args)
    except Exception:
        logger.exception("acp bridge event sink raised in %s", getattr(fn, "__name__", fn))


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
