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
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from channelkit.core import UserInputRequestContext
from channelkit.core.catalog import Messages, en, messages
from channelkit.platforms.common import question_deadline
from channelkit.platforms.common.contract import Decision
from channelkit.platforms.common.posted_forms import (
    CLAIMABLE,
    TEXT_ALREADY_ANSWERED,
    PostedForm,
    PostedForms,
)
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
MAX_CONTENT = 2_000


@dataclass(eq=False, kw_only=True)
class Form(PostedForm):
    """One presented form: the captured request, its choices so far and its message."""

    picks: dict[int, str] = field(default_factory=dict)  # question index -> answer

    @property
    def message_id(self) -> str | None:
        """The posted message's id (`PostedForm.message`), once known."""
        return self.message

    @message_id.setter
    def message_id(self, value: str | None) -> None:
        self.message = value


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


class DiscordQuestions(PostedForms[Form]):
    """Presents forms and decides their clicks; see the module docstring.

    `submit(key, fn)` runs `fn` on a per-key serial lane of the pool; the scheduler
    arms the expiry; `registry` holds the live forms (key: the token) and their
    tombstones (token -> (request id, terminal state)). `texts_for(person)` gives the
    catalog texts a person reads (the channel sets its `messages_for`).
    """

    platform = "discord"

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

        def post() -> str:
            texts = self.texts_for(context.owner.id)  # the form in its owner's language
            return str(
                self._api.post(
                    form.channel,
                    form_text(context, texts),
                    form_components(context, form.token, texts),
                )
            )

        return self._show(form, post)

    # -- clicks (receiving thread: correlate, authorize, validate, claim; no network) -----
    def decide(self, click: ComponentClick) -> Decision | None:
        """A form's click or modal submit: None when it is not one of ours, else its
        `Decision` (its body the interaction response)."""
        if not click.custom_id.startswith(PREFIX):
            return None
        token, _, what = click.custom_id[len(PREFIX) :].partition(":")
        form = self.registry.get(token)
        if form is None or form.state.state not in CLAIMABLE:
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
        # a click before the post answered names the form's message
        claimed = "cancel" if what == "cancel" else "submit"
        if not self._claim(form, claimed, answers, click.message_id or None):
            return Decision.ignored(deferred_update())
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

    # -- the platform's calls (the form's lane) -----------------------------------------
    def _edit_terminal(
        self,
        form: Form,
        message: str,
        state: str,
        answers: dict[str, str] | None,
        texts: Messages,
    ) -> None:
        """Edit the message to its end state, components removed."""
        self._api.edit(
            form.channel, message, terminal_text(form.context, state, answers, texts), []
        )

    def _post_notice(self, form: Form, text: str) -> None:
        self._api.post(form.channel, text)


if TYPE_CHECKING:
    from channelkit.platforms.common.contract import QuestionSurface

    def _satisfies_the_contract(presenter: DiscordQuestions) -> None:
        """mypy: the presenter is Discord's question surface."""
        questions: QuestionSurface[UserInputRequestContext] = presenter
        del questions
