"""The platform contract: the typed seams every chat platform fills the same way.

A chat platform's channel extends `ChannelBase` and fills four seams. This module holds
their types; `channelkit.platforms.common.router` holds the one router every platform
uses to decide an interaction.

Ingress -> `Interaction` -> `Decision`
    An HTTP request or a long-connection frame is verified and parsed by the platform's
    `ingress.py` into one normalized `Interaction` (a message, a button press, a form
    submit or a command). The platform's interaction handlers (Stop, question forms,
    approval buttons, presentation buttons...) each answer it with a `Decision`, or
    `None` for "not mine"; an `InteractionRouter` tries them in order. A decision is
    taken synchronously on the web (or connection) thread, never waits on the network,
    and is the ACK plus the work to run once the ACK is on its way.

Output surface (`OutputSurface`)
    One visible output segment of a run (`OutputSegmentContext`) is opened
    (`open_segment`), appended to (`append`) and closed with its reason
    (`close_segment`). The segment is always passed as one object, never
    unpacked into its fields.

Question surface (`QuestionSurface`)
    A structured question (`UserInputRequestContext`) or a tool approval
    (`PermissionRequestContext`) is presented natively. The surface settles it in place
    (the card or keyboard shows the end state) only after the responder accepted the
    answer, or when the request settled elsewhere; a failed projection never rolls the
    answer back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from channelkit.core.approvals import PermissionRequestContext
from channelkit.core.context import UserInputRequestContext
from channelkit.core.types import OutputSegmentContext
from channelkit.ingress import IngressResponse

__all__ = [
    "ApprovalSurface",
    "Decision",
    "DecisionOutcome",
    "Interaction",
    "InteractionHandler",
    "InteractionKind",
    "OutputSurface",
    "PresentOutcome",
    "QuestionSurface",
    "Work",
]

logger = logging.getLogger(__name__)

#: What a person did: typed a message, pressed a button, submitted a form, or sent a
#: command (a message the channel answers itself, e.g. `/help`).
InteractionKind = Literal["message", "button", "form_submit", "command"]

#: A unit of work to run after the ACK (a quick hand-off to a pool, or the job itself
#: when the platform hands the whole decision to a pool, see `Decision.handed_to`).
Work = Callable[[], None]

#: How a handler judged an interaction, for logs and tests; the ACK does not depend on
#: it. `accepted`: claimed, its work follows; `forbidden`: not the owner's press;
#: `invalid`: the owner's form did not validate; `ignored`: stale, duplicate, unknown.
DecisionOutcome = Literal["accepted", "forbidden", "invalid", "ignored"]

#: What presenting a question or an approval did (the values of
#: `UserInputPresentationResult`): shown natively, handled otherwise, or not supported
#: here (core then falls back to a text prompt).
PresentOutcome = Literal["presented", "handled", "unsupported"]


@dataclass(frozen=True)
class Interaction:
    """One normalized thing a person did on a platform.

    `actor_id` is the platform's id of the person who acted (an open id, a staff id, a
    user id); `chat_id` / `thread_id` where they acted, when the platform says so.
    `token` is the opaque correlation the platform echoes back (a card's track id, the
    callback data of a keyboard button, the value of a Block Kit action); `value` the
    chosen action or option inside it. `form` holds the submitted form values of a
    `form_submit`; `text` the text of a `message` or `command`. `raw` is the
    platform's own parsed payload (its `CardCallback`, `CardAction`, `TgCallbackQuery`,
    ...), kept for the platform's handlers and never read by shared code.
    """

    kind: InteractionKind
    platform: str
    actor_id: str | None = None
    chat_id: str | None = None
    thread_id: str | None = None
    token: str | None = None
    value: str | None = None
    form: Mapping[str, Any] = field(default_factory=dict)
    text: str | None = None
    raw: Any = None

    def __post_init__(self) -> None:
        if self.kind not in ("message", "button", "form_submit", "command"):
            raise ValueError(f"Interaction.kind: unknown kind {self.kind!r}")


@dataclass(frozen=True)
class Decision:
    """The answer to one interaction: the ACK, then the work after the ACK.

    `status` and `body` are the ACK (`body` a JSON-able payload, `None` for the
    platform's empty ACK, or `bytes` sent as they are). `after` is the work to run once
    the ACK is on its way, in order, as an immutable tuple; nothing in it may run before
    the ACK, and nothing before it waits on the network. `outcome` says how the handler
    judged the interaction (see `DecisionOutcome`).

    Build decisions with `Decision.ack(...)`, `Decision.ignored(...)`, then chain
    `then(...)`, `merge(...)` and `handed_to(...)`; each returns a new decision.
    """

    status: int = 200
    body: Any = None
    after: tuple[Work, ...] = ()
    outcome: DecisionOutcome = "ignored"

    def __post_init__(self) -> None:
        if not 100 <= self.status <= 599:
            raise ValueError(f"Decision.status: {self.status!r} is not an HTTP status")
        if not isinstance(self.after, tuple):
            raise TypeError("Decision.after: must be a tuple of callables")
        for work in self.after:
            if not callable(work):
                raise TypeError(f"Decision.after: {work!r} is not callable")

    @classmethod
    def ack(
        cls,
        body: Any = None,
        *,
        status: int = 200,
        outcome: DecisionOutcome = "accepted",
    ) -> Decision:
        """A plain ACK with `body` and no work yet (`accepted` unless told otherwise)."""
        return cls(status=status, body=body, outcome=outcome)

    @classmethod
    def ignored(cls, body: Any = None, *, status: int = 200) -> Decision:
        """The ACK of an interaction that changes nothing (stale, duplicate, unknown)."""
        return cls(status=status, body=body, outcome="ignored")

    def then(self, *work: Work) -> Decision:
        """This decision with `work` appended to the work after the ACK."""
        return Decision(self.status, self.body, self.after + tuple(work), self.outcome)

    def with_body(self, body: Any, *, status: int | None = None) -> Decision:
        """This decision with another ACK body (and status)."""
        return Decision(self.status if status is None else status, body, self.after, self.outcome)

    def merge(self, other: Decision) -> Decision:
        """Both decisions' work (this one's first) under one ACK.

        The ACK is this decision's, unless this one has no body and `other` has one;
        the higher status wins (a 503 of either part is not lost), and an `accepted`
        outcome of either part is kept.
        """
        body = self.body if self.body is not None else other.body
        outcome = self.outcome if self.outcome != "ignored" else other.outcome
        return Decision(max(self.status, other.status), body, self.after + other.after, outcome)

    def handed_to(self, post: Callable[[Work], Any]) -> Decision:
        """This decision with its work run as ONE job given to `post` (e.g. a pool's
        `post`) after the ACK, in order; a failing item is logged and the rest still
        run. Without work, the decision is returned unchanged."""
        if not self.after:
            return self
        work = self.after
        return Decision(
            self.status, self.body, (lambda: post(lambda: _run_all(work)),), self.outcome
        )

    def run_after(self) -> None:
        """Run the work now, in order (for callers without an ACK to wait for: long
        polling, tests); a failing item is logged and the rest still run."""
        _run_all(self.after)

    def to_response(self, headers: tuple[tuple[str, str], ...] | None = None) -> IngressResponse:
        """The `IngressResponse` the web layer writes: the body as JSON (`None` as
        `{}`, `bytes` as they are) and the work as its `after`."""
        if isinstance(self.body, bytes | bytearray):
            data = bytes(self.body)
        else:
            data = IngressResponse.json(self.status, {} if self.body is None else self.body).body
        if headers is None:
            return IngressResponse(self.status, data, after=self.after)
        return IngressResponse(self.status, data, headers=headers, after=self.after)


def _run_all(work: Iterable[Work]) -> None:
    for item in work:
        try:
            item()
        except Exception:
            logger.exception("work after an interaction's ACK failed")


#: One interaction handler: a `Decision`, or `None` when the interaction is not its own.
InteractionHandler = Callable[[Interaction], "Decision | None"]


@runtime_checkable
class OutputSurface(Protocol):
    """Where a run's visible output segments are shown (a status card, a stream, an
    edited message). Every method takes the whole segment.

    - `open_segment(segment)`: the segment starts; a surface that creates its native handle on
      the first text does nothing here.
    - `append(segment, chunk)`: visible text for the segment; True when the surface took
      it (False: it shows no such segment, the channel delivers the text itself).
    - `close_segment(segment, reason)`: the segment ended (`response_boundary`,
      `input_requested`, `completed`, `failed`, `cancelled`); the surface projects its
      end state once, without waiting for the projection.
    """

    def open_segment(self, segment: OutputSegmentContext) -> None: ...

    def append(self, segment: OutputSegmentContext, chunk: str) -> bool: ...

    def close_segment(self, segment: OutputSegmentContext, reason: str) -> None: ...


R_contra = TypeVar("R_contra", contravariant=True)


@runtime_checkable
class QuestionSurface(Protocol[R_contra]):
    """Where a question or an approval is presented natively (a form card, an inline
    keyboard, approval buttons).

    `present(request)` shows it and returns a `PresentOutcome` value (`"presented"`,
    `"handled"` or `"unsupported"`, as a string or a `UserInputPresentationResult`);
    `unsupported` lets core fall back to its text prompt. The surface answers through the request's
    one-shot responder (on a pool thread, after the ACK) and settles its card in place
    only after that responder accepted the answer, or when the request settled
    elsewhere (another surface, a command, expiry, cancellation).
    """

    def present(self, request: R_contra) -> str: ...


#: The question surface of structured questions.
QuestionFormSurface = QuestionSurface[UserInputRequestContext]
#: The question surface of tool approvals.
ApprovalSurface = QuestionSurface[PermissionRequestContext]
