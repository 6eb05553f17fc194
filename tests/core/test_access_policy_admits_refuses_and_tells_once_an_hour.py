"""The access policy (`AccessConfig`, `AccessGate`): which messages reach the agent,
who is told and how often, and the configuration errors naming the bad field."""

from __future__ import annotations

import pytest
from channelkit.core import InboundMessage
from channelkit.core.access import (
    MAX_NOTICES,
    NOTICE_INTERVAL_S,
    PAIRING_CODE_TTL_S,
    AccessConfig,
    AccessGate,
)
from channelkit.core.text import (
    MSG_ACCESS_DM_CLOSED,
    MSG_ACCESS_NOT_ALLOWED,
)
from channelkit.errors import ConfigurationError
from channelkit.runtime import FakeClock


def dm(sender: str, text: str = "hi") -> InboundMessage:
    return InboundMessage("c", chat_id=f"dm-{sender}", sender_id=sender, text=text)


def group(
    sender: str, chat: str = "g1", mentions: bool | None = True, text: str = "hi"
) -> InboundMessage:
    return InboundMessage(
        "c", chat_id=chat, sender_id=sender, text=text, is_group=True, mentions_bot=mentions
    )


def gate(clock: FakeClock | None = None, **access: object) -> AccessGate:
    return AccessGate(AccessConfig.from_mapping(access), clock=clock or FakeClock())


def test_the_default_admits_everyone_everywhere_when_addressed() -> None:
    g = gate()
    assert g.check(dm("anyone")).admitted
    assert g.check(group("anyone")).admitted
    assert g.check(group("anyone", mentions=None)).admitted  # the ingress cannot tell


def test_groups_require_a_mention_by_default_and_per_group_rules_override_it() -> None:
    g = gate(groupRules={"g2": {"requireMention": False}})
    refused = g.check(group("alice", mentions=False))
    assert not refused.admitted and refused.notice is None  # ignored without a reply
    assert g.check(group("alice", chat="g2", mentions=False)).admitted
    assert gate(requireMention=False).check(group("alice", mentions=False)).admitted


def test_dm_allowlist_admits_listed_people_and_admins_only() -> None:
    g = gate(dm="allowlist", allowUsers=["alice"], admins=["root"])
    assert g.check(dm("alice")).admitted
    assert g.check(dm("root")).admitted
    refused = g.check(dm("mallory"))
    assert not refused.admitted and refused.notice == MSG_ACCESS_NOT_ALLOWED


def test_dm_closed_refuses_everyone_and_says_so() -> None:
    g = gate(dm="closed", allowUsers=["alice"])
    decision = g.check(dm("alice"))
    assert not decision.admitted and decision.notice == MSG_ACCESS_DM_CLOSED


def test_a_refused_person_is_told_at_most_once_an_hour() -> None:
    clock = FakeClock()
    g = gate(clock, dm="allowlist")
    assert g.check(dm("mallory")).notice == MSG_ACCESS_NOT_ALLOWED
    clock.advance(NOTICE_INTERVAL_S - 1)
    again = g.check(dm("mallory"))
    assert not again.admitted and again.notice is None
    assert g.check(dm("eve")).notice == MSG_ACCESS_NOT_ALLOWED  # each person once
    clock.advance(1.5)
    assert g.check(dm("mallory")).notice == MSG_ACCESS_NOT_ALLOWED


def test_the_notice_map_is_bounded_forgetting_the_oldest() -> None:
    g = gate(dm="allowlist")
    assert g.check(dm("first")).notice is not None
    for i in range(MAX_NOTICES - 1):
        assert g.check(dm(f"p{i}")).notice is not None
    assert g.check(dm("first")).notice is None  # still remembered: the map is full
    g.check(dm("one-more"))  # evicts the oldest entry
    assert g.check(dm("first")).notice is not None


def test_groups_closed_and_allowlist_ignore_without_a_reply() -> None:
    closed = gate(groups="closed", admins=["root"])
    decision = closed.check(group("root"))
    assert not decision.admitted and decision.notice is None
    listed = gate(groups="allowlist", allowChats=["g1"], allowUsers=["alice"])
    assert listed.check(group("bob", chat="g1")).admitted
    assert listed.check(group("alice", chat="g9")).admitted
    refused = listed.check(group("bob", chat="g9"))
    assert not refused.admitted and refused.notice is None


def test_operator_commands_pass_the_gate_like_any_message() -> None:
    """The gate decides who may talk and where; what /status and /stop all may do for a
    non-admin is decided by the commands (channelkit.core.operator_commands)."""
    g = gate(admins=["root"], dm="allowlist", allowUsers=["alice"])
    assert g.check(dm("root", "/stop all")).admitted
    assert g.check(dm("alice", "/status")).admitted  # her own conversation's status
    assert g.check(dm("alice", "/stop all")).admitted  # refused by the command itself
    refused = g.check(dm("mallory", "/status"))  # not allowed to talk: no command either
    assert not refused.admitted and refused.notice == MSG_ACCESS_NOT_ALLOWED
    assert not g.check(group("alice", mentions=False, text="/status")).admitted  # unaddressed
    assert g.check(group("alice", text="/status@bot")).admitted


def test_pairing_gives_a_code_once_and_approval_admits_the_person() -> None:
    clock = FakeClock()
    g = gate(clock, dm="pairing")
    first = g.check(dm("newbie"))
    assert not first.admitted and first.notice is not None
    (request,) = g.pairing_codes()
    assert request.code in first.notice and request.user_id == "newbie"
    again = g.check(dm("newbie"))
    assert not again.admitted and again.notice is None  # the live code was told
    assert g.approve(request.code) == request
    assert g.check(dm("newbie")).admitted
    assert g.approve(request.code) is None  # used once
    assert g.revoke("newbie")
    assert not g.check(dm("newbie")).admitted


def test_pairing_codes_expire_after_an_hour_and_can_be_denied() -> None:
    clock = FakeClock()
    g = gate(clock, dm="pairing")
    g.check(dm("late"))
    (request,) = g.pairing_codes()
    clock.advance(PAIRING_CODE_TTL_S + 1)
    assert g.pairing_codes() == []
    assert g.approve(request.code) is None
    fresh = g.check(dm("late"))  # a new code after the old one expired
    assert fresh.notice is not None
    (second,) = g.pairing_codes()
    assert g.deny(second.code) == second
    assert g.pairing_codes() == [] and not g.check(dm("late")).admitted


@pytest.mark.parametrize(
    ("access", "path"),
    [
        ({"dm": "friends"}, "access.dm"),
        ({"groups": "allowList"}, "access.groups"),
        ({"allowUser": ["a"]}, "access.allowUser"),
        ({"allowUsers": "alice"}, "access.allowUsers"),
        ({"allowUsers": ["alice", ""]}, "access.allowUsers[1]"),
        ({"admins": [7]}, "access.admins[0]"),
        ({"requireMention": "yes"}, "access.requireMention"),
        ({"groupRules": {"g1": {"requireMention": 1}}}, "access.groupRules.g1.requireMention"),
        ({"groupRules": {"g1": {"mention": True}}}, "access.groupRules.g1.mention"),
        ("open", "access"),
    ],
)
def test_a_bad_access_setting_names_its_field(access: object, path: str) -> None:
    from channelkit.core import ChannelConfig

    with pytest.raises(ConfigurationError) as info:
        ChannelConfig(name="c", access=access)  # type: ignore[arg-type]
    assert info.value.path == path, str(info.value)


def test_admits_asks_without_telling_or_making_a_code() -> None:
    g = gate(dm="pairing")
    assert not g.admits(dm("quiet"))
    assert g.pairing_codes() == []
    assert g.check(dm("quiet")).notice is not None  # the first real check still tells
    listed = gate(dm="allowlist")
    assert not listed.admits(dm("x"))
    assert listed.check(dm("x")).notice == MSG_ACCESS_NOT_ALLOWED
