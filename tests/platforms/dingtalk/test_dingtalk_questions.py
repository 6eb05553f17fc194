from __future__ import annotations

import json

from channelkit.errors import BadRequest, ServerError
from channelkit.platforms.dingtalk.api import QUESTION_CARD_TEMPLATE_ID
from channelkit.platforms.dingtalk.ingress import CardCallback


def submit(track, form, actor="owner-1", action="submit"):
    return CardCallback(track, action, actor, form, True, False)


def cancel_cb(track, actor="owner-1"):
    return CardCallback(track, "request-1", actor, {}, True, True)


def q_track(h, index=0):
    return [c for c in h.api.ops("create") if c[1]["template_id"] == QUESTION_CARD_TEMPLATE_ID][
        index
    ][1]["out_track_id"]


def q_updates(h):
    return [c[1]["params"] for c in h.api.ops("update") if "card_status" in c[1]["params"]]


def test_one_card_with_all_questions_and_answer_keys(harness):
    h = harness()
    h.run()
    ctx = h.ctx()
    assert h.presenter.present_input(ctx) == "presented"
    create = h.api.ops("create")
    assert len(create) == 1
    params = create[0][1]["params"]
    assert create[0][1]["out_track_id"].startswith("ck-question-")
    assert params["question_id"] == ctx.request_id and params["card_status"] == "pending"
    assert params["question_title"] == "Region" and params["question_desc"] == "Which region?"
    fields = params["form"]["fields"]
    assert [(f["name"], f["type"]) for f in fields] == [
        ("0", "CHECKBOX_GROUP"),
        ("0_other", "TEXT"),
        ("1", "MULTI_CHECKBOX_GROUP"),
        ("1_other", "TEXT"),
    ]
    assert fields[0]["options"][-1] == {"value": "__ck_other__", "text": "Other"}


def test_submit_encodes_answers_and_updates_in_place(harness):
    h = harness()
    h.run()
    ctx = h.ctx()
    h.presenter.present_input(ctx)
    track = q_track(h)
    res = h.presenter.route_callback(submit(track, {"0": "Beijing", "1": ["Logs", "Metrics"]}))
    assert res.outcome == "accepted" and ctx.responses == []  # nothing before execute
    res.run_after()
    assert ctx.responses == [
        {
            "outcome": {"outcome": "selected", "optionId": "proceed_once"},
            "answers": {"0": "Beijing", "1": "Logs, Metrics"},
        }
    ]
    shown = "- Which region?: Beijing\n- Which signals?: Logs, Metrics"
    assert q_updates(h) == [
        {
            "card_status": "submitted",
            "question_desc": "Submitted.\n\n" + shown,
            "form_btn_text": "Submitted",
            "selected_text": shown,
            "selected_values": '["Beijing", "Logs, Metrics"]',
        }
    ]
    # duplicates and stale callbacks are ignored; never reopened
    assert (
        h.presenter.route_callback(submit(track, {"0": "Beijing", "1": "Logs"})).outcome
        == "ignored"
    )
    assert h.presenter.route_callback(cancel_cb(track)).outcome == "ignored"
    assert len(ctx.responses) == 1


def test_custom_other_answers(harness):
    h = harness()
    h.run()
    ctx = h.ctx()
    h.presenter.present_input(ctx)
    track = q_track(h)
    bad = h.presenter.route_callback(
        submit(track, {"0": "__ck_other__", "0_other": " ", "1": "Logs"})
    )
    assert bad.outcome == "ignored"
    res = h.presenter.route_callback(
        submit(track, {"0": "__ck_other__", "0_other": "Shenzhen", "1": ["Logs"], "1_other": ""})
    )
    res.run_after()
    assert ctx.responses[0]["answers"] == {"0": "Shenzhen", "1": "Logs"}


def test_unknown_answer_key_rejected_before_claim(harness):
    h = harness()
    h.run()
    ctx = h.ctx()
    h.presenter.present_input(ctx)
    track = q_track(h)
    res = h.presenter.route_callback(
        submit(track, {"0": "Beijing", "1": "Logs", "unexpected": "x"})
    )
    assert res.outcome == "ignored" and ctx.responses == []
    single_two = h.presenter.route_callback(
        submit(track, {"0": ["Beijing", "Shanghai"], "1": "Logs"})
    )
    assert single_two.outcome == "ignored"
    ok = h.presenter.route_callback(submit(track, {"0": "Beijing", "1": "Logs"}))
    assert ok.outcome == "accepted"  # still claimable after rejected submits


def test_cancel_sends_only_cancel_outcome(harness):
    h = harness()
    h.run()
    ctx = h.ctx()
    h.presenter.present_input(ctx)
    res = h.presenter.route_callback(cancel_cb(q_track(h)))
    res.run_after()
    assert ctx.responses == [{"outcome": {"outcome": "cancelled"}}]
    assert q_updates(h)[-1]["card_status"] == "cancelled"


def test_non_business_callbacks_ignored(harness):
    h = harness()
    h.run()
    ctx = h.ctx()
    h.presenter.present_input(ctx)
    cb = CardCallback(q_track(h), "submit", "owner-1", {}, False, False)
    assert h.presenter.route_callback(cb).outcome == "ignored"


def test_foreign_user_forbidden_once_nothing_mutated(harness):
    h = harness()
    h.run()
    ctx = h.ctx()
    h.presenter.present_input(ctx)
    track = q_track(h)
    notices = []
    h.presenter.questions.notify_forbidden = lambda target, actor: notices.append(
        (target.chat_id, actor)
    )
    first = h.presenter.route_callback(submit(track, {"0": "Beijing", "1": "Logs"}, actor="other"))
    assert first.outcome == "forbidden" and notices == []  # nothing before the ACK
    first.run_after()
    assert notices == [("cid-1", "other")]  # the notice only: no responder, no card write
    again = h.presenter.route_callback(submit(track, {"0": "Beijing", "1": "Logs"}, actor="other"))
    assert again.outcome == "ignored"
    assert ctx.responses == [] and q_updates(h) == []
    assert (
        h.presenter.route_callback(submit(track, {"0": "Beijing", "1": "Logs"})).outcome
        == "accepted"
    )


def test_responder_false_or_throw_is_terminal_and_keeps_claim(harness):
    for result in (False, RuntimeError("bridge gone")):
        h = harness()
        h.run()
        ctx = h.ctx(respond_result=result)
        h.presenter.present_input(ctx)
        track = q_track(h)
        res = h.presenter.route_callback(submit(track, {"0": "Beijing", "1": "Logs"}))
        res.run_after()
        assert q_updates(h) == [
            {
                "card_status": "expired",
                "question_desc": "This question is no longer available.",
                "form_btn_text": "Expired",
            }
        ]
        assert (
            h.presenter.route_callback(submit(track, {"0": "Beijing", "1": "Logs"})).outcome
            == "ignored"
        )
        assert h.presenter.questions.live_count == 0


def test_expiry_finalizes_before_calling_responder(harness):
    h = harness(timeout=1.0)
    h.run()
    ctx = h.ctx()
    order = []
    orig_update = h.api.update_instance
    h.api.update_instance = lambda *a, **k: (order.append("update"), orig_update(*a, **k))
    orig_respond = ctx.respond
    ctx.respond = lambda r: (order.append("respond"), orig_respond(r))[1]
    h.presenter.present_input(ctx)
    h.advance(1.0)
    assert order == ["update", "respond"]
    assert q_updates(h)[-1]["card_status"] == "expired"
    assert q_updates(h)[-1]["question_desc"] == "This question expired. Please retry."
    assert ctx.responses == [{"outcome": {"outcome": "cancelled"}}]
    assert len(q_updates(h)) == 1  # the collapsed cancellation did not relabel it


def test_external_resolution_projects_expired_with_own_text(harness):
    h = harness()
    h.run()
    ctx = h.ctx()
    h.presenter.present_input(ctx)
    ctx.settle("resolved_outside_presenter")
    assert q_updates(h) == [
        {
            "card_status": "expired",
            "question_desc": "Resolved outside this card.",
            "form_btn_text": "Expired",
        }
    ]
    ctx2 = h.ctx()
    h.presenter.present_input(ctx2)
    ctx2.settle("cancelled")
    assert q_updates(h)[-1]["card_status"] == "cancelled"


def test_settlement_during_delivery_never_reactivates(harness):
    h = harness()
    h.run()
    ctx = h.ctx()
    h.api.fail["create"] = lambda kw: ctx.settle("resolved_outside_presenter")  # settles mid-call
    assert h.presenter.present_input(ctx) == "presented"
    assert q_updates(h) == [
        {
            "card_status": "expired",
            "question_desc": "Resolved outside this card.",
            "form_btn_text": "Expired",
        }
    ]
    assert ctx.responses == []
    track = q_track(h)
    assert (
        h.presenter.route_callback(submit(track, {"0": "Beijing", "1": "Logs"})).outcome
        == "ignored"
    )
    h.advance(1_000)
    assert ctx.responses == []


def test_delivery_failure_cancels_visibly(harness):
    h = harness()
    h.api.fail["create"] = ServerError("busy", status=500)
    h.run()
    ctx = h.ctx()
    assert h.presenter.present_input(ctx) == "handled"
    assert ctx.responses == [{"outcome": {"outcome": "cancelled"}}]
    assert "request was cancelled" in h.fallbacks[-1][1]
    assert h.presenter.questions.live_count == 0


def test_template_rejection_then_text_prompts(harness):
    h = harness()
    h.api.fail["create"] = BadRequest("no", status=400, code="param.templateUnpublished")
    h.run()
    assert h.presenter.present_input(h.ctx()) == "handled"
    h.api.fail.clear()
    assert h.presenter.present_input(h.ctx()) == "unsupported"


def test_second_question_same_run_unsupported_first_stays_answerable(harness):
    h = harness()
    h.run()
    first = h.ctx()
    assert h.presenter.present_input(first) == "presented"
    second = h.ctx()
    assert h.presenter.present_input(second) == "unsupported"
    assert len(h.api.ops("create")) == 1 and q_updates(h) == []
    res = h.presenter.route_callback(submit(q_track(h), {"0": "Beijing", "1": "Logs"}))
    assert res.outcome == "accepted"


def test_users_and_sessions_independent(harness):
    h = harness()
    h.run("run-1", session="s1", owner="owner-1")
    h.run("run-2", session="s2", owner="owner-1")
    h.run("run-3", session="s1", owner="owner-2")
    a = h.ctx("run-1", session="s1", owner="owner-1")
    b = h.ctx("run-2", session="s2", owner="owner-1")
    c = h.ctx("run-3", session="s1", owner="owner-2")
    for ctx in (a, b, c):
        assert h.presenter.present_input(ctx) == "presented"
    assert q_updates(h) == []
    for i, (ctx, owner) in enumerate(((a, "owner-1"), (b, "owner-1"), (c, "owner-2"))):
        res = h.presenter.route_callback(
            submit(q_track(h, i), {"0": "Beijing", "1": "Logs"}, owner)
        )
        assert res.outcome == "accepted"
        res.run_after()
        assert len(ctx.responses) == 1


def test_run_termination_ends_cards_without_responder(harness):
    h = harness()
    h.run()
    ctx = h.ctx()
    h.presenter.present_input(ctx)
    h.presenter.terminalize_run("run-1", "cancelled", "steer")
    assert q_updates(h)[-1]["card_status"] == "expired"
    assert ctx.responses == []
    h2 = harness()
    h2.run()
    ctx2 = h2.ctx()
    h2.presenter.present_input(ctx2)
    h2.presenter.terminalize_run("run-1", "cancelled", "cancel_command")
    assert q_updates(h2)[-1]["card_status"] == "cancelled"


def test_projection_failure_does_not_roll_back_answer(harness):
    h = harness()
    h.run()
    ctx = h.ctx()
    h.presenter.present_input(ctx)
    track = q_track(h)
    h.api.fail["update"] = ServerError("busy", status=500)
    res = h.presenter.route_callback(submit(track, {"0": "Beijing", "1": "Logs"}))
    res.run_after()
    assert len(ctx.responses) == 1 and ctx.settled == "resolved_outside_presenter"
    assert (
        h.presenter.route_callback(submit(track, {"0": "Beijing", "1": "Logs"})).outcome
        == "ignored"
    )
    tomb = h.presenter.questions.registry.tombstone(track)
    assert tomb.state == "submitted"


def test_tombstones_hold_only_correlation(harness):
    h = harness()
    h.run()
    ctx = h.ctx()
    h.presenter.present_input(ctx)
    track = q_track(h)
    h.presenter.route_callback(submit(track, {"0": "Beijing", "1": "Logs"})).run_after()
    tomb = h.presenter.questions.registry.tombstone(track)
    assert set(vars(tomb)) == {"request_id", "run_id", "state"}
    assert "Beijing" not in json.dumps(vars(tomb))
    h.clock.advance(601)
    assert h.presenter.questions.registry.tombstone(track) is None


def test_run_cancellation_during_delivery_never_reactivates(harness):
    h = harness()
    h.run()
    ctx = h.ctx()
    # the run is cancelled while createAndDeliver is in flight
    h.api.fail["create"] = lambda kw: h.presenter.terminalize_run("run-1", "cancelled", "steer")
    assert h.presenter.present_input(ctx) == "presented"
    assert q_updates(h) == [
        {
            "card_status": "expired",
            "question_desc": "This question is no longer available.",
            "form_btn_text": "Expired",
        }
    ]
    assert ctx.responses == []  # the responder is not called again
    assert h.presenter.route_callback(
        submit(q_track(h), {"0": "Beijing", "1": "Logs"})
    ).outcome == ("ignored")
    h.advance(1_000)  # no expiry timer was armed
    assert ctx.responses == [] and h.presenter.questions.live_count == 0
