"""Every platform's outbound rate limits, written once as data (issue 28).

Each `LimitTable` maps the API operations that write into a chat to a *family*, and each
family to its limits (`OutboundLimit`: rate a second, burst, scope, source). Where a
platform publishes a number it is used as published, or a little below it; where it
publishes none, the limit is a conservative default marked so in ``source``, and an
operator can change it (`OutboundPacer.override()`). `attach_pacer()` hooks a platform's
generated client to one `OutboundPacer` (the same helper for every platform), so every
call of a family waits for its tokens in the store shared by all processes of the bot (a
streamed snapshot's write is told when to try again instead: `rate_limit.no_wait()`).

Telegram paces through `ChatRateLimiter` (its streamed previews coalesce without blocking
a thread): its limits are `channelkit.platforms.common.rate_limit.TELEGRAM_PRIVATE` and
``TELEGRAM_GROUP``, listed in `TELEGRAM` for the documentation only.

The operations docs/operations.md ("Rate limits") lists are these tables; a test keeps
the two in step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from channelkit.http.client import BaseClient
from channelkit.platforms.common.rate_limit import (
    DEFAULT_MAX_WAIT_S,
    TELEGRAM_GROUP,
    TELEGRAM_PRIVATE,
    LimitTable,
    OutboundLimit,
    OutboundPacer,
)
from channelkit.runtime import Clock
from channelkit.state import StateStore

__all__ = [
    "DINGTALK",
    "DISCORD",
    "FEISHU",
    "SLACK",
    "TABLES",
    "TELEGRAM",
    "WEIXIN",
    "attach_pacer",
]


def _field(body: Any, *names: str) -> str | None:
    """The first of ``names`` in the JSON ``body`` (a list gives its first item)."""
    if not isinstance(body, Mapping):
        return None
    for name in names:
        value = body.get(name)
        if isinstance(value, list):
            value = value[0] if value else None
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
            return str(value)
    return None


def _arg(args: Mapping[str, Any], name: str) -> str | None:
    value = args.get(name)
    return str(value) if value is not None and str(value) else None


# -- Slack ------------------------------------------------------------------------------------
_SLACK_TIERS = "docs.slack.dev/apis/web-api/rate-limits"
SLACK = LimitTable(
    platform="slack",
    operations={
        "chatPostMessage": "post",
        "chatPostEphemeral": "stream",
        "chatStartStream": "post",
        "chatUpdate": "update",
        "chatAppendStream": "stream",
        "chatStopStream": "stream",
        "pinsAdd": "pins",
        "pinsRemove": "pins",
    },
    limits={
        # "Posting messages: 1 per second [per channel]. Short bursts >1 allowed."
        "post": (OutboundLimit(1.0, 3.0, "chat", f"{_SLACK_TIERS}: 1 per second per channel"),),
        # chat.update: Tier 3, "50+ per minute" per method per workspace per app
        "update": (OutboundLimit(50 / 60, 10.0, "bot", f"{_SLACK_TIERS}: Tier 3, 50+/min"),),
        # chat.appendStream / stopStream (and chat.postEphemeral, a notice only one
        # person sees): Tier 4, "100+ per minute"
        "stream": (OutboundLimit(100 / 60, 20.0, "bot", f"{_SLACK_TIERS}: Tier 4, 100+/min"),),
        # pins.add / pins.remove: Tier 2, "20+ per minute"
        "pins": (OutboundLimit(20 / 60, 5.0, "bot", f"{_SLACK_TIERS}: Tier 2, 20+/min"),),
    },
    scope_of=lambda op, args, body: _field(body, "channel"),
)

# -- Discord ----------------------------------------------------------------------------------
_DISCORD_DOCS = "docs.discord.com/developers/topics/rate-limits"
DISCORD = LimitTable(
    platform="discord",
    operations={
        "createMessage": "message",
        "createMessageWithFiles": "message",
        "editMessage": "message",
        "pinMessage": "message",
    },
    limits={
        "message": (
            # per-route limits are not published ("should not be hard coded"); the
            # headers and 429s are still honoured (DiscordRateLimiter). Default: the
            # long-standing 5 writes per 5 s per channel.
            OutboundLimit(1.0, 5.0, "chat", f"{_DISCORD_DOCS}: unpublished; default 5 per 5 s"),
            # the global limit: 50 requests a second per bot
            OutboundLimit(50.0, 50.0, "bot", f"{_DISCORD_DOCS}: global 50 per second"),
        ),
    },
    scope_of=lambda op, args, body: _arg(args, "channel_id"),
)

# -- Feishu / Lark ----------------------------------------------------------------------------
_FEISHU_APP = OutboundLimit(
    1000 / 60, 50.0, "bot", "open.feishu.cn im/v1 message: 1000 per minute and 50 per second"
)
FEISHU = LimitTable(
    platform="feishu",
    operations={
        "createMessage": "send",
        "replyMessage": "send",
        "patchMessage": "patch",
        "createCard": "card",
        "updateCard": "card",
        "updateCardSettings": "card",
        "updateCardElementContent": "card",
    },
    limits={
        # "5 QPS per user, or per group shared by all bots in it" (a reply counts
        # against the message it answers: the chat is not in the call)
        "send": (
            OutboundLimit(5.0, 5.0, "chat", "open.feishu.cn im/v1/message/create: 5 QPS"),
            _FEISHU_APP,
        ),
        # a card's PATCH: "5 QPS per message"
        "patch": (
            OutboundLimit(5.0, 5.0, "resource", "open.feishu.cn im/v1/message/patch: 5 QPS"),
            _FEISHU_APP,
        ),
        # CardKit: "10 operations per second per card entity"
        "card": (
            OutboundLimit(10.0, 10.0, "resource", "open.feishu.cn cardkit-v1: 10 per s per card"),
            _FEISHU_APP,
        ),
    },
    scope_of=lambda op, args, body: (
        _field(body, "receive_id")
        if op == "createMessage"
        else _arg(args, "card_id") or _arg(args, "message_id")
    ),
)


def _dingtalk_scope(op: str, body: Any) -> str | None:
    """The conversation (or card) a DingTalk call writes: a card delivered into a group
    names it in ``openSpaceId`` (``dtv1.card//IM_GROUP.<conversation>``)."""
    if op == "createAndDeliverCard":
        space = _field(body, "openSpaceId") or ""
        for kind in ("IM_GROUP.", "IM_ROBOT."):
            if kind in space:
                return space.split(kind, 1)[1] or None
        return _field(body, "outTrackId")
    return _field(body, "openConversationId", "outTrackId", "userIds")


# -- DingTalk ---------------------------------------------------------------------------------
_DINGTALK_APP = OutboundLimit(
    20.0, 20.0, "bot", "open.dingtalk.com API throttling: 20 QPS per app per API (standard)"
)
DINGTALK = LimitTable(
    platform="dingtalk",
    operations={
        "sendRobotGroupMessage": "message",
        "batchSendRobotOtoMessages": "message",
        "createAndDeliverCard": "message",
        "streamingUpdateCard": "card",
        "updateCardInstance": "card",
    },
    limits={
        # "20 messages a minute" into a group (documented for a group's custom robot,
        # held 10 minutes past it; none is published for the app robot, which gets the
        # same as a conservative default), paced at 18 for drift
        "message": (
            OutboundLimit(18 / 60, 10.0, "chat", "open.dingtalk.com group robot: 20 per minute"),
            _DINGTALK_APP,
        ),
        # interactive card updates: no per-card number is published; default 5 a second
        "card": (
            OutboundLimit(5.0, 5.0, "resource", "unpublished; conservative default 5 per s"),
            _DINGTALK_APP,
        ),
    },
    scope_of=lambda op, args, body: _dingtalk_scope(op, body),
)

# -- Weixin (iLink) ---------------------------------------------------------------------------
WEIXIN = LimitTable(
    platform="weixin",
    operations={"sendMessage": "message"},
    limits={
        # the iLink bot protocol publishes no limit; default one message a second per
        # person, bursts of 5
        "message": (OutboundLimit(1.0, 5.0, "chat", "unpublished; conservative default"),),
    },
    scope_of=lambda op, args, body: _field(
        body.get("msg") if isinstance(body, Mapping) else None, "to_user_id"
    ),
)

# -- Telegram (paced by ChatRateLimiter; listed for the documentation) -------------------------
TELEGRAM = LimitTable(
    platform="telegram",
    operations={},
    limits={
        "private": (
            OutboundLimit(
                TELEGRAM_PRIVATE.rate,
                TELEGRAM_PRIVATE.burst,
                "chat",
                "core.telegram.org/bots/faq: about 1 message per second per chat",
            ),
        ),
        "group": (
            OutboundLimit(
                TELEGRAM_GROUP.rate,
                TELEGRAM_GROUP.burst,
                "chat",
                "core.telegram.org/bots/faq: 20 messages per minute per group",
            ),
        ),
    },
)

#: platform name -> its table
TABLES: dict[str, LimitTable] = {
    t.platform: t for t in (SLACK, DISCORD, FEISHU, DINGTALK, WEIXIN, TELEGRAM)
}


def attach_pacer(
    client: object,
    platform: str,
    *,
    clock: Clock,
    store: StateStore | None,
    max_wait_s: float = DEFAULT_MAX_WAIT_S,
) -> OutboundPacer:
    """Pace every call of ``client`` (a generated platform client: its ``pace`` hook; any
    other object, a test's stand-in, is not paced) by
    ``platform``'s table, buckets in ``store`` (None: this process only); returns the
    pacer (`OutboundPacer.override()` changes a family's numbers)."""
    pacer = OutboundPacer(TABLES[platform], clock=clock, store=store, max_wait_s=max_wait_s)
    if isinstance(client, BaseClient):  # a test's stand-in client is left as it is
        client.pace = pacer.before_call
    return pacer
