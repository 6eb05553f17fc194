"""Telegram approval buttons: an ordinary tool permission as an inline keyboard.

``present_permission_request`` sends the permission prompt (the same text as the text
prompt, so ``/approve``, ``/approve-always`` and ``/deny`` keep working) with one button
per option the agent offers, in its order (allow once, always allow, a mode switch,
reject...). Only the run owner may press them; anyone else gets a short refusal and
nothing changes.

Callback data is ``ca:<token>:<index>``: an 11-character opaque random token mapped to
the live request in the channel's card registry, and the option's index (at most
`MAX_BUTTONS` options; longer lists stay on the text prompt). The longest value is
17 bytes, well within Telegram's 64.

One-shot: the first valid owner tap claims the keyboard under the registry lock and
answers through the request's one-shot responder on the pool; later taps are answered
"already being processed" or, after the end, "no longer active" (a tombstone remembers
the token for 10 minutes). Buttons and commands race on the same responder, so exactly
one wins. The message is edited in place (keyboard removed) from the request's
settlement, whoever won: the chosen option (``✅ Allow``, ``❌ Reject``), ``✖️
Cancelled`` or ``⌛ Expired`` at the permission lifetime.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from channelkit.core.approvals import PermissionRequestContext, describe_outcome
from channelkit.core.catalog import en
from channelkit.platforms.common.approval_buttons import ApprovalButtons
from channelkit.platforms.common.contract import Decision, DecisionOutcome
from channelkit.platforms.telegram.ingress import TgCallbackQuery
from channelkit.platforms.telegram.questions import QuestionApi, topic_of

__all__ = [
    "APPROVAL_PREFIX",
    "MAX_BUTTONS",
    "TelegramApprovalPresenter",
    "approval_keyboard",
    "parse_approval_callback",
]

logger = logging.getLogger(__name__)

APPROVAL_PREFIX = "ca"
MAX_BUTTONS = 10
_CALLBACK_RE = re.compile(r"^ca:([A-Za-z0-9_-]{11}):(\d)$")
MAX_MESSAGE_CHARS = 4096

TEXT_NOT_OWNER = en("owner.answer")
TEXT_STALE = en("request.stale")
TEXT_UNKNOWN = en("button.unknown")
TEXT_WRONG_MESSAGE = en("request.wrong_message")
TEXT_BUSY = en("request.busy")
TEXT_SENT = en("request.sent")


def approval_keyboard(token: str, ctx: PermissionRequestContext) -> dict[str, Any]:
    """One button per option, in the agent's order (one per row)."""
    rows = []
    for index, option in enumerate(ctx.options):
        label = option.name.strip() or option.option_id
        label = label if len(label) <= 60 else label[:59] + "…"
        rows.append([{"text": label, "callback_data": f"{APPROVAL_PREFIX}:{token}:{index}"}])
    return {"inline_keyboard": rows}


def parse_approval_callback(data: str | None) -> tuple[str, int] | None:
    """``(token, option index)`` of an approval button, else None."""
    match = _CALLBACK_RE.match(data) if isinstance(data, str) else None
    return (match.group(1), int(match.group(2))) if match else None


@dataclass(eq=False)
class _Approval:
    token: str
    ctx: PermissionRequestContext
    chat_id: int | str
    thread_id: int | None
    owner_id: str
    text: str
    message_id: int | None = None
    claimed: bool = False
    settled: bool = False
    finalized: bool = False


class TelegramApprovalPresenter(ApprovalButtons[_Approval]):
    """The live approval keyboards of one channel; see the module docstring.

    ``submit(key, fn)`` runs ``fn`` on a per-key serial queue of the pool (never on the
    web thread).
    """

    _what = "telegram approval"
    _logger = logger

    _api: QuestionApi

    def present(
        self,
        ctx: PermissionRequestContext,
        text: str | None = None,
        chat_id: int | str | None = None,
        thread_id: int | None = None,
    ) -> str:
        """Send the prompt with its keyboard; ``presented`` or ``unsupported``.

        ``text`` defaults to ``prompt(ctx)`` (the constructor's), ``chat_id`` /
        ``thread_id`` to the request's own chat and forum topic."""
        text = self._prompt_text(ctx, text)
        if chat_id is None:
            chat_id, thread_id = ctx.target.chat_id, topic_of(ctx.target.thread_id)
        if not 1 <= len(ctx.options) <= MAX_BUTTONS:
            return "unsupported"
        token = secrets.token_urlsafe(8)
        record = _Approval(
            token=token,
            ctx=ctx,
            chat_id=chat_id,
            thread_id=thread_id,
            owner_id=str(ctx.owner.id),
            text=text[:MAX_MESSAGE_CHARS],
        )
        if not self._register(record):
            return "unsupported"
        return self._deliver(
            record,
            lambda: self._api.send_message(
                chat_id,
                record.text,
                reply_markup=approval_keyboard(token, ctx),
                message_thread_id=thread_id,
            ),
            "telegram approval keyboard failed",
        )

    def handle_callback(self, query: TgCallbackQuery) -> bool:
        """`decide_callback()` with its work queued at once (no ACK to wait for);
        False when the data is not an approval button's."""
        decision = self.decide_callback(query)
        if decision is None:
            return False
        decision.run_after()
        return True

    def decide_callback(self, query: TgCallbackQuery) -> Decision | None:
        """Correlate, authorize and claim a tap (web thread). None when the data is not
        an approval button's; else a `Decision` whose work queues the callback's answer
        and, for a claimed tap, the responder (run it after the ACK)."""
        data = query.data or ""
        if not data.startswith(APPROVAL_PREFIX + ":"):
            return None
        parsed = parse_approval_callback(data)
        reply: str = TEXT_UNKNOWN
        respond: Callable[[], None] | None = None
        if parsed is not None:
            token, index = parsed
            with self._lock:
                record = self.registry.get(token)
                if record is None:
                    if self.registry.tombstone(token) is not None:
                        reply = TEXT_STALE
                else:
                    reply, respond = self._claim(record, index, query)
        shown = self.texts_for(str(query.from_user.id)).text(reply)  # the tapper's language
        answer = partial(self._submit, f"cq:{query.id}", partial(self._answer, query.id, shown))
        if respond is not None:
            return Decision.ack().then(answer, respond)
        outcome: DecisionOutcome = "forbidden" if reply == TEXT_NOT_OWNER else "ignored"
        return Decision.ack(outcome=outcome).then(answer)

    def _claim(
        self, record: _Approval, index: int, query: TgCallbackQuery
    ) -> tuple[str, Callable[[], None] | None]:
        """The tap's answer text and, when it claimed the record, the hand-off of the
        responder to the pool."""
        message = query.message
        if message is None or str(message.chat.id) != str(record.chat_id):
            return TEXT_WRONG_MESSAGE, None
        if record.message_id is not None and message.message_id != record.message_id:
            return TEXT_WRONG_MESSAGE, None
        if str(query.from_user.id) != record.owner_id:
            return TEXT_NOT_OWNER, None
        if index >= len(record.ctx.options):
            return TEXT_UNKNOWN, None
        taken = self._take(record)
        if taken is not None:
            return (TEXT_STALE if taken == "stale" else TEXT_BUSY), None
        option_id = record.ctx.options[index].option_id
        respond = partial(self._respond, record, option_id)
        return TEXT_SENT, partial(self._submit, record.token, respond)

    def _answer(self, query_id: str, text: str | None) -> None:
        try:
            self._api.answer_callback_query(query_id, text)
        except Exception as exc:
            logger.warning("telegram answerCallbackQuery failed: %s", type(exc).__name__)

    def _sent_ref(self, record: _Approval) -> int | None:
        return record.message_id

    def _set_sent_ref(self, record: _Approval, ref: Any) -> None:
        record.message_id = ref

    def _show_outcome(self, record: _Approval, ref: Any) -> None:
        label = describe_outcome(record.ctx.outcome(), self.texts_for(record.owner_id))
        text = self.settled_text(record.text, label, MAX_MESSAGE_CHARS)
        try:
            self._api.edit_message_text(record.chat_id, ref, text)
        except Exception as exc:
            logger.warning("telegram approval edit failed: %s", type(exc).__name__)


if TYPE_CHECKING:
    from channelkit.platforms.common.contract import ApprovalSurface

    def _satisfies_the_contract(presenter: TelegramApprovalPresenter) -> None:
        """mypy: the presenter is Telegram's question surface for approvals."""
        approvals: ApprovalSurface = presenter
        del approvals
