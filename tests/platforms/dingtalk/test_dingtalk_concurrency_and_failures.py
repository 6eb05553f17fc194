"""Card callbacks under concurrency, injected Card API failures, volume of questions."""

from __future__ import annotations

import threading

import pytest
from channelkit.errors import BadRequest, RateLimited, ServerError, TransportError
from channelkit.platforms.dingtalk.api import CardDeliveryError
from channelkit.platforms.dingtalk.ingress import CardCallback
from dingtalk_helpers import submit_payload


def ask_script(bridge, sid, text, sink):
    sink.text_chunk(sid, "before question")
    bridge.until_cards(1)  # its status card
    bridge.ask(sink, sid, "req-1")
    sink.text_chunk(sid, "final answer")
    bridge.until_cards(3)  # and the question card, then the next status card
    return "before questionfinal answer"  # like every bridge: everything streamed


def test_callback_ack_precedes_responder_and_card_writes(adapter):
    h = adapter(ask_script)
    h.bridge.respond_gate = threading.Event()
    h.send("go")
    assert h.wait_for(lambda: len(h.question_tracks()) == 1)
    before = len(h.api.ops("update"))
    resp = h.card_request(submit_payload(h.question_tracks()[0]))
    # the handler returned its ACK while the responder is still blocked
    assert resp.status == 200
    assert h.bridge.respond_started.wait(5)
    assert h.bridge.responses == []
    assert len(h.api.ops("update")) == before  # no card write yet either
    h.bridge.respond_gate.set()
    assert h.wait_for(
        lambda: any(c[1]["params"].get("card_status") == "submitted" for c in h.api.ops("update"))
    )
    h.idle()
    assert len(h.bridge.responses) == 1


def test_64_threads_same_submit_one_responder_call(adapter):
    h = adapter(ask_script)
    h.send("go")
    assert h.wait_for(lambda: len(h.question_tracks()) == 1)
    payload = submit_payload(h.question_tracks()[0])
    barrier = threading.Barrier(64)
    statuses = []
    kinds = []
    route = h.channel.route_card_callback

    def recording_route(body):
        result = route(body)
        kinds.append(result.outcome)
        return result

    h.channel.route_card_callback = recording_route

    def deliver():
        barrier.wait()
        statuses.append(h.card_request(payload).status)

    threads = [threading.Thread(target=deliver) for _ in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    h.idle()
    assert statuses == [200] * 64
    assert sorted(kinds) == ["accepted"] + ["ignored"] * 63
    assert len(h.bridge.responses) == 1
    submitted = [c for c in h.api.ops("update") if c[1]["params"].get("card_status") == "submitted"]
    assert len(submitted) == 1


ERRORS = {
    "timeout": lambda: TransportError("read timeout after 10 s", timeout=True),
    "5xx": lambda: ServerError("busy", status=500, code="system.busy"),
    "429": lambda: RateLimited("throttled", status=429),
    "business": lambda: BadRequest("card gone", status=400, code="param.cardNotExist"),
    "delivery": lambda: CardDeliveryError("tpl", "template denied"),
}


@pytest.mark.parametrize("op", ["create", "stream", "update"])
@pytest.mark.parametrize("kind", list(ERRORS))
def test_injected_card_api_failures(adapter, op, kind):
    if kind == "delivery" and op != "create":
        pytest.skip("per-space delivery failures only exist for createAndDeliver")
    h = adapter(ask_script)
    h.api.fail[op] = ERRORS[kind]()
    # a stream or an update fails only on a card shown running: hold the turn until
    # each card went out (an ended segment's card is created finished, in one call)
    h.bridge.hold_for_cards = op != "create"
    h.send("go")

    questions = h.channel.presenter.questions

    def card_live():
        record = questions.record("req-1")
        return record is not None and record.state.state == "pending"

    # either the card went live, or its delivery failed and the request was cancelled
    assert h.wait_for(lambda: bool(h.bridge.responses) or card_live())
    if not h.bridge.responses:
        # the card is live: answer it; the answer must reach the agent whatever the UI does
        h.card_request(submit_payload(h.question_tracks()[0]))
        assert h.wait_for(lambda: bool(h.bridge.responses))
        assert h.bridge.responses[0][1]["answers"] == {"0": "Beijing", "1": "Logs, Metrics"}
    else:
        # an undeliverable question card is cancelled visibly, never left pending
        assert h.bridge.responses[0][1] == {"outcome": {"outcome": "cancelled"}}
        assert any("could not be delivered" in t for t in h.api.texts())
    h.idle()
    finals = [
        c[1]["params"].get("content")
        for c in h.api.ops("update")
        if c[1]["params"].get("flowStatus") == 3
    ]
    delivered = op != "update" and any(f == "final answer" for f in finals)
    assert delivered or "final answer" in h.api.texts()
    sizes = h.channel.map_sizes()
    assert sizes["runs"] == 0 and sizes["status_live"] == 0
    assert sizes["question_by_request"] == 0 and sizes["question_active_by_scope"] == 0
    assert all(v <= 1000 for v in sizes.values())
    assert h.channel.pending_request_ids() == []


def test_5000_question_lifecycles_leave_bounded_tombstones(harness):
    h = harness(timeout=5.0)
    outcomes = ("submit", "cancel", "expire", "external", "run_end")
    for i in range(5_000):
        run = f"run-{i}"
        h.run(run, session=f"s-{i % 7}", owner=f"owner-{i % 3}")
        ctx = h.ctx(run, session=f"s-{i % 7}", owner=f"owner-{i % 3}", request_id=f"req-{i}")
        assert h.presenter.present_input(ctx) == "presented"
        track = h.api.calls[-1][1]["out_track_id"]
        kind = outcomes[i % len(outcomes)]
        if kind == "submit":
            h.presenter.route_callback(
                CardCallback(track, "submit", f"owner-{i % 3}", {"0": "Beijing", "1": "Logs"}, True)
            ).run_after()
        elif kind == "cancel":
            h.presenter.route_callback(
                CardCallback(track, "cancel", f"owner-{i % 3}", {}, True, True)
            ).run_after()
        elif kind == "expire":
            h.advance(5.0)
        elif kind == "external":
            ctx.settle("resolved_outside_presenter")
        h.presenter.terminalize_run(run, "completed")
        h.clock.advance(0.01)
    questions = h.presenter.questions
    sizes = questions.map_sizes()
    assert sizes["by_request"] == 0 and sizes["by_track"] == 0 and sizes["active_by_scope"] == 0
    assert sizes["tombstones"] <= 1_000
    assert h.presenter.live_runs == 0
    assert h.scheduler.pending_count() == 0  # no timers left behind
