"""In-process function agents: a plain Python function is the agent.

    def agent(turn: Turn) -> str:
        turn.say("Let me check. ")
        answers = turn.ask([Question("Which region?", ["Beijing", "Shanghai"], header="Region")])
        return f"Deploying to {answers['0']}."

    bridge = FunctionAgent(agent)

``prompt`` runs ``fn(turn)`` on the calling (pool) thread. ``say`` streams a chunk;
``ask`` emits a response boundary and then a canonical user-question permission
request (``_meta.qwenInteractionKind == "user_question"``) and blocks until it is
answered, raising `QuestionCancelled` / `QuestionExpired`;
``request_permission`` does the same for an ordinary tool permission. ``present``
delivers a rich message (a `ReplyPayload`, a
`MessagePresentation` or their JSON form) in order with
the text: the text said so far ends its segment, the presentation follows, later text
opens a new segment. ``send_file`` / ``send_image`` send a file or an image the same
way, in order, and return the platform's message id (paths are confined to the
agent's ``files_root``). A non-empty return value is said as the final chunk; ``prompt``
returns everything said.

Every wait is bounded by ``question_timeout`` seconds. Pass ``scheduler`` to measure
that timeout on the scheduler's clock (a FakeClock in tests).

Steering (busy mode ``steer``, ``ChannelConfig.busy``): a ``FunctionAgent(fn,
steerable=True)`` takes a person's new messages while a turn of their conversation
runs, into that turn's inbox::

    def agent(turn: Turn) -> str:
        for step in plan(turn.text):
            more = turn.steered()          # texts sent since the last call, oldest first
            if more:
                step = replan(step, more)
            ...
        return summary(turn.text, turn.steered())

``Turn.steered()`` returns what arrived since its last call (each text once),
``Turn.wait_steered(timeout)`` blocks (bounded) until something arrives or the turn is
cancelled. The inbox holds at most `MAX_STEERED` texts; ``steer`` refuses more, and it
refuses any text once the function returned, so the channel queues such a message as a
turn of its own. Texts taken but never read are logged (count only) when the turn ends:
a steerable function reads its inbox before it returns. Without ``steerable=True``
``steer`` always refuses (the function would never read its inbox).
"""

from __future__ import annotations

import logging
import math
import os
import threading
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from channelkit.agents.base import (
    AgentEventSink,
    FileEvent,
    PermissionOption,
    PermissionRequest,
    PermissionResolved,
    PermissionResponse,
    PresentationEvent,
    ToolCallEvent,
)
from channelkit.attachments.fetch import DEFAULT_PER_FILE
from channelkit.errors import (
    FileNotDelivered,
    QuestionCancelled,
    QuestionError,
    QuestionExpired,
)

if TYPE_CHECKING:
    from channelkit.attachments.model import ReceivedFile
    from channelkit.presentation.model import MessagePresentation, ReplyPayload

__all__ = [
    "MAX_STEERED",
    "PERMISSION_OPTIONS",
    "QUESTION_OPTIONS",
    "FunctionAgent",
    "PermissionDecision",
    "Question",
    "QuestionCancelled",
    "QuestionError",
    "QuestionExpired",
    "Turn",
]

#: Options of a user question: Submit and Cancel, with the ids ACP agents use for them.
QUESTION_OPTIONS = (
    PermissionOption("proceed_once", "Submit", "allow_once"),
    PermissionOption("cancel", "Cancel", "reject_once"),
)
#: Default options of an ordinary permission request.
PERMISSION_OPTIONS = (
    PermissionOption("proceed_once", "Allow", "allow_once"),
    PermissionOption("proceed_always", "Always allow", "allow_always"),
    PermissionOption("cancel", "Reject", "reject_once"),
)

_CANCELLED_OUTCOME: Mapping[str, Any] = {"outcome": "cancelled"}

#: Texts one turn's steering inbox holds at most (unread); ``steer`` refuses more.
MAX_STEERED = 100

logger = logging.getLogger(__name__)

# The bounds ChannelBase's normalizer enforces (a request outside them is not rendered
# as a form, so ``ask`` refuses it up front).
_MAX_QUESTIONS = 4
_MIN_OPTIONS, _MAX_OPTIONS = 2, 4


def _timeout(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name}: must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name}: must be a positive finite number, got {value!r}")
    return float(value)


def _check_questions(questions: Sequence[Mapping[str, Any]]) -> None:
    if not 1 <= len(questions) <= _MAX_QUESTIONS:
        raise ValueError(f"questions: {len(questions)} given, 1-{_MAX_QUESTIONS} allowed")
    for index, item in enumerate(questions):
        where = f"questions[{index}]"
        text = item["question"]
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{where}.question: must be a non-blank string")
        options = item["options"]
        if not _MIN_OPTIONS <= len(options) <= _MAX_OPTIONS:
            raise ValueError(
                f"{where}.options: {len(options)} given, {_MIN_OPTIONS}-{_MAX_OPTIONS} allowed"
            )
        for oi, option in enumerate(options):
            label = option["label"]
            if not isinstance(label, str) or not label.strip():
                raise ValueError(f"{where}.options[{oi}].label: must be a non-blank string")
            if not isinstance(option["description"], str):
                raise ValueError(f"{where}.options[{oi}].description: must be a string")


_PRESENTATION_KEYS = frozenset({"title", "tone", "blocks"})


def as_reply_payload(payload: Any) -> ReplyPayload:
    """``payload`` (a ReplyPayload, a MessagePresentation or the JSON form of either) as
    a validated ReplyPayload; PresentationError names the bad field."""
    from channelkit.presentation.model import MessagePresentation, ReplyPayload
    from channelkit.presentation.schema import parse_presentation, parse_reply_payload

    if isinstance(payload, ReplyPayload):
        return payload
    if isinstance(payload, MessagePresentation):
        return ReplyPayload(presentation=payload)
    if isinstance(payload, Mapping) and payload and set(payload) <= _PRESENTATION_KEYS:
        from channelkit.errors import PresentationError

        try:
            return ReplyPayload(presentation=parse_presentation(dict(payload)))
        except PresentationError as exc:
            raise exc.under("presentation") from None
    return parse_reply_payload(dict(payload) if isinstance(payload, Mapping) else payload)


@dataclass(frozen=True)
class Question:
    """A question for `Turn.ask()`; options are labels, ``(label, description)``
    pairs or ``{"label", "description"}`` mappings. ``header`` defaults to
    ``"Question <n>"``."""

    question: str
    options: Sequence[str | tuple[str, str] | Mapping[str, str]]
    header: str = ""
    multi_select: bool = False


@dataclass(frozen=True)
class PermissionDecision:
    """The answer to `Turn.request_permission()`."""

    option_id: str | None
    kind: str | None = None
    cancelled: bool = False
    expired: bool = False

    @property
    def allowed(self) -> bool:
        return self.kind in ("allow_once", "allow_always")


_State = Literal["answered", "cancelled", "expired"]


@dataclass
class _Waiter:
    request: PermissionRequest
    event: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    state: Literal["waiting", "answered", "cancelled", "expired"] = "waiting"
    response: PermissionResponse | None = None

    def resolve(
        self,
        state: Literal["answered", "cancelled", "expired"],
        response: PermissionResponse | None,
    ) -> bool:
        with self.lock:
            if self.state != "waiting":
                return False
            self.state = state
            self.response = response
        self.event.set()
        return True


def _question_dict(index: int, item: Question | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(item, Question):
        text, header, multi, raw_options = (
            item.question,
            item.header,
            item.multi_select,
            item.options,
        )
    else:
        text = item.get("question", "")
        header = item.get("header", "")
        multi = item.get("multiSelect", item.get("multi_select", False))
        raw_options = item.get("options", ())
    options: list[dict[str, str]] = []
    for option in raw_options:
        if isinstance(option, str):
            options.append({"label": option, "description": ""})
        elif isinstance(option, Mapping):
            options.append(
                {
                    "label": str(option.get("label", "")),
                    "description": option.get("description", ""),
                }
            )
        else:
            label, description = option
            options.append({"label": label, "description": description})
    return {
        "header": header or f"Question {index + 1}",
        "question": text,
        "options": options,
        "multiSelect": bool(multi),
    }


class Turn:
    """One agent turn, handed to the agent function.

    `text` is what the person wrote (with a note naming any attachment that could not
    be received); `attachments` the files they sent, downloaded into the run's
    temporary directory (`ReceivedFile`: `path`, `name`, sniffed `content_type`,
    `size`, `sha256`, `open()`), in the order sent. The files are removed when the
    run ends: copy what you keep.
    """

    def __init__(
        self,
        agent: FunctionAgent,
        session_id: str,
        text: str,
        sink: AgentEventSink,
        attachments: tuple[ReceivedFile, ...] = (),
    ):
        self._agent = agent
        self.session_id = session_id
        self.text = text
        self.attachments = attachments
        self._sink = sink
        self._said: list[str] = []
        self._cancelled = threading.Event()
        self._lock = threading.Lock()
        self._waiters: dict[str, _Waiter] = {}
        # steering inbox: texts a person sent while this turn runs (busy mode steer)
        self._inbox: deque[str] = deque()
        self._inbox_open = True
        self._inbox_cond = threading.Condition(threading.Lock())
        self._file_waits: set[threading.Event] = set()  # send_file calls waiting

    @property
    def cancelled(self) -> bool:
        """True once the channel cancelled this turn; stop working when you see it."""
        return self._cancelled.is_set()

    @property
    def said(self) -> str:
        return "".join(self._said)

    def steered(self) -> list[str]:
        """The texts handed to this turn since the last call, oldest first (each once).

        They are messages the person sent while this turn runs, with the channel's busy
        mode ``steer`` and ``FunctionAgent(steerable=True)``; ``[]`` when none came."""
        with self._inbox_cond:
            texts = list(self._inbox)
            self._inbox.clear()
        return texts

    def wait_steered(self, timeout: float) -> list[str]:
        """Like `steered()`, but wait up to ``timeout`` seconds (real time) for a text
        when none is there; returns ``[]`` on timeout or once the turn is cancelled."""
        limit = _timeout(timeout, "timeout")
        with self._inbox_cond:
            self._inbox_cond.wait_for(lambda: self._inbox or self.cancelled, limit)
            texts = list(self._inbox)
            self._inbox.clear()
        return texts

    def _steer(self, text: str) -> bool:
        with self._inbox_cond:
            if not self._inbox_open or self.cancelled or len(self._inbox) >= MAX_STEERED:
                return False
            self._inbox.append(text)
            self._inbox_cond.notify_all()
        return True

    def _close_inbox(self) -> int:
        """No more steering (the function returned); how many texts were never read."""
        with self._inbox_cond:
            self._inbox_open = False
            left = len(self._inbox)
            self._inbox.clear()
        return left

    def say(self, text: str) -> None:
        """Stream visible text (ignored after cancellation)."""
        if not text or self.cancelled:
            return
        self._said.append(text)
        self._sink.text_chunk(self.session_id, text)

    def boundary(self) -> None:
        """End the current visible output segment."""
        self._sink.response_boundary(self.session_id)

    def present(
        self,
        payload: ReplyPayload | MessagePresentation | Mapping[str, Any],
        *,
        to: str | None = None,
        thread_id: str | None = None,
    ) -> None:
        """Deliver a presentation in order with the turn's text (ignored after
        cancellation).

        ``payload``: a ``ReplyPayload``, a ``MessagePresentation``, or the JSON form of
        either (``{"text", "presentation", "delivery"}`` or ``{"title", "tone",
        "blocks"}``), validated against the published schema: a bad one raises
        `PresentationError` naming the field
        (``presentation.blocks[1].buttons[0].label``). The text said so far ends its
        output segment, the presentation is delivered next, later text opens a new
        segment. ``to`` (a chat id, with ``thread_id``) sends it to another conversation
        of the channel instead; it then carries a context line naming this one.
        Delivery happens on the channel's side: this call does not wait for it.
        """
        reply = as_reply_payload(payload)
        if self.cancelled:
            return
        event = PresentationEvent(self.session_id, reply, to, thread_id if to else None)
        deliver = getattr(self._sink, "presentation", None)
        if callable(deliver):
            deliver(event)
            return
        # a sink from before presentations existed: a boundary, then the text form
        from channelkit.presentation.fallback import render_fallback_text

        self._sink.response_boundary(self.session_id)
        self.say(render_fallback_text(reply.presentation, reply.text))
        self._sink.response_boundary(self.session_id)

    def send_file(
        self,
        path_or_bytes: str | os.PathLike[str] | bytes,
        *,
        name: str | None = None,
        caption: str | None = None,
    ) -> str:
        """Send a file to the person; returns the platform's message id.

        ``path_or_bytes``: a path (relative to, and confined to, the agent's
        ``files_root``: the working directory by default) or bytes (then ``name`` is
        required). A path with a ``..`` component, outside the root (also through a
        symlink), not a regular file (a directory, a FIFO, a device) or larger than the
        agent's ``max_file_size`` is refused with `AttachmentRefused` /
        `AttachmentTooLarge` before it is opened: nothing outside the root is read. The
        name shown is sanitized (``name`` overrides the file's own); ``caption`` is
        shown with it.

        The text said so far ends its segment and the file follows it, in order (like
        `present`); this call waits (up to the agent's ``file_timeout``) until the
        platform took it. Uploads that fail with 429, 5xx or a broken connection are
        retried. When the platform refuses it, the person gets one line naming the file
        and why, and this raises `FileNotDelivered` (``told`` is True); also when the
        turn is cancelled while it waits. A platform that cannot upload files sends
        that line too (see docs/attachments.md for which can).
        """
        return self._send(path_or_bytes, name=name, caption=caption, image=False)

    def send_image(
        self,
        path_or_bytes: str | os.PathLike[str] | bytes,
        *,
        name: str | None = None,
        caption: str | None = None,
    ) -> str:
        """Like `send_file`, shown as an image where the platform shows images (a
        photo message); returns the platform's message id."""
        return self._send(path_or_bytes, name=name, caption=caption, image=True)

    def _send(
        self,
        path_or_bytes: str | os.PathLike[str] | bytes,
        *,
        name: str | None,
        caption: str | None,
        image: bool,
    ) -> str:
        from channelkit.attachments.outbound import outbound_source

        if caption is not None and not isinstance(caption, str):
            raise TypeError("caption: must be a string or None")
        agent = self._agent
        file = outbound_source(
            path_or_bytes, agent.files_root, name=name, max_size=agent.max_file_size
        )
        if self.cancelled:
            raise FileNotDelivered(name=file.name, reason="the turn was cancelled")
        deliver = getattr(self._sink, "file", None)
        if not callable(deliver):
            raise FileNotDelivered(name=file.name, reason="this channel does not send files")
        reply: Future[str] = Future()
        done = threading.Event()
        reply.add_done_callback(lambda _: done.set())
        with self._lock:
            self._file_waits.add(done)
        try:
            deliver(FileEvent(self.session_id, file, reply, image, caption or None))
            if not done.wait(agent.file_timeout) and not reply.done():
                raise FileNotDelivered(
                    name=file.name, reason=f"no answer within {agent.file_timeout:g} s"
                )
        finally:
            with self._lock:
                self._file_waits.discard(done)
        if not reply.done():
            raise FileNotDelivered(name=file.name, reason="the turn was cancelled")
        return reply.result(timeout=0)

    def tool_call(
        self,
        title: str,
        *,
        kind: str = "other",
        status: str = "completed",
        raw_input: Any = None,
        tool_call_id: str | None = None,
    ) -> str:
        """Report a tool call; returns its id."""
        call_id = tool_call_id or f"tool-{uuid.uuid4().hex[:12]}"
        self._sink.tool_call(
            ToolCallEvent(self.session_id, call_id, kind, title, status, raw_input)
        )
        return call_id

    def ask(
        self, questions: Sequence[Question | Mapping[str, Any]], *, timeout: float | None = None
    ) -> dict[str, str]:
        """Ask 1-4 structured questions; block until answered.

        Returns the answers keyed ``"0"``, ``"1"``... (multi-select answers are joined
        with ``", "``; an approval without answers returns ``{}``). Raises
        `QuestionCancelled` or `QuestionExpired`, and ``ValueError``
        (naming the field) for a form a channel could not render: 1-4 questions, each
        with non-blank text and 2-4 options with non-blank labels.
        """
        if isinstance(questions, str | bytes | Mapping) or not isinstance(questions, Sequence):
            raise ValueError("questions: must be a list of Question objects or mappings")
        qs = [_question_dict(i, q) for i, q in enumerate(questions)]
        _check_questions(qs)
        count = len(qs)
        request_id = f"q-{uuid.uuid4().hex}"
        tool_call = {
            "toolCallId": f"tool-{request_id}",
            "kind": "other",
            "title": f"Ask user {count} question{'' if count == 1 else 's'}",
            "status": "pending",
            "rawInput": {"questions": qs},
            "_meta": {
                "toolName": "ask_user_question",
                "qwenInteractionKind": "user_question",
                "qwenQuestions": qs,
            },
        }
        request = PermissionRequest(request_id, self.session_id, tool_call, QUESTION_OPTIONS)
        waiter = self._wait(request, timeout)
        if waiter.state == "expired":
            raise QuestionExpired(f"question {request_id} expired", request_id)
        if waiter.state == "cancelled":
            raise QuestionCancelled(f"question {request_id} was cancelled", request_id)
        response = waiter.response or {}
        outcome = response.get("outcome")
        option_id = outcome.get("optionId") if isinstance(outcome, Mapping) else None
        selected = isinstance(outcome, Mapping) and outcome.get("outcome") == "selected"
        if not selected or option_id != QUESTION_OPTIONS[0].option_id:
            raise QuestionCancelled(f"question {request_id} was cancelled", request_id)
        answers = response.get("answers")
        if not isinstance(answers, Mapping):
            return {}
        return {str(k): str(v) for k, v in answers.items()}

    def request_permission(
        self,
        title: str,
        *,
        kind: str = "execute",
        tool_name: str | None = None,
        raw_input: Mapping[str, Any] | None = None,
        options: Sequence[PermissionOption] = PERMISSION_OPTIONS,
        timeout: float | None = None,
    ) -> PermissionDecision:
        """Ask permission to run a tool; block until answered or expired."""
        request_id = f"p-{uuid.uuid4().hex}"
        tool_call: dict[str, Any] = {
            "toolCallId": f"tool-{request_id}",
            "kind": kind,
            "title": title,
            "status": "pending",
            "rawInput": dict(raw_input or {}),
        }
        if tool_name:
            tool_call["_meta"] = {"toolName": tool_name}
        request = PermissionRequest(request_id, self.session_id, tool_call, tuple(options))
        waiter = self._wait(request, timeout)
        if waiter.state != "answered":
            return PermissionDecision(None, cancelled=True, expired=waiter.state == "expired")
        outcome = (waiter.response or {}).get("outcome")
        if not isinstance(outcome, Mapping) or outcome.get("outcome") != "selected":
            return PermissionDecision(None, cancelled=True)
        option_id = outcome.get("optionId")
        option = next((o for o in options if o.option_id == option_id), None)
        return PermissionDecision(
            str(option_id) if option_id is not None else None,
            option.kind if option else None,
        )

    # -- internals --------------------------------------------------------------------

    def _wait(self, request: PermissionRequest, timeout: float | None) -> _Waiter:
        agent = self._agent
        limit = agent.question_timeout if timeout is None else _timeout(timeout, "timeout")
        waiter = _Waiter(request)
        with self._lock:
            if self.cancelled:
                waiter.resolve("cancelled", None)
                return waiter
            self._waiters[request.request_id] = waiter
        agent._register(waiter)
        timer = None
        try:
            if agent.scheduler is not None:
                timer = agent.scheduler.call_later(limit, self._expire, waiter)
            self._sink.response_boundary(self.session_id)
            self._sink.permission_request(request)
            real_limit = limit if agent.scheduler is None else limit + agent.real_wait_margin
            if not waiter.event.wait(real_limit):
                self._expire(waiter)
        finally:
            if timer is not None:
                timer.cancel()
            with self._lock:
                self._waiters.pop(request.request_id, None)
            agent._unregister(waiter)
        return waiter

    def _expire(self, waiter: _Waiter) -> None:
        if waiter.resolve("expired", None):
            self._sink.permission_resolved(
                PermissionResolved(waiter.request.request_id, _CANCELLED_OUTCOME)
            )

    def _cancel(self) -> None:
        with self._lock:
            self._cancelled.set()
            waiters = list(self._waiters.values())
            file_waits = list(self._file_waits)
        for wait in file_waits:
            wait.set()  # send_file stops waiting (the file may still go out)
        with self._inbox_cond:
            self._inbox_cond.notify_all()  # wake wait_steered
        for waiter in waiters:
            if waiter.resolve("cancelled", None):
                self._sink.permission_resolved(
                    PermissionResolved(waiter.request.request_id, _CANCELLED_OUTCOME)
                )


class FunctionAgent:
    """An `AgentBridge` backed by ``fn(turn) -> str``.

    ``name`` is the agent's display name (status lines show it when no model is
    configured). ``question_timeout`` bounds every ``ask``/``request_permission`` wait
    (seconds).
    With ``scheduler`` the timeout is a timer on the scheduler's clock; the real wait is
    then bounded by ``question_timeout + real_wait_margin``. ``steerable`` (default
    False): the function reads `Turn.steered()`, so `steer()` hands it new messages
    (busy mode ``steer``; see the module docstring).

    Files out (`Turn.send_file`, `Turn.send_image`): ``files_root`` is the only
    directory the agent's paths may name (default: the working directory when the agent
    is created); ``max_file_size`` the largest file in bytes (default 20 MiB);
    ``file_timeout`` how long one send waits for the platform, retries included
    (seconds, default 120).
    """

    def __init__(
        self,
        fn: Callable[[Turn], str | None],
        *,
        question_timeout: float = 300.0,
        scheduler: Any = None,
        real_wait_margin: float = 30.0,
        name: str | None = None,
        steerable: bool = False,
        files_root: str | os.PathLike[str] | None = None,
        max_file_size: int = DEFAULT_PER_FILE,
        file_timeout: float = 120.0,
    ) -> None:
        if not callable(fn):
            raise TypeError("fn: must be callable")
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise ValueError("name: must be a non-blank string or None")
        self._fn = fn
        #: the agent's display name (None: unnamed)
        self.name: str | None = name
        self.question_timeout = _timeout(question_timeout, "question_timeout")
        self.scheduler = scheduler
        self.real_wait_margin = real_wait_margin
        #: True when the function reads `Turn.steered()` (then `steer()` takes texts)
        self.steerable = bool(steerable)
        #: the directory `Turn.send_file` paths are confined to
        self.files_root = Path(files_root if files_root is not None else os.getcwd())
        if isinstance(max_file_size, bool) or not isinstance(max_file_size, int):
            raise TypeError("max_file_size: must be a number of bytes")
        if max_file_size <= 0:
            raise ValueError("max_file_size: must be > 0")
        #: the largest file `Turn.send_file` sends, in bytes
        self.max_file_size = max_file_size
        #: how long one `Turn.send_file` waits for the platform (seconds)
        self.file_timeout = _timeout(file_timeout, "file_timeout")
        self._lock = threading.Lock()
        self._turns: dict[str, Turn] = {}
        self._waiters: dict[str, _Waiter] = {}

    @property
    def permission_timeout(self) -> float:
        """Alias of ``question_timeout``: how long this bridge waits for an answer.

        ``ChannelBase`` reads it (as it does ``AcpBridge.permission_timeout``) so its own
        deadline for a pending request, ``UserInputRequestContext.expires_at``, is never
        later than the bridge's.
        """
        return self.question_timeout

    def prompt(self, session_id: str, text: str, sink: AgentEventSink) -> str:
        """Run ``fn`` on a new `Turn` of ``text``; return everything it said."""
        return self._run_turn(Turn(self, session_id, text, sink))

    def prompt_with_attachments(
        self,
        session_id: str,
        text: str,
        attachments: Sequence[ReceivedFile],
        sink: AgentEventSink,
    ) -> str:
        """Like `prompt()`, with the person's downloaded files as `Turn.attachments`
        (the channel calls it when a message carried attachments)."""
        return self._run_turn(Turn(self, session_id, text, sink, tuple(attachments)))

    def _run_turn(self, turn: Turn) -> str:
        session_id = turn.session_id
        with self._lock:
            if session_id in self._turns:
                raise RuntimeError(f"session {session_id} already has a running turn")
            self._turns[session_id] = turn
        try:
            result = self._fn(turn)
            if isinstance(result, str) and result:
                turn.say(result)
            return turn.said
        finally:
            unread = turn._close_inbox()
            with self._lock:
                if self._turns.get(session_id) is turn:
                    del self._turns[session_id]
            if unread:
                logger.warning(
                    "turn of session %s ended with %d steered message(s) it never read",
                    session_id,
                    unread,
                )

    def steer(self, session_id: str, text: str) -> bool:
        """Hand ``text`` to the session's running turn (`Turn.steered()`); True when the
        turn took it. False without ``steerable``, without a running turn, after the
        function returned or was cancelled, or with `MAX_STEERED` texts unread (the
        channel then queues the message as a turn of its own)."""
        if not self.steerable or not isinstance(text, str):
            return False
        with self._lock:
            turn = self._turns.get(session_id)
        return turn is not None and turn._steer(text)

    def cancel_session(self, session_id: str) -> bool:
        with self._lock:
            turn = self._turns.get(session_id)
        if turn is None:
            return False
        turn._cancel()
        return True

    def respond_to_permission(self, request_id: str, response: PermissionResponse) -> bool:
        with self._lock:
            waiter = self._waiters.get(request_id)
        if waiter is None or not waiter.resolve("answered", response):
            return False
        # Like the ACP bridge: report the resolution before returning.
        with self._lock:
            turn = self._turns.get(waiter.request.session_id)
        outcome = response.get("outcome") if isinstance(response, Mapping) else None
        if turn is not None:
            turn._sink.permission_resolved(
                PermissionResolved(request_id, outcome if isinstance(outcome, Mapping) else None)
            )
        return True

    def close(self) -> None:
        with self._lock:
            turns = list(self._turns.values())
        for turn in turns:
            turn._cancel()

    def _register(self, waiter: _Waiter) -> None:
        with self._lock:
            self._waiters[waiter.request.request_id] = waiter

    def _unregister(self, waiter: _Waiter) -> None:
        with self._lock:
            if self._waiters.get(waiter.request.request_id) is waiter:
                del self._waiters[waiter.request.request_id]
