"""``/new``, ``/status`` and ``/stop`` in the core (`channelkit.core.operator_commands`):
how they are parsed, who may use them, and what ``/status`` counts. The contract suite
shows the same commands on every chat platform; these are the edges it does not reach."""

from __future__ import annotations

import threading

from channelkit.core.catalog import messages
from channelkit.core.commands import parse_command
from channelkit.core.operator_commands import STATUS_MAX_LISTED
from channelkit.core.text import (
    MSG_ADMIN_ONLY,
    MSG_CANCELLED,
    MSG_NEW_SESSION,
    MSG_NEW_UNAUTHORIZED,
    MSG_STATUS_CHAT,
    MSG_STATUS_IDLE,
    MSG_STATUS_MORE,
    MSG_STATUS_OWN,
    MSG_STOP_ALL_NOTHING,
    MSG_STOP_USAGE,
)
from channelkit.testing import ScriptedBridge, chunk, gate, inbound

STOP_ALL_REFUSED = MSG_ADMIN_ONLY.format(command="stop all")


def test_the_commands_are_parsed_with_their_argument_and_bot_suffix() -> None:
    assert parse_command("/new") == ("new", None)
    assert parse_command("/new@my_bot") == ("new", None)
    assert parse_command("  /status  ") == ("status", None)
    assert parse_command("/stop all") == ("stop", "all")
    assert parse_command("/STOP ALL") == ("stop", "ALL")
    assert parse_command("/stop") == ("stop", None)
    assert parse_command("/newer") is None
    assert parse_command("new") is None


def test_stop_all_needs_a_listed_admin_even_when_none_are_configured(channel_factory) -> None:
    hold = threading.Event()
    bridge = ScriptedBridge([chunk("working"), gate(hold)])
    ch = channel_factory(bridge)
    run = ch.handle_inbound(inbound("go"))
    ch.wait_for(lambda c: len(c.chunks) == 1)
    refused = ch.handle_inbound(inbound("/stop all"))
    assert refused.reply == STOP_ALL_REFUSED
    assert refused.result().delivered
    assert bridge.cancels == [] and not run.done()
    hold.set()
    assert run.result().status == "completed"


def test_an_admin_stop_all_in_an_idle_chat_says_so(channel_factory) -> None:
    ch = channel_factory(ScriptedBridge([]), access={"admins": ["root"]})
    handle = ch.handle_inbound(inbound("/stop all", sender_id="root"))
    assert handle.result().reply == MSG_STOP_ALL_NOTHING


def test_stop_alone_is_cancel_and_another_argument_gets_the_usage(channel_factory) -> None:
    hold = threading.Event()
    bridge = ScriptedBridge([chunk("working"), gate(hold)])
    ch = channel_factory(bridge)
    run = ch.handle_inbound(inbound("go"))
    ch.wait_for(lambda c: len(c.chunks) == 1)
    usage = ch.handle_inbound(inbound("/stop now"))
    assert usage.reply == MSG_STOP_USAGE and not run.done()
    stop = ch.handle_inbound(inbound("/stop"))
    assert stop.result().reply == MSG_CANCELLED
    assert run.result().status == "cancelled"


def test_new_obeys_the_shared_session_rule_of_cancel(channel_factory) -> None:
    ch = channel_factory(
        ScriptedBridge([]), session_scope="chat", authorized_senders=frozenset({"lead"})
    )
    first = ch.handle_inbound(inbound("hi", sender_id="lead")).result()
    assert ch.handle_inbound(inbound("/new", sender_id="guest")).reply == MSG_NEW_UNAUTHORIZED
    again = ch.handle_inbound(inbound("hi", sender_id="guest")).result()
    assert again.session_id == first.session_id  # the guest's /new changed nothing
    assert ch.handle_inbound(inbound("/new", sender_id="lead")).reply == MSG_NEW_SESSION
    fresh = ch.handle_inbound(inbound("hi", sender_id="guest")).result()
    assert fresh.session_id != first.session_id


def test_status_lists_a_few_runs_and_counts_the_rest_for_an_admin(channel_factory) -> None:
    hold = threading.Event()
    people = [f"p{i}" for i in range(STATUS_MAX_LISTED + 2)]
    ch = channel_factory(
        ScriptedBridge([chunk("working"), gate(hold)]), access={"admins": ["root"]}
    )
    runs = [ch.handle_inbound(inbound("go", chat_id="g", sender_id=p)) for p in people]
    ch.wait_for(lambda c: len(c.chunks) == len(people))
    try:
        own = ch.handle_inbound(inbound("/status", chat_id="g", sender_id="p0")).reply
        assert own is not None and own.startswith(f"{MSG_STATUS_OWN}: Running: 1 (")
        assert "by you)" in own
        whole = ch.handle_inbound(inbound("/status", chat_id="g", sender_id="root")).reply
        assert whole is not None and whole.startswith(f"{MSG_STATUS_CHAT}: Running: 5 (")
        assert MSG_STATUS_MORE.format(count=2) in whole
        elsewhere = ch.handle_inbound(inbound("/status", chat_id="other", sender_id="root"))
        assert elsewhere.reply == MSG_STATUS_IDLE.format(scope=MSG_STATUS_CHAT)
    finally:
        hold.set()
    assert all(r.result().status == "completed" for r in runs)


def test_the_replies_speak_the_channels_language_parts_included(channel_factory) -> None:
    zh = messages("zh-CN")
    ch = channel_factory(ScriptedBridge([]), locale="zh-CN", access={"admins": ["root"]})
    ch.handle_inbound(inbound("/status", sender_id="root")).result()
    idle = zh.text(MSG_STATUS_IDLE, scope=zh.text(MSG_STATUS_CHAT))
    assert ch.wait_for_sent(idle) == idle  # the scope inside it is Chinese too
    ch.handle_inbound(inbound("/stop all", sender_id="someone")).result()
    refused = zh.text(STOP_ALL_REFUSED)
    assert refused != STOP_ALL_REFUSED and ch.wait_for_sent(refused) == refused
