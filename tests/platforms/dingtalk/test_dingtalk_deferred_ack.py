"""Deferred ACK work and early clicks on a question card.

Every pool hand-off of the DingTalk handlers is in ``IngressResponse.after``: when the
handler returns, no run, responder or Card API call has started; ``run_after()`` starts
each exactly once. A valid owner callback for a question card that is still
``reserved`` (createAndDeliver not answered yet) claims it, in either order with the
delivery.
"""

from __future__ import annotations

import threading

from dingtalk_helpers import stop_payload, submit_payload


def ask_script(bridge, sid, text, sink):
    bridge.ask(sink, sid, "req-1")
    return ""


def question_statuses(h):
    return [
        c[1]["params"]["card_status"]
        for c in h.api.ops("update")
        if "card_status" in c[1]["params"]
    ]


def test_robot_message_starts_its_run_only_after_the_ack(adapter):
    prompts: list[str] = []

    def script(bridge, sid, text, sink):
        prompts.append(text)
        return "done"

    h = adapter(script, cards={"enabled": False})
    response, handed = h.handed_to_pool(
        lambda: h.robot_request(h.robot_payload("hello"), after=False)
    )
    assert response.status == 200 and handed == []
    assert len(response.after) == 1
    h.idle()  # nothing was handed to the pool: nothing can run
    assert prompts == [] and h.api.calls == []
    response.run_after()
    response.run_after()  # a second call does nothing
    assert h.wait_for(lambda: bool(h.api.texts()))
    h.idle()
    assert prompts == ["hello"]
    assert h.api.texts() == ["done"]


def test_robot_command_is_answered_only_after_the_ack(adapter):
    h = adapter(None, cards={"enabled": False})
    h.send("first")  # gives the chat a route
    assert h.wait_for(lambda: bool(h.api.texts()))
    h.idle()
    before = len(h.api.texts())
    response, handed = h.handed_to_pool(
        lambda: h.robot_request(h.robot_payload("/deny"), after=False)
    )
    assert response.status == 200 and handed == []
    h.idle()
    assert len(h.api.texts()) == before
    response.run_after()
    assert h.wait_for(lambda: len(h.api.texts()) == before + 1)


def test_card_submit_calls_the_responder_only_after_the_ack(adapter):
    h = adapter(ask_script)
    h.send("go")
    assert h.wait_for(lambda: len(h.question_tracks()) == 1)
    updates = len(h.api.ops("update"))
    response, handed = h.handed_to_pool(
        lambda: h.card_request(submit_payload(h.question_tracks()[0]), after=False)
    )
    assert response.status == 200 and handed == []
    # claimed synchronously, but nothing handed to the pool yet
    assert h.channel.presenter.questions.by_track(h.question_tracks()[0]).state.state == "claimed"
    assert not h.bridge.respond_started.is_set()
    assert h.bridge.responses == [] and len(h.api.ops("update")) == updates
    response.run_after()
    response.run_after()
    assert h.wait_for(lambda: question_statuses(h) == ["submitted"])
    h.idle()
    assert len(h.bridge.responses) == 1


def test_stop_cancels_only_after_the_ack(adapter):
    release = threading.Event()

    def script(bridge, sid, text, sink):
        sink.text_chunk(sid, "working")
        release.wait(5)
        return "working"

    h = adapter(script)
    try:
        h.send("go")
        assert h.wait_for(lambda: len(h.status_tracks()) == 1)
        response, handed = h.handed_to_pool(
            lambda: h.card_request(stop_payload(h.status_tracks()[0]), after=False)
        )
        assert response.status == 200 and handed == []
        assert h.bridge.cancelled == []
        response.run_after()
        assert h.wait_for(lambda: len(h.bridge.cancelled) == 1)
    finally:
        release.set()
    h.idle()
    assert len(h.bridge.cancelled) == 1


def test_forbidden_notice_is_sent_only_after_the_ack(adapter):
    h = adapter(ask_script)
    h.send("go")
    assert h.wait_for(lambda: len(h.question_tracks()) == 1)
    response, handed = h.handed_to_pool(
        lambda: h.card_request(
            submit_payload(h.question_tracks()[0], actor="intruder"), after=False
        )
    )
    assert response.status == 200 and handed == []
    assert h.api.texts() == []
    response.run_after()
    assert h.wait_for(lambda: len(h.api.texts()) == 1)
    h.bridge.answered["req-1"].set()


def _reserved_card(h):
    """A question card whose createAndDeliver call is blocked (the card is visible)."""
    gate = threading.Event()
    h.api.gates["create"] = gate
    h.send("go")
    assert h.wait_for(lambda: len(h.question_tracks()) == 1)
    track = h.question_tracks()[0]
    record = h.channel.presenter.questions.by_track(track)
    assert record is not None and record.state.state == "reserved"
    return gate, track, record


def test_early_submit_then_responder_then_delivery_answers(adapter):
    h = adapter(ask_script)
    gate, track, record = _reserved_card(h)
    response, handed = h.handed_to_pool(lambda: h.card_request(submit_payload(track), after=False))
    assert response.status == 200 and handed == []
    assert record.state.state == "claimed"  # a valid owner callback proves delivery
    response.run_after()
    assert h.wait_for(lambda: len(h.bridge.responses) == 1)
    assert h.bridge.responses[0][1]["answers"] == {"0": "Beijing", "1": "Logs, Metrics"}
    assert h.wait_for(lambda: record.state.state == "terminal")
    assert question_statuses(h) == []  # not delivered yet: nothing to update
    gate.set()  # createAndDeliver answers now: the card is not reactivated
    assert h.wait_for(lambda: question_statuses(h) == ["submitted"])
    h.advance(600)  # no expiry timer was armed
    assert question_statuses(h) == ["submitted"]
    assert len(h.bridge.responses) == 1


def test_early_cancel_then_delivery_then_responder(adapter):
    h = adapter(ask_script)
    gate, track, record = _reserved_card(h)
    payload = submit_payload(track)
    payload["content"] = payload["content"].replace(
        '"actionIds": ["submit"]', '"actionIds": ["cancel"]'
    )
    response = h.card_request(payload, after=False)
    assert record.state.state == "claimed"
    gate.set()  # the activation sees the claim first
    assert h.wait_for(lambda: record.delivered)
    assert record.state.state == "claimed" and record.timer is None
    response.run_after()
    assert h.wait_for(lambda: question_statuses(h) == ["cancelled"])
    h.advance(600)
    assert question_statuses(h) == ["cancelled"]
    assert h.bridge.responses == [("req-1", {"outcome": {"outcome": "cancelled"}})]


def test_early_duplicate_and_foreign_callbacks_on_a_reserved_card(adapter):
    h = adapter(ask_script)
    gate, track, record = _reserved_card(h)
    first = h.card_request(submit_payload(track), after=False)
    second = h.card_request(submit_payload(track), after=False)
    assert len(first.after) == 1 and second.after == ()
    gate.set()
    first.run_after()
    assert h.wait_for(lambda: question_statuses(h) == ["submitted"])
    h.idle()
    assert len(h.bridge.responses) == 1
