"""Feishu approval buttons: an ordinary tool permission as an interactive card.

``present_permission_request`` sends one card (schema 2.0, ``update_multi``) with the
tool call's title and explanation, a hint that ``/approve`` and ``/deny`` work too, and
one button per option the agent offers, in its order (allow once, always allow, a mode
switch, reject...). A button's callback value is ``{"action": "ck_perm", "token":
<opaque token>, "option": <index>}``; the token maps to the live request in the
channel's card registry.

Only the run owner (the operator's ``open_id``, read from the verified callback, never
from the value) may answer, in the card's own chat and message; anyone else gets a
refusal toast and nothing changes. One-shot: the first valid click claims the card under
the registry lock and answers through the request's one-shot responder on the pool
after the ACK; later clicks get "already being answered" or "no longer active"
(tombstone). Buttons and commands race on the same responder, so exactly one wins. The
card is patched in place from the request's settlement, whoever won: the chosen option
(``✅ Allow``, ``❌ Reject``), ``✖️ Cancelled`` or ``⌛ Expired`` at the permission
lifetime.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from channelkit.core.approvals import PermissionRequestContext, describe_outcome
from channelkit.core.catalog import CATALOG
from channelkit.platforms.common.approval_buttons import ApprovalButtons
from channelkit.platforms.common.contract import Decision, DecisionOutcome
from channelkit.platforms.common.registry import CardRegistry
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.platforms.feishu.cards import CARD_LOCALES, escape_markdown
from channelkit.platforms.feishu.ingress import CardAction

__all__ = [
    "APPROVAL_ACTION",
    "MAX_BUTTONS",
    "FeishuApprovalPresenter",
    "approval_card",
    "approval_terminal_card",
]

logger = logging.getLogger(__name__)

APPROVAL_ACTION = "ck_perm"
MAX_BUTTONS = 10

#: The approval card texts per card language: the catalog's ``approval.*`` entries
#: (`channelkit.core.catalog`), e.g. ``TEXTS["zh"]["title"] == "需要授权"``.
TEXTS = {
    language: {
        key.removeprefix("approval."): text
        for key, text in CATALOG[locale].items()
        if key.startswith("approval.")
    }
    for language, locale in CARD_LOCALES.items()
}


def _texts(language: str) -> Mapping[str, str]:
    return TEXTS.get(language, TEXTS["en"])


def _body(ctx: PermissionRequestContext) -> dict[str, Any]:
    return {
        "tag": "markdown",
        "content": f"**{escape_markdown(ctx.title)}**\n\n{escape_markdown(ctx.explanation)}",
    }


def approval_card(token: str, ctx: PermissionRequestContext, language: str) -> dict[str, Any]:
    """The live card: title, explanation, hint, one button per agent option."""
    s = _texts(language)
    elements: list[dict[str, Any]] = [_body(ctx), {"tag": "markdown", "content": s["hint"]}]
    for index, option in enumerate(ctx.options):
        kind = str(option.kind or "")
        elements.append(
            {
                "tag": "button",
                "name": f"{APPROVAL_ACTION}_{token}_{index}",
                "text": {"tag": "plain_text", "content": option.name.strip() or option.option_id},
                "type": _button_type(kind),
                "behaviors": [
                    {
                        "type": "callback",
                        "value": {"action": APPROVAL_ACTION, "token": token, "option": index},
                    }
                ],
            }
        )
    return {
        "schema": "2.0",
        "config": {"update_multi": True, "summary": {"content": s["title"]}},
        "header": {"title": {"tag": "plain_text", "content": s["title"]}, "template": "orange"},
        "body": {"elements": elements},
    }


def approval_terminal_card(ctx: PermissionRequestContext, language: str) -> dict[str, Any]:
    """The read-only card in its end state (buttons gone)."""
    s = _texts(language)
    outcome = ctx.outcome()
    label = describe_outcome(outcome)  # as Feishu cards always showed it (English)
    template = "green" if outcome is not None and outcome.allowed else "grey"
    return {
        "schema": "2.0",
        "config": {"update_multi": True, "summary": {"content": label}},
        "header": {"title": {"tag": "plain_text", "content": s["title"]}, "template": template},
        "body": {"elements": [_body(ctx), {"tag": "markdown", "content": f"**{label}**"}]},
    }


@dataclass(eq=False)
class _Approval:
    token: str
    ctx: PermissionRequestContext
    chat_id: str
    owner_id: str
    message_id: str | None = None
    claimed: bool = False
    settled: bool = False
    finalized: bool = False


class FeishuApprovalPresenter(ApprovalButtons[_Approval]):
    """The live approval cards of one channel; see the module docstring.

    ``submit(key, fn)`` runs ``fn`` on a per-key serial queue of the pool.
    """

    _what = "feishu approval"
    _logger = logger
    _api: FeishuApi

    def __init__(
        self,
        api: FeishuApi,
        *,
        submit: Callable[[Hashable, Callable[[], Any]], Any],
        clock: Any,
        language: str = "zh",
        registry: CardRegistry[Any, Any] | None = None,
        thread_anchor: Callable[[str, str | None], str | None] | None = None,
    ) -> None:
        super().__init__(api, submit=submit, clock=clock, registry=registry)
        self._thread_anchor = thread_anchor
        self._language = language

    def present(self, ctx: PermissionRequestContext) -> str:
        """Send the card; ``presented`` or ``unsupported`` (text prompt)."""
        if not 1 <= len(ctx.options) <= MAX_BUTTONS:
            return "unsupported"
        token = secrets.token_urlsafe(12)
        record = _Approval(token, ctx, ctx.target.chat_id, str(ctx.owner.id))
        if not self._register(record):
            return "unsupported"
        into = None  # a thread's request: its card goes into the thread
        if self._thread_anchor is not None:
            into = self._thread_anchor(record.chat_id, ctx.target.thread_id)
        return self._deliver(
            record,
            lambda: self._api.send_card(
                record.chat_id, approval_card(token, ctx, self._language), reply_to=into
            ),
            "feishu approval card failed",
        )

    def handle_action(self, action: CardAction) -> Decision:
        """Correlate, authorize and claim a click (web thread): the ACK body (a toast) and
        the hand-off of the answer to the pool after the ACK."""
        s = _texts(self._language)
        token, index = action.value.get("token"), action.value.get("option")
        if not isinstance(token, str) or not isinstance(index, int) or isinstance(index, bool):
            return Decision.ignored(_toast("error", s["unknown"]))
        with self._lock:
            record = self.registry.get(token)
            if record is None:
                stale = self.registry.tombstone(token) is not None
                key = "stale" if stale else "unknown"
                return Decision.ignored(_toast("info" if stale else "error", s[key]))
            refused = self._refusal(record, index, action) or self._take(record)
            if refused is not None:
                outcome: DecisionOutcome = "forbidden" if refused == "not_owner" else "ignored"
                return Decision.ack(_toast("error", s[refused]), outcome=outcome)
            option_id = record.ctx.options[index].option_id
            job = partial(self._respond, record, option_id)
        return Decision.ack(_toast("success", s["sent"])).then(partial(self._submit, token, job))

    @staticmethod
    def _refusal(record: _Approval, index: int, action: CardAction) -> str | None:
        """Why the click may not claim ``record`` (its toast's key), else None."""
        if action.operator_open_id is None or action.operator_open_id != record.owner_id:
            return "not_owner"
        if action.open_chat_id is not None and action.open_chat_id != record.chat_id:
            return "unknown"
        if (
            record.message_id is not None
            and action.open_message_id is not None
            and action.open_message_id != record.message_id
        ):
            return "unknown"
        if not 0 <= index < len(record.ctx.options):
            return "unknown"
        return None

    def _sent_ref(self, record: _Approval) -> str | None:
        return record.message_id

    def _set_sent_ref(self, record: _Approval, ref: Any) -> None:
        record.message_id = ref

    def _show_outcome(self, record: _Approval, ref: Any) -> None:
        try:
            self._api.patch_card(ref, approval_terminal_card(record.ctx, self._language))
        except Exception as exc:
            logger.warning("feishu approval card patch failed: %s", type(exc).__name__)


def _button_type(kind: str) -> str:
    if kind.startswith("reject"):
        return "danger"
    return "primary" if kind == "allow_once" else "default"


def _toast(kind: str, content: str) -> dict[str, Any]:
    return {"toast": {"type": kind, "content": content}}


if TYPE_CHECKING:
    from channelkit.platforms.common.contract import ApprovalSurface

    def _satisfies_the_contract(presenter: FeishuApprovalPresenter) -> None:
        """mypy: the presenter is Feishu's question surface for approvals."""
        approvals: ApprovalSurface = presenter
        del approvals
