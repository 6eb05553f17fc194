"""Slack native questions: one Block Kit form bound to one captured input request.

``present`` posts one message (in the request's thread) with, per question, its text,
``radio_buttons`` (single choice) or ``checkboxes`` (multi-select) with the options,
and an optional "Other" ``plain_text_input``; then Submit and Cancel buttons. Choosing
options sends ``block_actions`` that are only acknowledged: the form's ``state`` is
read when Submit is pressed (Other text wins over the choice; multi-select answers are
joined with ", "). A question without an answer gets an ephemeral hint and nothing
changes.

Only the request's owner can answer; anyone else gets one ephemeral notice per form.
The answer goes to the original request through the one-shot
:meth:`~channelkit.core.UserInputRequestContext.respond` on the pool (after the ACK),
and the form is updated in place to its terminal state: submitted (with the answers),
cancelled or expired. The terminal state is set once (compare-and-set). Expiry runs on
the scheduler ``EXPIRY_MARGIN`` before core's own deadline; a request settled elsewhere
(the run ended, core's timeout) closes its form as cancelled.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from channelkit.core import UserInputRequestContext
from channelkit.platforms.common import StateCell, first_notice, question_deadline

__all__ = [
    "CANCEL_ACTION",
    "SUBMIT_ACTION",
    "TEXT_ANSWER_ALL",
    "TEXT_NOT_OWNER",
    "SlackQuestions",
]

logger = logging.getLogger(__name__)

SUBMIT_ACTION = "ck:q:submit"
CANCEL_ACTION = "ck:q:cancel"
CHOICE_ACTION = "ck:q:choice"
OTHER_ACTION = "ck:q:other"
TEXT_NOT_OWNER = "Only the person who asked can answer this."
TEXT_ANSWER_ALL = "Answer every question first."
TEXT_TERMINAL = {"submitted": "Submitted", "cancelled": "Cancelled", "expired": "Expired"}
MAX_LIVE_FORMS = 1_000

Post = Callable[[str, str, "str | None", list[dict[str, Any]]], "str | None"]


@dataclass(eq=False)
class Form:
    """One presented form."""

    context: UserInputRequestContext
    token: str
    channel: str
    anchor: str | None
    ts: str | None = None
    state: StateCell[str] = field(default_factory=lambda: StateCell("pending"))
    noticed: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    timer: Any = None


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text[:75] or " ", "emoji": True}


def form_blocks(context: UserInputRequestContext, token: str) -> list[dict[str, Any]]:
    """The pending form's blocks."""
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
                "label": _plain("Other"),
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
                    "text": _plain("Submit"),
                    "style": "primary",
                    "value": token,
                },
                {
                    "type": "button",
                    "action_id": CANCEL_ACTION,
                    "text": _plain("Cancel"),
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
    context: UserInputRequestContext, state: str, answers: Mapping[str, str] | None
) -> tuple[str, list[dict[str, Any]]]:
    """The form's terminal text and blocks (no inputs, no buttons)."""
    label = TEXT_TERMINAL.get(state, state)
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


class SlackQuestions:
    """Presents forms and handles their ``block_actions``; see the module docstring."""

    def __init__(
        self,
        api: Any,
        *,
        submit: Callable[[Callable[[], Any]], Any],
        scheduler: Any,
        clock: Any,
        timeout_s: float,
    ) -> None:
        self._api = api
        self._submit = submit
        self._scheduler = scheduler
        self._clock = clock
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._forms: dict[str, Form] = {}

    def state_of(self, request_id: str) -> str | None:
        with self._lock:
            for form in self._forms.values():
                if form.context.request_id == request_id:
                    return form.state.state
        return None

    def live_count(self) -> int:
        with self._lock:
            return sum(1 for f in self._forms.values() if f.state.state == "pending")

    def present(self, context: UserInputRequestContext, anchor: str | None) -> str:
        """Post the form; ``"presented"`` or ``"unsupported"`` (posting failed)."""
        token = secrets.token_urlsafe(12)
        form = Form(context, token, context.target.chat_id, anchor)
        text = "; ".join(q.question for q in context.questions)[:3000] or "Question"
        try:
            form.ts = self._api.post(form.channel, text, anchor, form_blocks(context, token))
        except Exception as exc:
            logger.warning("slack question form could not be posted: %s", type(exc).__name__)
            return "unsupported"
        with self._lock:
            if len(self._forms) >= MAX_LIVE_FORMS:
                oldest = next(iter(self._forms))
                self._forms.pop(oldest)
            self._forms[token] = form
        deadline = question_deadline(self._clock.now(), self._timeout_s, context)
        form.timer = self._scheduler.call_later(
            max(0.0, deadline - self._clock.now()), lambda: self._submit(lambda: self._expire(form))
        )
        context.on_settled(lambda _reason: self._settled_elsewhere(form))
        return "presented"

    def handle_action(
        self, action: Mapping[str, Any], payload: Mapping[str, Any], after: list[Callable[[], None]]
    ) -> bool:
        """A ``block_actions`` action of a form: True when it was one of ours."""
        action_id = str(action.get("action_id") or "")
        if not action_id.startswith("ck:q:"):
            return False
        if action_id not in (SUBMIT_ACTION, CANCEL_ACTION):
            return True  # a choice or typed text: read from the state on Submit
        with self._lock:
            form = self._forms.get(str(action.get("value") or ""))
        if form is None or form.state.state != "pending":
            return True
        container = payload.get("container") or {}
        if container.get("message_ts") not in (None, form.ts):
            return True
        user = str((payload.get("user") or {}).get("id") or "")
        if user != form.context.owner.id:
            with form.lock:
                notice = first_notice(form.noticed, user)
            if notice:
                after.append(lambda: self._post(lambda: self._notice(form, user, TEXT_NOT_OWNER)))
            return True
        if action_id == CANCEL_ACTION:
            after.append(lambda: self._post(lambda: self._finish(form, "cancelled", None)))
            return True
        values = ((payload.get("state") or {}).get("values")) or {}
        answers = read_answers(form.context, values)
        if answers is None:
            after.append(lambda: self._post(lambda: self._notice(form, user, TEXT_ANSWER_ALL)))
            return True
        after.append(lambda: self._post(lambda: self._finish(form, "submitted", answers)))
        return True

    def _post(self, work: Callable[[], None]) -> None:
        self._submit(work)

    def _notice(self, form: Form, user: str, text: str) -> None:
        try:
            self._api.ephemeral(form.channel, user, text, form.anchor)
        except Exception as exc:
            logger.warning("slack ephemeral notice failed: %s", type(exc).__name__)

    def _finish(self, form: Form, state: str, answers: dict[str, str] | None) -> None:
        if not form.state.compare_and_set("pending", state):
            return
        if form.timer is not None:
            form.timer.cancel()
        if state == "submitted":
            response: dict[str, Any] = {
                "outcome": {"outcome": "selected", "optionId": form.context.submit_option_id},
                "answers": answers or {},
            }
        else:
            response = {"outcome": {"outcome": "cancelled"}}
        try:
            form.context.respond(response)
        except Exception as exc:
            logger.warning("slack question answer failed: %s", type(exc).__name__)
        self._render_terminal(form, state, answers)

    def _expire(self, form: Form) -> None:
        self._finish(form, "expired", None)

    def _settled_elsewhere(self, form: Form) -> None:
        if form.state.compare_and_set("pending", "cancelled"):
            if form.timer is not None:
                form.timer.cancel()
            self._submit(lambda: self._render_terminal(form, "cancelled", None))

    def _render_terminal(self, form: Form, state: str, answers: Mapping[str, str] | None) -> None:
        with self._lock:
            self._forms.pop(form.token, None)
        if form.ts is None:
            return
        text, blocks = terminal_blocks(form.context, state, answers)
        try:
            self._api.update(form.channel, form.ts, text, blocks)
        except Exception as exc:
            logger.warning("slack question form update failed: %s", type(exc).__name__)

    def close(self) -> None:
        with self._lock:
            forms = list(self._forms.values())
        for form in forms:
            if form.state.compare_and_set("pending", "expired"):
                if form.timer is not None:
                    form.timer.cancel()
                self._render_terminal(form, "expired", None)
