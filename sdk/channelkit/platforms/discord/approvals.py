"""Discord approval buttons: an ordinary tool permission as a message with buttons.

`present` posts the permission prompt (the same text as the text prompt, so
`/approve`, `/approve-always` and `/deny` keep working) in the request's channel, with
one button per option the agent offers, in its order (at most `MAX_BUTTONS`; longer
lists stay on the text prompt). Each button's `custom_id` is `ck:ap:<token>:<index>`:
an opaque random token mapped to the live request in the channel's card registry
(never the request id).

Only the run's owner may press them; anyone else gets an ephemeral notice (the
interaction response itself) and nothing changes. One-shot: the first valid owner press
claims the request under the registry lock (a deferred update answers it) and answers
through the request's one-shot responder on the pool; later presses change nothing (a
tombstone remembers the token for 10 minutes). The message is edited in place (buttons
removed) from the request's settlement, whoever won: the chosen option, Cancelled or
Expired.
"""

from __future__ import annotations

import logging
import re
import secrets
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from channelkit.core.approvals import PermissionRequestContext, describe_outcome
from channelkit.core.catalog import en
from channelkit.platforms.common.approval_buttons import ApprovalButtons
from channelkit.platforms.common.contract import Decision
from channelkit.platforms.discord.ingress import (
    ComponentClick,
    clicker_texts,
    deferred_update,
    ephemeral,
)

__all__ = ["ACTION_PREFIX", "MAX_BUTTONS", "TEXT_NOT_OWNER", "DiscordApprovals"]

logger = logging.getLogger(__name__)

ACTION_PREFIX = "ck:ap:"
#: Buttons per message: two action rows of five.
MAX_BUTTONS = 10
MAX_TEXT = 2000
#: told (in the clicking person's language) to anyone but the owner who presses a button
TEXT_NOT_OWNER = en("owner.answer")
_CUSTOM_ID = re.compile(r"^ck:ap:([A-Za-z0-9_-]{16}):(\d)$")


def approval_components(token: str, ctx: PermissionRequestContext) -> list[dict[str, Any]]:
    """Action rows of one button per agent option, in the agent's order."""
    buttons = []
    for index, option in enumerate(ctx.options):
        kind = str(option.kind or "")
        style = 2  # secondary; the first allow is green (3), a reject red (4)
        if kind.startswith("allow") and index == 0:
            style = 3
        elif kind.startswith("reject"):
            style = 4
        label = (option.name or option.option_id).strip() or " "
        buttons.append(
            {
                "type": 2,
                "style": style,
                "label": label[:80],
                "custom_id": f"{ACTION_PREFIX}{token}:{index}",
            }
        )
    return [{"type": 1, "components": buttons[i : i + 5]} for i in range(0, len(buttons), 5)]


@dataclass(eq=False)
class _Approval:
    token: str
    ctx: PermissionRequestContext
    channel: str
    text: str
    message_id: str | None = None
    claimed: bool = False
    settled: bool = False
    finalized: bool = False


class DiscordApprovals(ApprovalButtons[_Approval]):
    """The live approval messages of one channel; see the module docstring.

    `submit(key, fn)` runs `fn` on a per-key serial lane of the pool (never on the
    receiving thread). `texts_for(person)` gives the catalog texts a person reads (the
    channel sets its `messages_for`): the settled label is in the owner's language.
    """

    _what = "discord approval"
    _logger = logger

    def present(self, ctx: PermissionRequestContext, text: str | None = None) -> str:
        """Post the prompt with its buttons; `presented` or `unsupported`."""
        text = self._prompt_text(ctx, text)
        if not 1 <= len(ctx.options) <= MAX_BUTTONS:
            return "unsupported"
        token = secrets.token_urlsafe(12)
        record = _Approval(token, ctx, ctx.target.chat_id, text[:MAX_TEXT] or " ")
        if not self._register(record):
            return "unsupported"
        return self._deliver(
            record,
            lambda: self._api.post(record.channel, record.text, approval_components(token, ctx)),
            "discord approval buttons failed",
        )

    def decide(self, click: ComponentClick) -> Decision | None:
        """An approval button's click: None when it is not one of ours, else its
        `Decision` (its body the interaction response)."""
        if not click.custom_id.startswith(ACTION_PREFIX):
            return None
        match = _CUSTOM_ID.match(click.custom_id)
        if match is None:
            return Decision.ignored(deferred_update())
        token, index = match.group(1), int(match.group(2))
        with self._lock:
            record = self.registry.get(token)
            if record is None or record.settled or index >= len(record.ctx.options):
                return Decision.ignored(deferred_update())
            if click.message_id not in (None, record.message_id) and record.message_id:
                return Decision.ignored(deferred_update())
            if click.user_id != str(record.ctx.owner.id):  # in the presser's language
                refusal = clicker_texts(click, self.texts_for).text(TEXT_NOT_OWNER)
                return Decision.ack(ephemeral(refusal), outcome="forbidden")
            if self._take(record) is not None:
                return Decision.ignored(deferred_update())
            option_id = record.ctx.options[index].option_id
        respond = partial(self._respond, record, option_id)
        return Decision.ack(deferred_update()).then(partial(self._submit, token, respond))

    def _sent_ref(self, record: _Approval) -> str | None:
        return record.message_id

    def _set_sent_ref(self, record: _Approval, ref: Any) -> None:
        record.message_id = ref

    def _show_outcome(self, record: _Approval, ref: Any) -> None:
        label = describe_outcome(record.ctx.outcome(), self.texts_for(str(record.ctx.owner.id)))
        text = self.settled_text(record.text, label, MAX_TEXT)
        try:
            self._api.edit(record.channel, ref, text, [])
        except Exception as exc:
            logger.warning("discord approval update failed: %s", type(exc).__name__)


if TYPE_CHECKING:
    from channelkit.platforms.common.contract import ApprovalSurface

    def _satisfies_the_contract(presenter: DiscordApprovals) -> None:
        """mypy: the presenter is Discord's question surface for approvals."""
        approvals: ApprovalSurface = presenter
        del approvals
