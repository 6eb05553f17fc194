"""Discord native questions: one message of components bound to one captured input
request.

`present` posts one message in the request's channel: the questions as text, one string
select per question (single choice, or up to every option for a multi-select question),
then Submit, Other... and Cancel buttons. Every `custom_id` is `ck:q:<token>:<what>`,
an opaque random token mapped to the form in the channel's card registry (never the
request id). Choosing in a select only records the choice (a deferred update answers
it); Submit answers with the recorded choices (multi-select answers joined with ", ");
Other... opens a modal with one text field per question, whose submit answers with the
typed text where given and the recorded choice elsewhere. A question without an answer
gets an ephemeral hint and nothing changes.

At most one form is live per session, owner and run
(`channelkit.platforms.common.native_input`): a second question of the same run while
the first is live gets the text prompt. Forms live in the card registry (1,000 at most:
beyond that, the text prompt); an ended form leaves a tombstone, so late clicks change
nothing.

State machine, changed only by compare-and-set: `reserved` (registered, being posted)
-> `pending` (posted, expiry armed) -> `claimed` (the owner's Submit, modal submit or
Cancel, on the receiving thread before the ACK) -> `terminal` (`submitted` /
`cancelled` / `expired`, shown by editing the message in place, components removed,
once). Only the request's owner can answer; anyone else gets an ephemeral notice. The
claimed answer goes to the request's one-shot `respond()` on the form's serial lane
after the ACK, and the message never shows success before that responder accepted it
(another answer won: the winner's state, and the conversation is told once). Expiry
runs on the scheduler `EXPIRY_MARGIN` before core's deadline: the form shows Expired
first, then the request is cancelled. Answers are never logged.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from channelkit.core import UserInputRequestContext
from channelkit.core.catalog import Messages, en, messages
from channelkit.platforms.common import StateCell, question_deadline
from channelkit.platforms.common.contract import Decision
from channelkit.platforms.common.native_input import (
    FormRace,
    answer_response,
    cancel_request,
    input_scope,
    reserve_native_input,
    winner_state,
)
from channelkit.platforms.common.registry import CardRegistry, MemoryCardRegistry
from channelkit.platforms.discord.ingress import (
    ComponentClick,
    clicker_texts,
    deferred_update,
    ephemeral,
    modal,
)

__all__ = [
    "PREFIX",
    "TEXT_ALREADY_ANSWERED",
    "TEXT_ANSWER_ALL",
    "TEXT_NOT_OWNER",
    "DiscordQuestions",
    "Form",
    "form_components",
]

logger = logging.getLogger(__name__)

PREFIX = "ck:q:"
#: catalog texts (English here; shown in the language of the person who reads them: the
#: form, its end state and the already-answered notice in the owner's, a click's notice
#: and the modal in the clicking person's)
TEXT_NOT_OWNER = en("owner.answer_asked")
TEXT_ANSWER_ALL = en("question.answer_all")
TEXT_ALREADY_ANSWERED = en("question.already_answered_form")
TEXT_SUBMIT = en("button.submit")
TEXT_OTHER = en("question.other_typed")
TEXT_CANCEL = en("button.cancel")
TEXT_CHOOSE = en("question.choose")
TEXT_MODAL_TITLE = en("question.your_answer")
TEXT_QUESTION = en("slack.question")
TEXT_QUESTION_NUMBERED = en("question.numbered")
TEXT_TERMINAL = {
    "submitted": en("label.submitted_plain"),
    "cancelled": en("label.cancelled_plain"),
    "expired": en("label.expired_plain"),
}
MAX_LIVE_FORMS = 1_000
MAX_CONTENT = 2_000
_CLAIMABLE = ("reserved", "pending")

Submit = Callable[[Hashable, Callable[[], Any]], Any]


@dataclass(eq=False)
class Form:
    """One presented form: the captured request, its choices so far and its message."""

    context: UserInputRequestContext
    token: str
    channel: str
    deadline: float
    state: StateCell[str]
    message_id: str | None = None
    picks: dict[int, str] = field(default_factory=dict)  # question index -> answer
    terminal: str | None = None
    action: str | None = None  # submit | cancel, once claimed
    answers: dict[str, str] | None = None
    ended_while_posting: bool = False
    race: FormRace = field(default_factory=FormRace)
    timer: Any = None
    unsubscribe: Callable[[], Any] | None = None


def _custom_id(token: str, what: str) -> str:
    return f"{PREFIX}{token}:{what}"


def form_text(context: UserInputRequestContext, texts: Messages | None = None) -> str:
    """The questions as the message's text."""
    lines = []
    for question in context.questions:
        lines.append(
            f"**{question.header}**\n{question.question}" if question.header else question.question
        )
    return "\n\n".join(lines)[:MAX_CONTENT] or (texts or messages()).text(TEXT_QUESTION)


def form_components(
    context: UserInputRequestContext, token: str, texts: Messages | None = None
) -> list[dict[str, Any]]:
    """One string select per question, then Submit, Other... and Cancel (labelled in
    the locale of ``texts``, default English)."""
    m = texts or messages()
    rows: list[dict[str, Any]] = []
    for index, question in enumerate(context.questions[:4]):
        options = [
            {
                "label": (option.label or str(n + 1))[:100],
                "value": str(n),
                **({"description": option.description[:100]} if option.description else {}),
            }
            for n, option in enumerate(question.options[:25])
        ]
        if not options:
            continue
        select = {
            "type": 3,
            "custom_id": _custom_id(token, f"s{index}"),
            "options": options,
            "placeholder": (question.header or m.text(TEXT_CHOOSE))[:150],
            "min_values": 1,
            "max_values": len(options) if question.multi_select else 1,
        }
        rows.append({"type": 1, "components": [select]})
    buttons = [
        {"type": 2, "style": style, "label": m.text(label), "custom_id": _custom_id(token, what)}
        for style, label, what in (
            (3, TEXT_SUBMIT, "submit"),
            (2, TEXT_OTHER, "other"),
            (2, TEXT_CANCEL, "cancel"),
        )
    ]
    rows.append({"type": 1, "components": buttons})
    return rows


def other_modal(
    context: UserInputRequestContext, token: str, texts: Messages | None = None
) -> dict[str, Any]:
    """The modal of typed answers: one optional text field per question (its title in
    the locale of ``texts``, default English)."""
    m = texts or messages()
    inputs = [
        {
            "type": 4,
            "custom_id": f"q{index}",
            "style": 1 if not question.multi_select else 2,
            "label": (
                question.header
                or question.question
                or m.text(TEXT_QUESTION_NUMBERED, number=index + 1)
            )[:45],
            "required": False,
            "max_length": 1000,
        }
        for index, question in enumerate(context.questions[:5])
    ]
    return modal(_custom_id(token, "modal"), m.text(TEXT_MODAL_TITLE), inputs)


def terminal_text(
    context: UserInputRequestContext,
    state: str,
    answers: Mapping[str, str] | None,
    texts: Messages | None = None,
) -> str:
    """The form's terminal text (the questions with their answers, then the state in
    the locale of ``texts``, default English)."""
    lines = []
    for question in context.questions:
        answer = (answers or {}).get(question.answer_key)
        line = f"**{question.header or question.question}**"
        lines.append(line + (f": {answer}" if answer else ""))
    label = (texts or messages()).text(TEXT_TERMINAL.get(state, state))
    body = "\n".join(lines)[: MAX_CONTENT - len(label) - 4]
    return f"{body}\n\n*{label}*"


class DiscordQuestions:
    """Presents forms and decides their clicks; see the module docstring.

    `submit(key, fn)` runs `fn` on a per-key serial lane of the pool; the scheduler
    arms the expiry; `registry` holds the live forms (key: the token) and their
    tombstones (token -> (request id, terminal state)). `texts_for(person)` gives the
    catalog texts a person reads (the channel sets its `messages_for`).
    """

    def __init__(
        self,
        api: Any,
        *,
        submit: Submit,
        scheduler: Any,
        clock: Any,
        timeout_s: float,
        registry: CardRegistry[Form, tuple[str, str]] | None = None,
    ) -> None:
        self._api = api
        self._submit = submit
        self._scheduler = scheduler
        self._clock = clock
        self._timeout_s = timeout_s
        self.registry: CardRegistry[Form, tuple[str, str]] = (
            registry if registry is not None else MemoryCardRegistry(clock, maxsize=MAX_LIVE_FORMS)
        )
        self._lock = self.registry.lock
        #: the catalog texts a person reads (the channel sets its ``messages_for``)
        self.texts_for: Callable[[str | None], Messages] = lambda _: messages()

    # -- introspection --------------------------------------------------------------------
    def state_of(self, request_id: str) -> str | None:
        """`reserved` / `pending` / `claimed` for a live form, else its terminal state
        (from the tombstone), else None."""
        with self._lock:
            for form in self.registry.records():
                if form.context.request_id == request_id:
                    return form.state.state
            for tomb_request_id, state in self.registry.tombstones():
                if tomb_request_id == request_id:
                    return state
        return None

    def live_forms(self) -> list[Form]:
        """Every live form, oldest first."""
        return self.registry.records()

    # -- presentation ---------------------------------------------------------------------
    def present(self, context: UserInputRequestContext) -> str:
        """Post the form (on the run's worker): `"presented"`, or `"unsupported"` (the
        text prompt) when the run already has a live form, too many forms are live, a
        question has no options, or posting failed."""
        if not context.questions or len(context.questions) > 4:
            return "unsupported"
        if any(not q.options for q in context.questions):
            return "unsupported"
        form = Form(
            context=context,
            token=secrets.token_urlsafe(12),
            channel=context.target.chat_id,
            deadline=question_deadline(self._clock.now(), self._timeout_s, context),
            state=self.registry.state("reserved"),
        )
        if not reserve_native_input(self.registry, form.token, form, input_scope(context)):
            return "unsupported"
        form.unsubscribe = context.on_settled(partial(self._on_settled, form))
        if form.state.state != "reserved":
            return "presented"
        try:
            texts = self.texts_for(context.owner.id)  # the form in its owner's language
            message_id = self._api.post(
                form.channel,
                form_text(context, texts),
                form_components(context, form.token, texts),
            )
        except Exception as exc:
            logger.warning("discord question could not be posted: %s", type(exc).__name__)
            if self._end(form, "reserved", "expired"):
                return "unsupported"
            return "presented"
        with self._lock:
            if form.message_id is None:
                form.message_id = message_id
        if form.state.compare_and_set("reserved", "pending"):
            form.timer = self._scheduler.call_later(
                max(0.0, form.deadline - self._clock.now()),
                partial(self._submit, form.token, partial(self._expire, form)),
            )
            return "presented"
        with self._lock:
            unshown = form.ended_while_posting
        if unshown:
            self._submit(form.token, partial(self._project, form))
        return "presented"

    # -- clicks (receiving thread: correlate, authorize, validate, claim; no network) -----
    def decide(self, click: ComponentClick) -> Decision | None:
        """A form's click or modal submit: None when it is not one of ours, else its
        `Decision` (its body the interaction response)."""
        if not click.custom_id.startswith(PREFIX):
            return None
        token, _, what = click.custom_id[len(PREFIX) :].partition(":")
        form = self.registry.get(token)
        if form is None or form.state.state not in _CLAIMABLE:
            return Decision.ignored(deferred_update())
        with self._lock:
            known = form.message_id
        if known is not None and click.message_id not in (None, known):
            return Decision.ignored(deferred_update())
        if click.user_id != form.context.owner.id:  # told in the clicking person's language
            refusal = clicker_texts(click, self.texts_for).text(TEXT_NOT_OWNER)
            return Decision.ack(ephemeral(refusal), outcome="forbidden")
        questions = form.context.questions
        if what.startswith("s") and what[1:].isdigit():
            index = int(what[1:])
            if index >= len(questions):
                return Decision.ignored(deferred_update())
            labels = []
            for value in click.values:
                try:
                    labels.append(questions[index].options[int(value)].label)
                except (ValueError, IndexError):
                    continue
            with self._lock:
                if labels:
                    form.picks[index] = ", ".join(labels)
                else:
                    form.picks.pop(index, None)
            return Decision.ack(deferred_update())
        if what == "other":
            texts = clicker_texts(click, self.texts_for)
            return Decision.ack(other_modal(form.context, form.token, texts))
        if what not in ("submit", "cancel", "modal"):
            return Decision.ignored(deferred_update())
        answers: dict[str, str] | None = None
        if what != "cancel":
            answers = self._answers(form, click.fields if what == "modal" else {})
            if answers is None:
                hint = clicker_texts(click, self.texts_for).text(TEXT_ANSWER_ALL)
                return Decision.ack(ephemeral(hint), outcome="invalid")
        if not form.state.compare_and_set(_CLAIMABLE, "claimed"):
            return Decision.ignored(deferred_update())
        with self._lock:
            form.action = "cancel" if what == "cancel" else "submit"
            form.answers = answers
            if form.message_id is None and click.message_id:
                form.message_id = click.message_id
            timer, form.timer = form.timer, None
        if timer is not None:
            timer.cancel()
        return Decision.ack(deferred_update()).then(
            partial(self._submit, form.token, partial(self._answer, form))
        )

    def _answers(self, form: Form, typed: Mapping[str, str]) -> dict[str, str] | None:
        """Typed text where given, else the recorded choice; None when one is missing."""
        answers: dict[str, str] = {}
        with self._lock:
            picks = dict(form.picks)
        for index, question in enumerate(form.context.questions):
            text = (typed.get(f"q{index}") or "").strip()
            answer = text or picks.get(index)
            if not answer:
                return None
            answers[question.answer_key] = answer
        return answers

    # -- the claimed answer (the form's lane) ---------------------------------------------
    def _answer(self, form: Form) -> None:
        """Answer the request; show only what the responder decided (`FormRace`)."""
        submitted = (form.answers or {}) if form.action == "submit" else None
        response = answer_response(form.context.submit_option_id, submitted)
        form.race.answer(
            partial(form.context.respond, response),
            claimed="submitted" if form.action == "submit" else "cancelled",
            end=partial(self._end_claimed, form),
            tell_lost=partial(self._tell_lost, form),
            run=partial(self._submit, form.token),
            scheduler=self._scheduler,
            clock=self._clock,
            deadline=form.deadline,
            request_id=str(form.context.request_id),
        )

    def _end_claimed(self, form: Form, state: str) -> bool:
        """End the claimed form in ``state`` and show it; True for the call that did."""
        if not self._end(form, "claimed", state):
            return False
        self._project(form)
        return True

    def _tell_lost(self, form: Form) -> None:
        try:
            notice = self.texts_for(form.context.owner.id).text(TEXT_ALREADY_ANSWERED)
            self._api.post(form.channel, notice)
        except Exception as exc:
            logger.warning("discord already-answered notice failed: %s", type(exc).__name__)

    # -- settlement, expiry ---------------------------------------------------------------
    def _on_settled(self, form: Form, reason: Any) -> None:
        reason = str(reason)
        if form.race.on_settled(reason):
            return  # the claimed answer lost: the race ends the form as the winner
        state = winner_state(reason)
        if self._end(form, "reserved", state):
            return
        if self._end(form, "pending", state):
            self._submit(form.token, partial(self._project, form))

    def _expire(self, form: Form) -> None:
        """The form's lifetime ended: show Expired first, then cancel the request."""
        if not self._end(form, "pending", "expired"):
            return
        self._project(form)
        cancel_request(form.context.respond, str(form.context.request_id))

    def _end(self, form: Form, expected: str, terminal: str) -> bool:
        with self._lock:
            if not form.state.compare_and_set(expected, "terminal"):
                return False
            form.terminal = terminal
            form.ended_while_posting = expected == "reserved"
            timer, form.timer = form.timer, None
            unsubscribe, form.unsubscribe = form.unsubscribe, None
            self.registry.remove(form.token, form)
            self.registry.bury(form.token, (str(form.context.request_id), terminal))
        if timer is not None:
            timer.cancel()
        if unsubscribe is not None:
            unsubscribe()
        return True

    def _project(self, form: Form) -> None:
        """Edit the form in place to its terminal state (components removed)."""
        with self._lock:
            message_id, state = form.message_id, form.terminal or "expired"
        if message_id is None:
            return
        answers = form.answers if state == "submitted" else None
        try:
            texts = self.texts_for(form.context.owner.id)
            self._api.edit(
                form.channel, message_id, terminal_text(form.context, state, answers, texts), []
            )
        except Exception as exc:
            logger.warning("discord question update failed: %s", type(exc).__name__)

    def close(self) -> None:
        """Expire every form nobody claimed (shown at once; responders not called)."""
        for form in self.registry.records():
            if self._end(form, "pending", "expired") or self._end(form, "reserved", "expired"):
                self._project(form)


if TYPE_CHECKING:
    from channelkit.platforms.common.contract import QuestionSurface

    def _satisfies_the_contract(presenter: DiscordQuestions) -> None:
        """mypy: the presenter is Discord's question surface."""
        questions: QuestionSurface[UserInputRequestContext] = presenter
        del questions
