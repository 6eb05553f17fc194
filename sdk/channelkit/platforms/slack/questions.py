"""Slack native questions: one Block Kit form bound to one captured input request.

``present`` posts one message (in the request's thread) with, per question, its text,
``radio_buttons`` (single choice) or ``checkboxes`` (multi-select) with the options,
and an optional "Other" ``plain_text_input``; then Submit and Cancel buttons. Choosing
options sends ``block_actions`` that are only acknowledged: the form's ``state`` is
read when Submit is pressed (Other text wins over the choice; multi-select answers are
joined with ", "). A question without an answer gets an ephemeral hint and nothing
changes.

At most one form is active per session, owner and run
(`channelkit.platforms.common.native_input`): a second question of the same run
while the first form is live gets the text prompt (``unsupported``), and the first form
stays answerable. Forms live in the channel's card registry (1,000 at most: beyond
that, the text prompt), keyed by an opaque random token carried in the buttons' values,
never by the request id; an ended form leaves a tombstone, so late clicks change
nothing.

State machine, changed only by compare-and-set:
``reserved`` (registered, being posted) -> ``pending`` (posted, expiry armed) ->
``claimed`` (the owner's Submit or Cancel, on the web thread before the ACK) ->
``terminal`` (``submitted`` / ``cancelled`` / ``expired``, shown by updating the form in
place, once). A click on a form whose ``chat.postMessage`` has not answered yet counts
too (the token proves the form; the click names its ``ts``).

Only the request's owner can answer; anyone else gets one ephemeral notice per form.
The claimed answer goes to the original request through the one-shot
`respond()` on the form's serial lane
(after the ACK), and the form never shows success before that responder accepted it:
accepted -> ``Submitted`` with the answers (or ``Cancelled``); refused by the agent or
failed -> ``Expired``; another answer won (a ``/deny``, an answer typed as text, the
run's end) -> the winner's state (``Cancelled`` for a cancel or deny, ``Expired`` for
an answer given elsewhere), waiting for that settlement if it is still on its way (at
most until the form's deadline), and the conversation is told once that the question
was already answered (not when the run itself was cancelled). Expiry runs on the
scheduler ``EXPIRY_MARGIN`` before core's own deadline: the form shows ``Expired``
first, then the request is cancelled. A request settled elsewhere before any click
ends its form in the winner's state. Answers are never logged.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from channelkit.core import UserInputRequestContext
from channelkit.core.catalog import Messages, en, messages
from channelkit.platforms.common import first_notice, question_deadline
from channelkit.platforms.common.contract import Decision
from channelkit.platforms.common.posted_forms import (
    CLAIMABLE,
    TEXT_ALREADY_ANSWERED,
    PostedForm,
    PostedForms,
)

__all__ = [
    "CANCEL_ACTION",
    "SUBMIT_ACTION",
    "TEXT_ALREADY_ANSWERED",
    "TEXT_ANSWER_ALL",
    "TEXT_NOT_OWNER",
    "Form",
    "SlackQuestions",
]

logger = logging.getLogger(__name__)

SUBMIT_ACTION = "ck:q:submit"
CANCEL_ACTION = "ck:q:cancel"
CHOICE_ACTION = "ck:q:choice"
OTHER_ACTION = "ck:q:other"
#: The notification text of a form whose questions have no text.
TEXT_QUESTION = en("slack.question")
TEXT_NOT_OWNER = en("owner.answer_asked")
TEXT_ANSWER_ALL = en("question.answer_all")
TEXT_TERMINAL = {
    "submitted": en("label.submitted_plain"),
    "cancelled": en("label.cancelled_plain"),
    "expired": en("label.expired_plain"),
}


@dataclass(eq=False, kw_only=True)
class Form(PostedForm):
    """One presented form: the captured request, its thread and its message (``ts``)."""

    anchor: str | None  # the thread it is posted in
    noticed: set[str] = field(default_factory=set)  # non-owners told once

    @property
    def ts(self) -> str | None:
        """The posted message's ``ts`` (`PostedForm.message`), once known."""
        return self.message

    @ts.setter
    def ts(self, value: str | None) -> None:
        self.message = value


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text[:75] or " ", "emoji": True}


def form_blocks(
    context: UserInputRequestContext, token: str, texts: Messages | None = None
) -> list[dict[str, Any]]:
    """The pending form's blocks (labels in the locale of ``texts``, default English)."""
    m = texts or messages()
    blocks: list[dict[str, Any]] = []
    for index, question in enumerate(context.questions):
        title = question.question
        if question.header:
            title = f"*{question.header}*\n{title}"
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": title[:3000]}})
        options = [
            {"text": _plain(o.label), "value": str(n)} for n, o in enumerate(question.options[:10])
        ]
        if options:
            kind = "checkboxes" if question.multi_select else "radio_buttons"
            blocks.append(
                {
                    "type": "actions",
                    "block_id": f"ckq_{index}",
                    "elements": [
                        {"type": kind, "action_id": f"{CHOICE_ACTION}:{index}", "options": options}
                    ],
                }
            )
        blocks.append(
            {
                "type": "input",
                "block_id": f"ckq_other_{index}",
                "optional": True,
                "label": _plain(m.get("button.other")),
                "element": {"type": "plain_text_input", "action_id": f"{OTHER_ACTION}:{index}"},
            }
        )
    blocks.append(
        {
            "type": "actions",
            "block_id": "ckq_buttons",
            "elements": [
                {
                    "type": "button",
                    "action_id": SUBMIT_ACTION,
                    "text": _plain(m.get("button.submit")),
                    "style": "primary",
                    "value": token,
                },
                {
                    "type": "button",
                    "action_id": CANCEL_ACTION,
                    "text": _plain(m.get("button.cancel")),
                    "value": token,
                },
            ],
        }
    )
    return blocks


def read_answers(
    context: UserInputRequestContext, values: Mapping[str, Any]
) -> dict[str, str] | None:
    """The answers in the form's ``state.values``; None when a question has none."""
    answers: dict[str, str] = {}
    for index, question in enumerate(context.questions):
        other_block = values.get(f"ckq_other_{index}") or {}
        other = (other_block.get(f"{OTHER_ACTION}:{index}") or {}).get("value") or ""
        if isinstance(other, str) and other.strip():
            answers[question.answer_key] = other.strip()
            continue
        choice = (values.get(f"ckq_{index}") or {}).get(f"{CHOICE_ACTION}:{index}") or {}
        picked = choice.get("selected_options") or (
            [choice["selected_option"]] if choice.get("selected_option") else []
        )
        labels = []
        for option in picked:
            try:
                labels.append(question.options[int(option.get("value"))].label)
            except (TypeError, ValueError, IndexError, AttributeError):
                continue
        if not labels:
            return None
        answers[question.answer_key] = ", ".join(labels)
    return answers


def terminal_blocks(
    context: UserInputRequestContext,
    state: str,
    answers: Mapping[str, str] | None,
    texts: Messages | None = None,
) -> tuple[str, list[dict[str, Any]]]:
    """The form's terminal text and blocks (no inputs, no buttons); the label in the
    locale of ``texts`` (default English)."""
    label = (texts or messages()).text(TEXT_TERMINAL.get(state, state))
    lines = []
    for question in context.questions:
        answer = (answers or {}).get(question.answer_key)
        line = f"*{question.header or question.question}*"
        lines.append(line + (f": {answer}" if answer else ""))
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)[:3000] or " "}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": label}]},
    ]
    return label, blocks


class SlackQuestions(PostedForms[Form]):
    """Presents forms and handles their ``block_actions``; see the module docstring.

    ``submit(key, fn)`` runs ``fn`` on a per-key serial lane of the pool (a form's
    responder and projections stay ordered and never run on the web thread);
    ``scheduler.call_later`` arms the expiry; ``registry`` holds the live forms (key:
    the buttons' token; index ``scope``) and their tombstones (token -> (request id,
    terminal state)).
    """

    platform = "slack"

    def live_count(self) -> int:
        """Forms posted and not ended yet (pending or claimed)."""
        return sum(1 for f in self.live_forms() if f.state.state in ("pending", "claimed"))

    # -- presentation --------------------------------------------------------------------
    def present(self, context: UserInputRequestContext, anchor: str | None = None) -> str:
        """Post the form (on the run's worker; it blocks on the post): ``"presented"``,
        or ``"unsupported"`` (the text prompt) when the run already has a live form, too
        many forms are live, or posting failed. ``anchor``: the thread to post in
        (default: the request's thread, else the message that started the run)."""
        if anchor is None:
            anchor = context.target.thread_id or context.message_id
        form = Form(
            context=context,
            token=secrets.token_urlsafe(12),
            channel=context.target.chat_id,
            anchor=anchor,
            deadline=question_deadline(self._clock.now(), self._timeout_s, context),
            state=self.registry.state("reserved"),
        )

        def post() -> str:
            texts = self.texts_for(context.owner.id)
            text = "; ".join(q.question for q in context.questions)[:3000]
            blocks = form_blocks(context, form.token, texts)
            return str(
                self._api.post(form.channel, text or texts.text(TEXT_QUESTION), anchor, blocks)
            )

        return self._show(form, post)

    # -- clicks (web thread: correlate, authorize, validate, claim; no network) ----------
    def decide_action(
        self, action: Mapping[str, Any], payload: Mapping[str, Any]
    ) -> Decision | None:
        """A ``block_actions`` action of a form: None when it is not one of ours, else
        its `Decision` (the network work is its work after the ACK)."""
        action_id = str(action.get("action_id") or "")
        if not action_id.startswith("ck:q:"):
            return None
        if action_id not in (SUBMIT_ACTION, CANCEL_ACTION):
            return Decision.ignored()  # a choice or typed text: read from the state on Submit
        form = self.registry.get(str(action.get("value") or ""))
        if form is None or form.state.state not in CLAIMABLE:
            return Decision.ignored()  # unknown, ended (tombstoned) or already claimed
        clicked = (payload.get("container") or {}).get("message_ts")
        with self._lock:
            known = form.ts
        if known is not None and clicked not in (None, known):
            return Decision.ignored()
        user = str((payload.get("user") or {}).get("id") or "")
        if user != form.context.owner.id:
            with self._lock:
                notice = first_notice(form.noticed, user)
            if not notice:
                return Decision.ignored()
            refusal = self.texts_for(user).text(TEXT_NOT_OWNER)  # in the presser's language
            notify = self._later(form, f"n:{form.token}", self._notice, user, refusal)
            return Decision.ack(outcome="forbidden").then(notify)
        answers: dict[str, str] | None = None
        if action_id == SUBMIT_ACTION:
            values = ((payload.get("state") or {}).get("values")) or {}
            answers = read_answers(form.context, values)
            if answers is None:
                hint = self.texts_for(user).text(TEXT_ANSWER_ALL)
                notify = self._later(form, f"n:{form.token}", self._notice, user, hint)
                return Decision.ack(outcome="invalid").then(notify)
        what = "submit" if action_id == SUBMIT_ACTION else "cancel"
        # a click before chat.postMessage answered names the form's ts
        if not self._claim(form, what, answers, clicked if isinstance(clicked, str) else None):
            return Decision.ignored()  # a concurrent click or the settlement came first
        return Decision.ack().then(self._later(form, form.token, self._answer))

    def _notice(self, form: Form, user: str, text: str) -> None:
        try:
            self._api.ephemeral(form.channel, user, text, form.anchor)
        except Exception as exc:
            logger.warning("slack ephemeral notice failed: %s", type(exc).__name__)

    # -- the platform's calls (the form's lane) ----------------------------------------
    def _edit_terminal(
        self,
        form: Form,
        message: str,
        state: str,
        answers: dict[str, str] | None,
        texts: Messages,
    ) -> None:
        text, blocks = terminal_blocks(form.context, state, answers, texts)
        self._api.update(form.channel, message, text, blocks)

    def _post_notice(self, form: Form, text: str) -> None:
        self._api.post(form.channel, text, form.anchor)


if TYPE_CHECKING:
    from channelkit.platforms.common.contract import QuestionSurface

    def _satisfies_the_contract(presenter: SlackQuestions) -> None:
        """mypy: the presenter is Slack's question surface."""
        questions: QuestionSurface[UserInputRequestContext] = presenter
        del questions
