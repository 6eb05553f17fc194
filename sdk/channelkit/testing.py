"""Test helpers shipped with the package (adapter tests import them).

* `RecordingChannel` - a ChannelBase subclass recording every hook call in
  order (``records``), with typed views (``sent``, ``events``, ``chunks``,
  ``segment_ends``, ``boundaries``, ``completes``, ``tool_calls``,
  ``presentations``) and condition-variable waits (no sleeps).
* `ScriptedBridge` - an AgentBridge whose ``prompt`` plays a script of steps
  (`chunk()`, `boundary()`, `tool()`, `ask()`, `permission()`,
  `resolved()`, `died()`, `gate()`, `fail()`, `final()`).
* Request builders: `question_request()`, `permission_request()`.
* `make_channel()` - a RecordingChannel on a FakeClock with its own pool.
* `wait_until()` - bounded polling for state another thread or process reaches.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from channelkit.agents.base import (
    AgentBridge,
    AgentEventSink,
    PermissionOption,
    PermissionRequest,
    PermissionResolved,
    PermissionResponse,
    SessionDied,
    ToolCallEvent,
)
from channelkit.core import (
    ChannelBase,
    ChannelConfig,
    InboundMessage,
    LifecycleEvent,
    OutputSegmentContext,
    SegmentEndReason,
    UserInputPresentationResult,
    UserInputRequestContext,
)
from channelkit.runtime import FakeClock

__all__ = [
    "DEFAULT_QUESTIONS",
    "PERMISSION_OPTIONS",
    "QUESTION_OPTIONS",
    "RecordingChannel",
    "ScriptContext",
    "ScriptedBridge",
    "Step",
    "ask",
    "boundary",
    "chunk",
    "died",
    "fail",
    "final",
    "gate",
    "inbound",
    "make_channel",
    "permission",
    "permission_request",
    "question_request",
    "resolved",
    "tool",
    "wait_until",
]

WAIT = 5.0  # default real-time bound for test waits (seconds)

_T = TypeVar("_T")


def wait_until(
    predicate: Callable[[], _T],
    timeout: float = WAIT,
    interval: float = 0.01,
    *,
    what: str = "",
    tick: Callable[[], None] | None = None,
    state: Callable[[], object] | None = None,
) -> _T:
    """Poll ``predicate`` until it returns something truthy, and return that value.

    For state reached by other threads or processes that no event signals (a worker's
    side effect, a local HTTP server's view, a file a child process writes). Timers are
    never waited for: they run on a fake clock the test advances, here through ``tick``,
    which runs between polls. ``interval`` is the real-time pause between polls.

    Raises `AssertionError` naming ``what`` when ``timeout`` seconds pass first. With
    ``state``, the message ends with what ``state()`` returns at that moment (counters,
    the messages seen so far): what a failure needs to tell why the wait ran out, read
    when it did rather than when the wait began.
    """
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            shown = f"; {state()}" if state is not None else ""
            raise AssertionError(
                f"timed out after {timeout}s waiting for {what or predicate}{shown}"
            )
        if tick is not None:
            tick()
        pause.wait(interval)


QUESTION_OPTIONS = (
    PermissionOption("proceed_once", "Submit", "allow_once"),
    PermissionOption("cancel", "Cancel", "reject_once"),
)
PERMISSION_OPTIONS = (
    PermissionOption("proceed_always_project", "Always Allow in project", "allow_always"),
    PermissionOption("proceed_once", "Allow", "allow_once"),
    PermissionOption("cancel", "Reject", "reject_once"),
)
DEFAULT_QUESTIONS: list[dict[str, Any]] = [
    {
        "header": "Region",
        "question": "Which region?",
        "options": [
            {"label": "Beijing", "description": "cn-north"},
            {"label": "Shanghai", "description": "cn-east"},
        ],
    },
    {
        "header": "Signals",
        "question": "Which signals?",
        "options": [
            {"label": "Logs", "description": ""},
            {"label": "Metrics", "description": ""},
        ],
        "multiSelect": True,
    },
]


def question_request(
    request_id: str,
    session_id: str,
    questions: Sequence[Mapping[str, Any]] | None = None,
    *,
    canonical: bool = True,
    legacy: bool = False,
    options: Sequence[PermissionOption] = QUESTION_OPTIONS,
) -> PermissionRequest:
    """An ask_user_question permission request (canonical ``_meta`` by default;
    ``legacy=True`` adds ``kind="ask_user_question"`` with ``rawInput.questions``)."""
    qs = list(DEFAULT_QUESTIONS if questions is None else questions)
    tool_call: dict[str, Any] = {
        "toolCallId": f"tool-{request_id}",
        "kind": "ask_user_question" if legacy else "other",
        "title": f"Ask user {len(qs)} question{'' if len(qs) == 1 else 's'}",
        "rawInput": {"questions": qs},
    }
    if canonical:
        tool_call["_meta"] = {
            "toolName": "ask_user_question",
            "qwenInteractionKind": "user_question",
            "qwenQuestions": qs,
        }
    return PermissionRequest(request_id, session_id, tool_call, tuple(options))


def permission_request(
    request_id: str,
    session_id: str,
    *,
    title: str | None = None,
    tool_name: str = "run_shell_command",
    kind: str = "shell",
    raw_input: Mapping[str, Any] | None = None,
    options: Sequence[PermissionOption] = PERMISSION_OPTIONS,
) -> PermissionRequest:
    """An ordinary tool permission request."""
    tool_call = {
        "toolCallId": f"tool-{request_id}",
        "kind": kind,
        "title": title if title is not None else f"Run {request_id}",
        "rawInput": dict(raw_input if raw_input is not None else {"command": "echo secret-token"}),
        "_meta": {"toolName": tool_name},
    }
    return PermissionRequest(request_id, session_id, tool_call, tuple(options))


def inbound(
    text: str,
    *,
    chat_id: str = "chat1",
    sender_id: str = "owner-1",
    channel_name: str = "test",
    message_id: str | None = None,
    thread_id: str | None = None,
    is_group: bool = False,
) -> InboundMessage:
    """An InboundMessage with test defaults."""
    return InboundMessage(
        channel_name=channel_name,
        chat_id=chat_id,
        sender_id=sender_id,
        text=text,
        message_id=message_id,
        thread_id=thread_id,
        is_group=is_group,
    )


# ======================================================================================
# RecordingChannel
# ======================================================================================


class RecordingChannel(ChannelBase):
    """A ChannelBase that records hook calls; every default behaviour is kept.

    ``presenter`` (a callable ``context -> UserInputPresentationResult``) answers
    ``present_user_input_request``; without it the default (UNSUPPORTED) applies.
    ``send_error`` makes ``send_message`` raise it.
    """

    def __init__(
        self,
        config: ChannelConfig,
        bridge: AgentBridge,
        *,
        presenter: Callable[[UserInputRequestContext], UserInputPresentationResult] | None = None,
        **kwargs: Any,
    ) -> None:
        self.records: list[tuple[str, tuple[Any, ...]]] = []
        self._cond = threading.Condition()
        self.presenter = presenter
        self.send_error: BaseException | None = None
        super().__init__(config, bridge, **kwargs)

    # -- recording --------------------------------------------------------------------

    def record(self, name: str, *args: Any) -> None:
        with self._cond:
            self.records.append((name, args))
            self._cond.notify_all()

    def calls(self, name: str) -> list[tuple[Any, ...]]:
        with self._cond:
            return [args for n, args in self.records if n == name]

    def wait_for(
        self, predicate: Callable[[RecordingChannel], bool], timeout: float = WAIT
    ) -> bool:
        """Wait (condition variable, no sleeping) until ``predicate(self)`` is true."""
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self), timeout=timeout)

    def wait_for_event(
        self, type_: str, *, run_id: str | None = None, timeout: float = WAIT
    ) -> LifecycleEvent:
        def find() -> LifecycleEvent | None:
            for event in self.events:
                if event.type == type_ and (run_id is None or event.run_id == run_id):
                    return event
            return None

        if not self.wait_for(lambda _c: find() is not None, timeout):
            raise AssertionError(f"no {type_} event (run {run_id}) within {timeout}s")
        found = find()
        assert found is not None
        return found

    def wait_for_presentation(
        self, count: int = 1, timeout: float = WAIT
    ) -> UserInputRequestContext:
        """The ``count``-th presented context (1-based)."""
        if not self.wait_for(lambda c: len(c.presentations) >= count, timeout):
            raise AssertionError(f"fewer than {count} presentations within {timeout}s")
        return self.presentations[count - 1]

    def wait_for_sent(self, contains: str, timeout: float = WAIT) -> str:
        def find() -> str | None:
            return next((t for _c, t, _th in self.sent if contains in t), None)

        if not self.wait_for(lambda _c: find() is not None, timeout):
            raise AssertionError(f"nothing containing {contains!r} sent within {timeout}s")
        found = find()
        assert found is not None
        return found

    # -- typed views ------------------------------------------------------------------

    @property
    def sent(self) -> list[tuple[str, str, str | None]]:
        """``(chat_id, text, thread_id)`` of every send_message call."""
        return [(a[0], a[1], a[2]) for a in self.calls("send_message")]

    @property
    def sent_texts(self) -> list[str]:
        return [t for _c, t, _th in self.sent]

    @property
    def events(self) -> list[LifecycleEvent]:
        return [a[0] for a in self.calls("on_task_lifecycle")]

    @property
    def chunks(self) -> list[tuple[str, str, str, OutputSegmentContext | None]]:
        return [(a[0], a[1], a[2], a[3]) for a in self.calls("on_response_chunk")]

    @property
    def segment_ends(self) -> list[tuple[str, str, OutputSegmentContext, SegmentEndReason]]:
        return [(a[0], a[1], a[2], a[3]) for a in self.calls("on_output_segment_end")]

    @property
    def boundaries(self) -> list[tuple[str, str]]:
        return [(a[0], a[1]) for a in self.calls("on_response_boundary")]

    @property
    def completes(self) -> list[tuple[str, str, str, OutputSegmentContext | None]]:
        return [(a[0], a[1], a[2], a[3]) for a in self.calls("on_response_complete")]

    @property
    def tool_calls(self) -> list[tuple[str, ToolCallEvent]]:
        return [(a[0], a[1]) for a in self.calls("on_tool_call")]

    @property
    def presentations(self) -> list[UserInputRequestContext]:
        return [a[0] for a in self.calls("present_user_input_request")]

    # -- hooks ------------------------------------------------------------------------

    def send_message(self, chat_id: str, text: str, *, thread_id: str | None = None) -> None:
        if self.send_error is not None:
            raise self.send_error
        self.record("send_message", chat_id, text, thread_id)

    def on_task_lifecycle(self, event: LifecycleEvent) -> None:
        self.record("on_task_lifecycle", event)

    def on_response_chunk(
        self,
        chat_id: str,
        chunk: str,
        session_id: str,
        segment: OutputSegmentContext | None = None,
    ) -> None:
        self.record("on_response_chunk", chat_id, chunk, session_id, segment)

    def on_output_segment_end(
        self,
        chat_id: str,
        session_id: str,
        segment: OutputSegmentContext,
        reason: SegmentEndReason,
    ) -> None:
        self.record("on_output_segment_end", chat_id, session_id, segment, reason)
        super().on_output_segment_end(chat_id, session_id, segment, reason)

    def on_response_boundary(self, chat_id: str, session_id: str) -> None:
        self.record("on_response_boundary", chat_id, session_id)

    def on_response_complete(
        self,
        chat_id: str,
        text: str,
        session_id: str,
        segment: OutputSegmentContext | None = None,
    ) -> None:
        self.record("on_response_complete", chat_id, text, session_id, segment)
        super().on_response_complete(chat_id, text, session_id, segment)

    def present_user_input_request(
        self, context: UserInputRequestContext
    ) -> UserInputPresentationResult:
        self.record("present_user_input_request", context)
        if self.presenter is None:
            return super().present_user_input_request(context)
        return self.presenter(context)

    def on_tool_call(self, chat_id: str, event: ToolCallEvent) -> None:
        self.record("on_tool_call", chat_id, event)


def make_channel(
    bridge: AgentBridge,
    *,
    name: str = "test",
    clock: FakeClock | None = None,
    presenter: Callable[[UserInputRequestContext], UserInputPresentationResult] | None = None,
    max_workers: int = 8,
    threads: bool = False,
    **config: Any,
) -> RecordingChannel:
    """A RecordingChannel with its own pool and a scheduler on a FakeClock.

    The channel's ``clock`` is that FakeClock; advance it to fire timers, then
    ``channel.wait_idle()``. Close the channel when done (it closes its pool).
    ``threads``: the channel stands for a platform with threads (see `ChannelBase`);
    ``config``: further `ChannelConfig` fields."""
    cfg = ChannelConfig(name=name, max_workers=max_workers, **config)
    return RecordingChannel(
        cfg, bridge, presenter=presenter, clock=clock or FakeClock(), threads=threads
    )


# ======================================================================================
# ScriptedBridge
# ======================================================================================


class ScriptContext:
    """What a step sees while a scripted prompt runs."""

    def __init__(
        self, bridge: ScriptedBridge, session_id: str, text: str, sink: AgentEventSink
    ) -> None:
        self.bridge = bridge
        self.session_id = session_id
        self.text = text
        self.sink = sink
        self.said: list[str] = []
        self.final: str | None = None
        self.answers: dict[str, PermissionResponse | None] = {}


Step = Callable[[ScriptContext], None]


def chunk(text: str) -> Step:
    """Stream a text chunk."""

    def step(ctx: ScriptContext) -> None:
        ctx.said.append(text)
        ctx.sink.text_chunk(ctx.session_id, text)

    return step


def boundary() -> Step:
    """Emit a response boundary."""

    def step(ctx: ScriptContext) -> None:
        ctx.sink.response_boundary(ctx.session_id)

    return step


def tool(tool_call_id: str = "tool-1", **fields: Any) -> Step:
    """Emit a ToolCallEvent (kind/title/status/raw_input from ``fields``)."""

    def step(ctx: ScriptContext) -> None:
        ctx.sink.tool_call(ToolCallEvent(ctx.session_id, tool_call_id, **fields))

    return step


def permission(build: Callable[[str], PermissionRequest], *, emit_boundary: bool = True) -> Step:
    """Emit (boundary and) a permission request without waiting for its answer.

    ``build(session_id)`` creates the request, e.g.
    ``permission(lambda s: permission_request("req-1", s))``."""

    def step(ctx: ScriptContext) -> None:
        request = build(ctx.session_id)
        ctx.bridge._expect(request.request_id)
        if emit_boundary:
            ctx.sink.response_boundary(ctx.session_id)
        ctx.sink.permission_request(request)

    return step


def ask(
    build: Callable[[str], PermissionRequest],
    *,
    emit_boundary: bool = True,
    timeout: float = WAIT,
) -> Step:
    """Emit (boundary and) a permission request and block until it is answered through
    ``respond_to_permission``, the session is cancelled, or ``timeout`` (real seconds)."""

    def step(ctx: ScriptContext) -> None:
        request = build(ctx.session_id)
        ctx.bridge._expect(request.request_id)
        if emit_boundary:
            ctx.sink.response_boundary(ctx.session_id)
        ctx.sink.permission_request(request)
        ctx.answers[request.request_id] = ctx.bridge._await(
            ctx.session_id, request.request_id, timeout
        )

    return step


def resolved(request_id: str, outcome: Mapping[str, Any] | None = None) -> Step:
    """Emit permission_resolved (an answer from another surface)."""

    def step(ctx: ScriptContext) -> None:
        ctx.sink.permission_resolved(PermissionResolved(request_id, outcome))

    return step


def died(reason: str = "gone") -> Step:
    """Emit session_died for the prompt's session."""

    def step(ctx: ScriptContext) -> None:
        ctx.sink.session_died(SessionDied(ctx.session_id, reason))

    return step


def gate(event: threading.Event, timeout: float = WAIT) -> Step:
    """Block until ``event`` is set or the session is cancelled (bounded)."""

    def step(ctx: ScriptContext) -> None:
        ctx.bridge._gate(ctx.session_id, event, timeout)

    return step


def fail(exc: BaseException) -> Step:
    """Raise ``exc`` from prompt."""

    def step(ctx: ScriptContext) -> None:
        raise exc

    return step


def final(text: str) -> Step:
    """Make prompt return ``text`` (instead of everything streamed)."""

    def step(ctx: ScriptContext) -> None:
        ctx.final = text

    return step


@dataclass
class _SessionState:
    cancelled: threading.Event = field(default_factory=threading.Event)
    cond: threading.Condition = field(default_factory=threading.Condition)


class ScriptedBridge:
    """An AgentBridge that plays scripts.

    ``script`` is a list of steps used for every prompt, or a callable
    ``(session_id, text) -> list of steps``. ``prompt`` returns the ``final`` text or
    the concatenation of the chunks. ``respond_result`` (bool or callable
    ``(request_id, response) -> bool``, which may raise) and ``cancel_result`` control
    the answers. Every call is recorded in ``prompts``, ``responses`` and
    ``cancels``.
    """

    def __init__(
        self,
        script: Sequence[Step] | Callable[[str, str], Sequence[Step]] = (),
        *,
        respond_result: bool | Callable[[str, PermissionResponse], bool] = True,
        cancel_result: bool = True,
    ) -> None:
        self.script = script
        self.respond_result = respond_result
        self.cancel_result = cancel_result
        self._lock = threading.Lock()
        self.prompts: list[tuple[str, str]] = []
        self.responses: list[tuple[str, PermissionResponse]] = []
        self.cancels: list[str] = []
        self._answers: dict[str, PermissionResponse] = {}
        self._sessions: dict[str, _SessionState] = {}
        self._entered = threading.Condition(self._lock)
        self.closed = False

    def wait_prompt(self, count: int = 1, timeout: float = WAIT) -> bool:
        """Wait until ``count`` prompts have entered the bridge."""
        with self._entered:
            return self._entered.wait_for(lambda: len(self.prompts) >= count, timeout)

    def _state(self, session_id: str) -> _SessionState:
        with self._lock:
            return self._sessions.setdefault(session_id, _SessionState())

    def prompt(self, session_id: str, text: str, sink: AgentEventSink) -> str:
        with self._entered:
            self._sessions[session_id] = _SessionState()
            self.prompts.append((session_id, text))
            self._entered.notify_all()
        steps: Iterable[Step] = (
            self.script(session_id, text) if callable(self.script) else self.script
        )
        ctx = ScriptContext(self, session_id, text, sink)
        for step in steps:
            step(ctx)
        return ctx.final if ctx.final is not None else "".join(ctx.said)

    def cancel_session(self, session_id: str) -> bool:
        with self._lock:
            self.cancels.append(session_id)
        if self.cancel_result:
            state = self._state(session_id)
            with state.cond:
                state.cancelled.set()
                state.cond.notify_all()
        return self.cancel_result

    def respond_to_permission(self, request_id: str, response: PermissionResponse) -> bool:
        with self._lock:
            self.responses.append((request_id, response))
        result = self.respond_result
        ok = result(request_id, response) if callable(result) else result
        if ok:
            with self._lock:
                self._answers[request_id] = response
                states = list(self._sessions.values())
            for state in states:
                with state.cond:
                    state.cond.notify_all()
        return ok

    def close(self) -> None:
        self.closed = True

    # -- used by steps ----------------------------------------------------------------

    def _expect(self, request_id: str) -> None:
        with self._lock:
            self._answers.pop(request_id, None)

    def _await(self, session_id: str, request_id: str, timeout: float) -> PermissionResponse | None:
        state = self._state(session_id)
        with state.cond:
            state.cond.wait_for(
                lambda: request_id in self._answers or state.cancelled.is_set(), timeout
            )
        with self._lock:
            return self._answers.get(request_id)

    def _gate(self, session_id: str, event: threading.Event, timeout: float) -> None:
        state = self._state(session_id)
        done = threading.Event()

        def waiter() -> None:
            # Relays ``event`` to the condition. It checks ``done`` every 50 ms so it ends
            # soon after the gate opens for any reason (a cancel included), rather than
            # outliving the prompt until ``timeout``.
            deadline = time.monotonic() + timeout
            while not done.is_set() and time.monotonic() < deadline:
                if event.wait(0.05):
                    break
            with state.cond:
                state.cond.notify_all()

        helper = threading.Thread(target=waiter, name="scripted-bridge-gate", daemon=True)
        helper.start()
        try:
            with state.cond:
                state.cond.wait_for(lambda: event.is_set() or state.cancelled.is_set(), timeout)
        finally:
            done.set()
        helper.join(1.0)
