"""Slack approval buttons: an ordinary tool permission as a Block Kit message.

``present`` posts the permission prompt (the same text as the text prompt, so
``/approve``, ``/approve-always`` and ``/deny`` keep working) in the request's thread,
with one button per option the agent offers, in its order (allow once, always allow, a
mode switch, reject...). Each button's ``action_id`` is ``ck:ap:<index>`` and its
``value`` is ``<token>:<index>``: an opaque random token mapped to the live request in
the channel's card registry (never the request id). At most `MAX_BUTTONS`
options; longer lists stay on the text prompt.

Only the run owner may press them; anyone else gets one ephemeral notice per message
and nothing changes. One-shot: the first valid owner click claims the message under the
registry lock and answers through the request's one-shot responder on the pool (after
the ACK); later clicks change nothing (a tombstone remembers the token for 10 minutes).
Buttons and commands race on the same responder, so exactly one wins. The message is
updated in place (``chat.update``, buttons removed) from the request's settlement,
whoever won: the chosen option (``✅ Allow``, ``❌ Reject``), ``✖️ Cancelled`` or
``⌛ Expired`` at the permission lifetime.

Both the Events API and Socket Mode hand ``block_actions`` to the channel's one
interaction handler, which offers each action to `SlackApprovals.handle_action()`.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from channelkit.core.approvals import PermissionRequestContext, describe_outcome
from channelkit.core.catalog import en
from channelkit.platforms.common.approval_buttons import ApprovalButtons
from channelkit.platforms.common.claims import first_notice
from channelkit.platforms.common.contract import Decision

__all__ = [
    "ACTION_PREFIX",
    "MAX_BUTTONS",
    "TEXT_NOT_OWNER",
    "SlackApprovals",
    "approval_blocks",
    "parse_approval_value",
]

logger = logging.getLogger(__name__)

ACTION_PREFIX = "ck:ap:"
BLOCK_ID = "ckap_buttons"
MAX_BUTTONS = 10
MAX_TEXT = 3000
TEXT_NOT_OWNER = en("owner.answer")
_VALUE_RE = re.compile(r"^([A-Za-z0-9_-]{16}):(\d)$")


def _button_label(text: str) -> dict[str, Any]:
    text = text.strip() or " "
    return {"type": "plain_text", "text": text if len(text) <= 75 else text[:74] + "…"}


def approval_blocks(token: str, ctx: PermissionRequestContext, text: str) -> list[dict[str, Any]]:
    """The prompt's section and one button per agent option, in the agent's order."""
    buttons = []
    for index, option in enumerate(ctx.options):
        button: dict[str, Any] = {
            "type": "button",
            "action_id": f"{ACTION_PREFIX}{index}",
            "text": _button_label(option.name or option.option_id),
            "value": f"{token}:{index}",
        }
        kind = str(option.kind or "")
        if kind.startswith("allow") and index == 0:
            button["style"] = "primary"
        elif kind.startswith("reject"):
            button["style"] = "danger"
        buttons.append(button)
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": text[:MAX_TEXT] or " "}},
        {"type": "actions", "block_id": BLOCK_ID, "elements": buttons},
    ]


def parse_approval_value(value: object) -> tuple[str, int] | None:
    """``(token, option index)`` of an approval button's value, else None."""
    match = _VALUE_RE.match(value) if isinstance(value, str) else None
    return (match.group(1), int(match.group(2))) if match else None


@dataclass(eq=False)
class _Approval:
    token: str
    ctx: PermissionRequestContext
    channel: str
    anchor: str | None
    text: str
    ts: str | None = None
    claimed: bool = False
    settled: bool = False
    finalized: bool = False
    noticed: set[str] = field(default_factory=set)


class SlackApprovals(ApprovalButtons[_Approval]):
    """The live approval messages of one channel; see the module docstring.

    ``submit(key, fn)`` runs ``fn`` on a per-key serial queue of the pool (never on the
    web thread).
    """

    _what = "slack approval"
    _logger = logger

    def present(
        self,
        ctx: PermissionRequestContext,
        text: str | None = None,
        anchor: str | None = None,
    ) -> str:
        """Post the prompt with its buttons; ``presented`` or ``unsupported``.

        ``text`` defaults to ``prompt(ctx)`` (the constructor's), ``anchor`` to the
        request's thread, else the message that started the run."""
        text = self._prompt_text(ctx, text)
        if anchor is None:
            anchor = ctx.target.thread_id or ctx.message_id
        if not 1 <= len(ctx.options) <= MAX_BUTTONS:
            return "unsupported"
        token = secrets.token_urlsafe(12)
        record = _Approval(token, ctx, ctx.target.chat_id, anchor, text[:MAX_TEXT])
        with self._lock:
            if not self.registry.add(token, record):
                return "unsupported"
        return self._deliver(
            record,
            lambda: self._api.post(
                record.channel, record.text, anchor, approval_blocks(token, ctx, record.text)
            ),
            "slack approval buttons failed",
        )

    def decide_action(
        self, action: Mapping[str, Any], payload: Mapping[str, Any]
    ) -> Decision | None:
        """An approval button's ``block_actions`` action: None when it is not one of
        ours, else its `Decision` (the network work is its work after the ACK)."""
        if not str(action.get("action_id") or "").startswith(ACTION_PREFIX):
            return None
        parsed = parse_approval_value(action.get("value"))
        if parsed is None:
            return Decision.ignored()
        token, index = parsed
        user = str((payload.get("user") or {}).get("id") or "")
        message_ts = (payload.get("container") or {}).get("message_ts")
        with self._lock:
            record = self.registry.get(token)
            if record is None or record.settled:
                return Decision.ignored()  # ended (tombstoned) or unknown: nothing changes
            if message_ts not in (None, record.ts) or index >= len(record.ctx.options):
                return Decision.ignored()
            if user != str(record.ctx.owner.id):
                if not first_notice(record.noticed, user):
                    return Decision.ignored()
                notify = partial(self._submit, f"n:{token}", partial(self._notice, record, user))
                return Decision.ack(outcome="forbidden").then(notify)
            if record.claimed:
                return Decision.ignored()
            record.claimed = True
            option_id = record.ctx.options[index].option_id
        respond = partial(self._respond, record, option_id)
        return Decision.ack().then(partial(self._submit, token, respond))

    def _notice(self, record: _Approval, user: str) -> None:
        try:
            refusal = self.texts_for(user).text(TEXT_NOT_OWNER)  # in the presser's language
            self._api.ephemeral(record.channel, user, refusal, record.anchor)
        except Exception as exc:
            logger.warning("slack ephemeral notice failed: %s", type(exc).__name__)

    def _sent_ref(self, record: _Approval) -> str | None:
        return record.ts

    def _set_sent_ref(self, record: _Approval, ref: Any) -> None:
        record.ts = ref

    def _show_outcome(self, record: _Approval, ref: Any) -> None:
        label = describe_outcome(record.ctx.outcome(), self.texts_for(str(record.ctx.owner.id)))
        text = self.settled_text(record.text, label, MAX_TEXT)
        body = text[: -len(label) - 2] or " "  # the request without its commands
        blocks: list[dict[str, Any]] = [
            {"type": "section", "text": {"type": "mrkdwn", "text": body}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": label}]},
        ]
        try:
            self._api.update(record.channel, ref, text, blocks)
        except Exception as exc:
            logger.warning("slack approval update failed: %s", type(exc).__name__)


if TYPE_CHECKING:
    from channelkit.platforms.common.contract import ApprovalSurface

    def _satisfies_the_contract(presenter: SlackApprovals) -> None:
        """mypy: the presenter is Slack's question surface for approvals."""
        approvals: ApprovalSurface = presenter
        del approvals
