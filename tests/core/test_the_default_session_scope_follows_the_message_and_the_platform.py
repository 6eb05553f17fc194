"""With no ``session_scope`` configured, the session router picks the scope per message:
a direct message is one person's conversation; a group message shares the session of
its thread where the platform has threads (``threads``; a message outside any thread is
the group's own conversation), and is one person's conversation where it has none. A
configured scope applies to every message. The shared-session rules (anybody in the
conversation may answer its permission requests; ``authorized_senders`` bounds /cancel
and the permission commands) follow the scope each message gets."""

from __future__ import annotations

import threading

import pytest
from channelkit.core import ChannelConfig, SessionRouter, SessionScope, SessionTarget
from channelkit.errors import ConfigurationError
from channelkit.testing import ScriptedBridge, ask, gate, inbound, permission_request

USER, CHAT, THREAD = SessionScope.USER, SessionScope.CHAT, SessionScope.THREAD


def _target(sender: str = "ann", *, group: bool, thread: str | None = None) -> SessionTarget:
    return SessionTarget(
        channel_name="t",
        sender_id=sender,
        chat_id="g" if group else f"dm-{sender}",
        thread_id=thread,
        is_group=group,
    )


@pytest.mark.parametrize(
    ("configured", "threads", "group", "expected"),
    [
        # not configured: by the message and the platform
        (None, True, False, USER),
        (None, True, True, THREAD),
        (None, False, False, USER),
        (None, False, True, USER),
        # configured: always that one
        (USER, True, True, USER),
        (CHAT, True, False, CHAT),
        (CHAT, False, True, CHAT),
        (THREAD, False, True, THREAD),
        (THREAD, True, False, THREAD),
    ],
)
def test_the_scope_of_a_message(
    configured: SessionScope | None, threads: bool, group: bool, expected: SessionScope
) -> None:
    router = SessionRouter("t", configured, threads=threads)
    target = _target(group=group, thread="t1" if group else None)
    assert router.scope_for(target) is expected
    assert router.shared(target) == (expected is not USER)


def test_by_default_a_threaded_group_has_a_session_per_thread_and_one_outside_them() -> None:
    router = SessionRouter("t", None, threads=True)
    ann_a = router.session_for(_target("ann", group=True, thread="a"))
    bob_a = router.session_for(_target("bob", group=True, thread="a"))
    ann_b = router.session_for(_target("ann", group=True, thread="b"))
    ann_main = router.session_for(_target("ann", group=True))
    bob_main = router.session_for(_target("bob", group=True))
    assert ann_a == bob_a
    assert len({ann_a, ann_b, ann_main}) == 3
    assert ann_main == bob_main  # outside any thread: the group's own conversation
    # a direct chat stays one person's
    assert router.session_for(_target("ann", group=False)) != router.session_for(
        _target("bob", group=False)
    )


def test_by_default_a_group_without_threads_keeps_a_session_per_person() -> None:
    router = SessionRouter("t", None, threads=False)
    ann = router.session_for(_target("ann", group=True))
    assert router.session_for(_target("ann", group=True)) == ann
    assert router.session_for(_target("bob", group=True)) != ann


def test_a_bad_scope_or_threads_flag_is_refused_naming_it() -> None:
    with pytest.raises(ConfigurationError) as info:
        SessionRouter("t", "galaxy")
    assert info.value.path == "scope"
    with pytest.raises(ConfigurationError) as info:
        SessionRouter("t", None, threads="yes")  # type: ignore[arg-type]
    assert info.value.path == "threads"
    with pytest.raises(ConfigurationError) as info:
        ChannelConfig(name="t", session_scope="galaxy")
    assert info.value.path == "session_scope"
    assert ChannelConfig(name="t").session_scope is None
    assert ChannelConfig(name="t", session_scope="thread").scope is THREAD


def test_a_channel_of_a_threaded_platform_shares_a_thread_and_keeps_dms_apart(
    channel_factory,
) -> None:
    ch = channel_factory(ScriptedBridge([]), threads=True)

    def session(sender: str, **kw: object) -> str:
        return ch.handle_inbound(inbound("x", sender_id=sender, **kw)).result().session_id

    in_thread = {"chat_id": "g", "thread_id": "t1", "is_group": True}
    assert session("ann", **in_thread) == session("bob", **in_thread)
    assert session("ann", chat_id="g", thread_id="t2", is_group=True) != session("ann", **in_thread)
    assert session("ann", chat_id="dm") != session("bob", chat_id="dm")
    assert session("ann", chat_id="dm") == session("ann", chat_id="dm")


def test_a_configured_user_scope_keeps_people_apart_in_a_thread(channel_factory) -> None:
    ch = channel_factory(ScriptedBridge([]), threads=True, session_scope="user")
    in_thread = {"chat_id": "g", "thread_id": "t1", "is_group": True}
    ann = ch.handle_inbound(inbound("x", sender_id="ann", **in_thread)).result()
    bob = ch.handle_inbound(inbound("x", sender_id="bob", **in_thread)).result()
    assert ann.session_id != bob.session_id


def test_in_a_shared_thread_anybody_there_may_answer_a_permission(channel_factory) -> None:
    bridge = ScriptedBridge([ask(lambda sid: permission_request("req-1", sid))])
    ch = channel_factory(bridge, threads=True)
    in_thread = {"chat_id": "g", "thread_id": "t1", "is_group": True}
    handle = ch.handle_inbound(inbound("hi", sender_id="ann", **in_thread))
    ch.wait_for_sent("Permission required")
    reply = ch.handle_inbound(inbound("/approve", sender_id="bob", **in_thread)).reply
    assert reply == "Permission approved."
    assert handle.result().status == "completed"


def test_without_threads_only_the_owner_answers_a_group_permission(channel_factory) -> None:
    bridge = ScriptedBridge([ask(lambda sid: permission_request("req-1", sid))])
    ch = channel_factory(bridge, threads=False)
    group = {"chat_id": "g", "is_group": True}
    handle = ch.handle_inbound(inbound("hi", sender_id="ann", **group))
    ch.wait_for_sent("Permission required")
    none = "No pending permission request for this chat."
    assert ch.handle_inbound(inbound("/approve", sender_id="bob", **group)).reply == none
    assert ch.handle_inbound(inbound("/approve", sender_id="ann", **group)).reply == (
        "Permission approved."
    )
    assert handle.result().status == "completed"


def test_authorized_senders_bound_cancel_in_a_shared_thread_not_in_a_dm(channel_factory) -> None:
    hold = threading.Event()
    bridge = ScriptedBridge([gate(hold)])
    ch = channel_factory(bridge, threads=True, authorized_senders={"lead"})
    in_thread = {"chat_id": "g", "thread_id": "t1", "is_group": True}
    try:
        running = ch.handle_inbound(inbound("go", sender_id="lead", **in_thread))
        assert bridge.wait_prompt()
        denied = ch.handle_inbound(inbound("/cancel", sender_id="rando", **in_thread))
        assert denied.reply == "Only authorized members can cancel requests in this shared session."
        # in their own direct chat nobody shares the session: the list does not apply
        own = ch.handle_inbound(inbound("/cancel", sender_id="rando", chat_id="dm-rando"))
        assert own.reply != denied.reply
    finally:
        hold.set()
    assert running.result().status == "completed"
