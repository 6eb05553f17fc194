from __future__ import annotations

import threading

import pytest
from channelkit.platforms.common import EXPIRY_MARGIN
from channelkit.platforms.telegram.questions import (
    TEXT_BUSY,
    TEXT_NOT_OWNER,
    TEXT_STALE,
    TEXT_SUBMITTED,
    TEXT_UNKNOWN,
    TEXT_WRONG_MESSAGE,
    TelegramQuestionPresenter,
    encode_callback,
    new_token,
)
from tg_fakes import FakeApi, FakeCtx, q, tap


@pytest.fixture
def env(rt):  # type: ignore[no-untyped-def]
    api = FakeApi()
    presenter = TelegramQuestionPresenter(
        api, submit=rt.serial.post, scheduler=rt.scheduler, clock=rt.clock, timeout_s=270
    )
    return rt, api, presenter


def present(presenter, ctx):  # type: ignore[no-untyped-def]
    return presenter.present(ctx, ctx.target.chat_id, None)


def cb(presenter, ctx, kind, qi=0, oi=0):  # type: ignore[no-untyped-def]
    token = presenter.token_for(ctx.request_id)
    assert token is not None
    return encode_callback(token, kind, qi, oi)


def test_one_message_per_question_and_single_tap_submits(env) -> None:  # type: ignore[no-untyped-def]
    rt, api, presenter = env
    ctx = FakeCtx(questions=(q("0"),))
    assert present(presenter, ctx) == "presented"
    assert len(api.sent) == 1
    kb = api.sent[0]["reply_markup"]["inline_keyboard"]
    assert [r[0]["text"] for r in kb] == ["Blue", "Green", "Red", "Cancel"]
    presenter.handle_callback(tap(cb(presenter, ctx, "option", 0, 1), message_id=100))
    rt.settle()
    assert ctx.responses == [
        {"outcome": {"outcome": "selected", "optionId": "proceed_once"}, "answers": {"0": "Green"}}
    ]
    assert presenter.state_of("req-1") == "submitted"
    assert len(api.answers) == 1
    # The message was edited in place to its terminal state, keyboard removed.
    assert api.edits[-1]["message_id"] == 100
    assert "Submitted" in api.edits[-1]["text"] and api.edits[-1]["reply_markup"] is None
    assert presenter.live_count() == 0


def test_two_questions_multi_select_encoding(env) -> None:  # type: ignore[no-untyped-def]
    rt, api, presenter = env
    ctx = FakeCtx(questions=(q("0"), q("1", multi=True, labels=("Logs", "Metrics", "Traces"))))
    assert present(presenter, ctx) == "presented"
    m0, m1 = api.sent[0]["message_id"], api.sent[1]["message_id"]
    presenter.handle_callback(tap(cb(presenter, ctx, "option", 0, 0), message_id=m0))
    presenter.handle_callback(tap(cb(presenter, ctx, "option", 1, 1), message_id=m1))
    presenter.handle_callback(tap(cb(presenter, ctx, "option", 1, 0), message_id=m1))
    presenter.handle_callback(tap(cb(presenter, ctx, "option", 1, 2), message_id=m1))
    presenter.handle_callback(tap(cb(presenter, ctx, "option", 1, 2), message_id=m1))  # untoggle
    rt.settle()
    assert ctx.responses == []
    # Toggles are marked with a check in the edited keyboard.
    last_kb = [e for e in api.edits if e["message_id"] == m1][-1]["reply_markup"]["inline_keyboard"]
    assert [r[0]["text"] for r in last_kb[:-1]] == ["✓ Logs", "✓ Metrics", "Traces"]
    presenter.handle_callback(tap(cb(presenter, ctx, "submit", 1), message_id=m1))
    rt.settle()
    assert ctx.responses == [
        {
            "outcome": {"outcome": "selected", "optionId": "proceed_once"},
            "answers": {"0": "Blue", "1": "Logs, Metrics"},
        }
    ]
    assert len(api.answers) == 6  # every tap answered
    terminal = {e["message_id"]: e for e in api.edits if e["reply_markup"] is None}
    assert set(terminal) == {m0, m1}
    assert all("Submitted" in e["text"] for e in terminal.values())


def test_multi_select_submit_needs_a_selection(env) -> None:  # type: ignore[no-untyped-def]
    rt, api, presenter = env
    ctx = FakeCtx(questions=(q("0", multi=True),))
    present(presenter, ctx)
    presenter.handle_callback(tap(cb(presenter, ctx, "submit", 0)))
    rt.settle()
    assert ctx.responses == [] and presenter.state_of("req-1") == "pending"
    assert api.answers[-1][1] == "Select at least one option first."


def test_foreign_user_is_refused_and_nothing_mutates(env) -> None:  # type: ignore[no-untyped-def]
    rt, api, presenter = env
    ctx = FakeCtx(questions=(q("0"),))
    present(presenter, ctx)
    for kind in ("option", "cancel"):
        presenter.handle_callback(tap(cb(presenter, ctx, kind, 0, 0), user=7))
    rt.settle()
    assert ctx.responses == []
    assert presenter.state_of("req-1") == "pending"
    assert api.edits == []
    assert [a[1] for a in api.answers] == [TEXT_NOT_OWNER, TEXT_NOT_OWNER]


def test_stale_unknown_malformed_and_foreign_message_taps(env) -> None:  # type: ignore[no-untyped-def]
    rt, api, presenter = env
    ctx = FakeCtx(questions=(q("0"),))
    present(presenter, ctx)
    data = cb(presenter, ctx, "option", 0, 0)
    presenter.handle_callback(tap(data, message_id=999))  # another message
    presenter.handle_callback(tap(data, chat=555))  # another chat
    presenter.handle_callback(tap(encode_callback(new_token(), "option", 0, 0)))  # unknown token
    assert presenter.handle_callback(tap("ck:garbage"))
    assert not presenter.handle_callback(tap("not-ours"))  # left to the adapter
    presenter.handle_callback(tap(cb(presenter, ctx, "option", 0, 3)))  # no such option
    rt.settle()
    assert ctx.responses == [] and presenter.state_of("req-1") == "pending"
    assert sorted(a[1] for a in api.answers) == sorted(
        [TEXT_WRONG_MESSAGE, TEXT_WRONG_MESSAGE, TEXT_UNKNOWN, TEXT_UNKNOWN, TEXT_WRONG_MESSAGE]
    )
    presenter.handle_callback(tap(data))
    rt.settle()
    assert len(ctx.responses) == 1
    # Stale token after terminal: answered, nothing changes.
    presenter.handle_callback(tap(data))
    presenter.handle_callback(tap(cb_token_cancel(data)))
    rt.settle()
    assert len(ctx.responses) == 1
    assert sorted(a[1] for a in api.answers[-2:]) == [TEXT_STALE, TEXT_STALE]
    assert presenter.state_of("req-1") == "submitted"


def cb_token_cancel(data: str) -> str:
    token = data.split(":")[1]
    return encode_callback(token, "cancel")


def test_duplicate_taps_call_the_responder_once(env) -> None:  # type: ignore[no-untyped-def]
    rt, api, presenter = env
    gate = threading.Event()
    ctx = FakeCtx(questions=(q("0"),), respond_gate=gate)
    present(presenter, ctx)
    data = cb(presenter, ctx, "option", 0, 2)
    taps = [tap(data) for _ in range(32)]
    threads = [threading.Thread(target=presenter.handle_callback, args=(t,)) for t in taps]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    gate.set()
    rt.settle()
    assert len(ctx.responses) == 1
    assert ctx.responses[0]["answers"] == {"0": "Red"}
    assert len(api.answers) == 32  # every tap answered
    assert sum("Submitted" in e["text"] for e in api.edits) == 1


def test_taps_while_claimed_change_nothing(env) -> None:  # type: ignore[no-untyped-def]
    rt, api, presenter = env
    gate = threading.Event()
    ctx = FakeCtx(questions=(q("0"),), respond_gate=gate)
    present(presenter, ctx)
    presenter.handle_callback(tap(cb(presenter, ctx, "option", 0, 0)))  # claims (Blue)
    presenter.handle_callback(tap(cb(presenter, ctx, "option", 0, 1)))  # another option
    presenter.handle_callback(tap(cb(presenter, ctx, "cancel")))
    assert presenter.state_of("req-1") == "claimed"
    gate.set()
    rt.settle()
    assert ctx.responses == [
        {"outcome": {"outcome": "selected", "optionId": "proceed_once"}, "answers": {"0": "Blue"}}
    ]
    assert [a[1] for a in api.answers] == [TEXT_SUBMITTED, TEXT_BUSY, TEXT_BUSY]
    assert presenter.state_of("req-1") == "submitted"


def test_cancel_button(env) -> None:  # type: ignore[no-untyped-def]
    rt, api, presenter = env
    ctx = FakeCtx(questions=(q("0"), q("1")))
    present(presenter, ctx)
    presenter.handle_callback(
        tap(cb(presenter, ctx, "cancel"), message_id=api.sent[1]["message_id"])
    )
    rt.settle()
    assert ctx.responses == [{"outcome": {"outcome": "cancelled"}}]
    assert presenter.state_of("req-1") == "cancelled"
    assert sum("Cancelled" in e["text"] for e in api.edits) == 2


def test_responder_false_or_raising_projects_expired(env) -> None:  # type: ignore[no-untyped-def]
    rt, api, presenter = env
    for i, result in enumerate([False, RuntimeError("bridge gone")]):
        ctx = FakeCtx(request_id=f"r{i}", run_id=f"run{i}", questions=(q("0"),), result=result)
        present(presenter, ctx)
        presenter.handle_callback(
            tap(cb(presenter, ctx, "option", 0, 0), message_id=api.sent[-1]["message_id"])
        )
        rt.settle()
        if result is False:  # refused, no settlement: it waits for the winner's, then expires
            assert presenter.state_of(f"r{i}") == "claimed"
            rt.advance(270)
        assert presenter.state_of(f"r{i}") == "expired"
        assert "Expired" in api.edits[-1]["text"]


def test_timeout_projects_expired_before_cancelling(env) -> None:  # type: ignore[no-untyped-def]
    rt, api, presenter = env
    ctx = FakeCtx(questions=(q("0"),))
    order: list[str] = []
    real_edit = api.edit_message_text

    def edit(*a, **k):  # type: ignore[no-untyped-def]
        order.append("edit")
        return real_edit(*a, **k)

    api.edit_message_text = edit  # type: ignore[method-assign]
    real_respond = ctx.respond

    def respond(response):  # type: ignore[no-untyped-def]
        order.append("respond")
        return real_respond(response)

    ctx.respond = respond  # type: ignore[method-assign]
    present(presenter, ctx)
    rt.advance(269)
    assert presenter.state_of("req-1") == "pending"
    rt.advance(1)
    assert order == ["edit", "respond"]
    assert ctx.responses == [{"outcome": {"outcome": "cancelled"}}]
    assert presenter.state_of("req-1") == "expired"


def test_settlement_outside_presenter(env) -> None:  # type: ignore[no-untyped-def]
    rt, api, presenter = env
    ctx = FakeCtx(questions=(q("0"),))
    present(presenter, ctx)
    ctx.settle("resolved_outside_presenter")
    ctx.settle("cancelled")  # repeated: ignored
    rt.settle()
    assert presenter.state_of("req-1") == "expired"
    assert ctx.responses == []
    assert len(api.edits) == 1
    ctx2 = FakeCtx(request_id="req-2", run_id="run-2", questions=(q("0"),))
    present(presenter, ctx2)
    ctx2.settle("run_cancelled")
    rt.settle()
    assert presenter.state_of("req-2") == "cancelled"
    assert rt.scheduler.pending_count() == 0


def test_second_request_in_same_run_is_unsupported(env) -> None:  # type: ignore[no-untyped-def]
    rt, api, presenter = env
    first = FakeCtx(questions=(q("0"),))
    second = FakeCtx(request_id="req-2", questions=(q("0"),))
    other_run = FakeCtx(request_id="req-3", run_id="run-2", questions=(q("0"),))
    assert present(presenter, first) == "presented"
    assert present(presenter, second) == "unsupported"
    assert present(presenter, other_run) == "presented"
    assert presenter.state_of("req-1") == "pending"


def test_delivery_failure_falls_back_and_settles_during_delivery(env) -> None:  # type: ignore[no-untyped-def]
    rt, api, presenter = env
    api.fail_send_at = 1
    ctx = FakeCtx(questions=(q("0"), q("1")))
    assert present(presenter, ctx) == "unsupported"
    rt.settle()
    assert presenter.live_count() == 0
    assert "Expired" in api.edits[-1]["text"]  # the first message is disabled
    api.fail_send_at = None

    # Settled while the messages are being sent: never becomes pending.
    ctx2 = FakeCtx(request_id="req-2", run_id="run-2", questions=(q("0"), q("1")))
    original = api.send_message

    def send(*a, **k):  # type: ignore[no-untyped-def]
        mid = original(*a, **k)
        ctx2.settle("resolved_outside_presenter")
        return mid

    api.send_message = send  # type: ignore[method-assign]
    assert present(presenter, ctx2) == "presented"
    rt.settle()
    assert presenter.state_of("req-2") == "expired"
    assert rt.scheduler.pending_count() == 0


def test_projection_failure_never_rolls_back(env) -> None:  # type: ignore[no-untyped-def]
    rt, api, presenter = env
    api.fail_edits = True
    ctx = FakeCtx(questions=(q("0"),))
    present(presenter, ctx)
    presenter.handle_callback(tap(cb(presenter, ctx, "option", 0, 0)))
    rt.settle()
    assert presenter.state_of("req-1") == "submitted"
    assert len(ctx.responses) == 1


def test_tombstones_are_bounded(env) -> None:  # type: ignore[no-untyped-def]
    rt, api, presenter = env
    for i in range(1100):
        ctx = FakeCtx(request_id=f"r{i}", run_id=f"run{i}", questions=(q("0"),))
        present(presenter, ctx)
        ctx.settle("cancelled")
    rt.settle()
    assert presenter.live_count() == 0
    assert presenter.tombstone_count() <= 1000
    rt.advance(601)
    assert presenter.tombstone_count() == 0


# --- early taps: a question message is visible before sendMessage answers --------------


def _present_blocked(presenter, api, ctx):  # type: ignore[no-untyped-def]
    api.send_gate = threading.Event()
    box: dict = {}
    thread = threading.Thread(target=lambda: box.setdefault("result", present(presenter, ctx)))
    thread.start()
    assert api.send_entered.wait(5)
    assert presenter.state_of(ctx.request_id) == "reserved"
    box["thread"] = thread
    return box


def test_early_tap_claims_a_reserved_question_responder_first(env) -> None:  # type: ignore[no-untyped-def]
    rt, api, presenter = env
    ctx = FakeCtx(questions=(q("0"),))
    box = _present_blocked(presenter, api, ctx)
    decision = presenter.decide_callback(tap(cb(presenter, ctx, "option", 0, 2), message_id=100))
    assert decision is not None and decision.outcome == "accepted"
    assert presenter.state_of("req-1") == "claimed"
    assert ctx.responses == [] and api.answers == []  # nothing before the ACK
    decision.run_after()
    rt.wait_for(lambda: presenter.state_of("req-1") == "submitted")
    assert ctx.responses == [
        {"outcome": {"outcome": "selected", "optionId": "proceed_once"}, "answers": {"0": "Red"}}
    ]
    api.send_gate.set()  # sendMessage answers after the responder: nothing reactivates
    box["thread"].join(5)
    rt.settle()
    assert box["result"] == "presented"
    assert [e["message_id"] for e in api.edits if e["reply_markup"] is None] == [100]
    assert "Submitted" in api.edits[-1]["text"]
    rt.advance(600)  # no expiry timer was armed
    assert len(ctx.responses) == 1 and presenter.live_count() == 0


def test_early_cancel_claims_a_reserved_question_delivery_first(env) -> None:  # type: ignore[no-untyped-def]
    rt, api, presenter = env
    ctx = FakeCtx(questions=(q("0"), q("1")))
    box = _present_blocked(presenter, api, ctx)  # the first message is visible
    decision = presenter.decide_callback(tap(cb(presenter, ctx, "cancel"), message_id=100))
    assert decision is not None and decision.outcome == "accepted"
    assert presenter.state_of("req-1") == "claimed"
    api.send_gate.set()  # the activation sees the claim: no second message, no timer
    box["thread"].join(5)
    assert box["result"] == "presented" and len(api.sent) == 1
    assert presenter.state_of("req-1") == "claimed"
    decision.run_after()
    rt.wait_for(lambda: presenter.state_of("req-1") == "cancelled")
    rt.settle()
    assert ctx.responses == [{"outcome": {"outcome": "cancelled"}}]
    assert [e["message_id"] for e in api.edits] == [100] and "Cancelled" in api.edits[-1]["text"]
    rt.advance(600)
    assert len(ctx.responses) == 1


def test_early_foreign_tap_on_a_reserved_question_claims_nothing(env) -> None:  # type: ignore[no-untyped-def]
    rt, api, presenter = env
    ctx = FakeCtx(questions=(q("0"),))
    box = _present_blocked(presenter, api, ctx)
    decision = presenter.decide_callback(
        tap(cb(presenter, ctx, "option", 0, 0), message_id=100, user=7)
    )
    assert decision is not None and decision.outcome == "forbidden"
    assert presenter.state_of("req-1") == "reserved"
    api.send_gate.set()
    box["thread"].join(5)
    decision.run_after()
    rt.settle()
    assert presenter.state_of("req-1") == "pending" and api.answers[-1][1] == TEXT_NOT_OWNER


def test_expiry_is_cut_before_the_context_deadline(env) -> None:  # type: ignore[no-untyped-def]
    rt, api, presenter = env  # timeout_s=270
    ctx = FakeCtx(questions=(q("0"),))
    ctx.expires_at = rt.clock.now() + 100.0  # type: ignore[attr-defined]
    assert present(presenter, ctx) == "presented"
    rt.advance(100.0 - EXPIRY_MARGIN - 0.01)
    assert presenter.state_of("req-1") == "pending" and ctx.responses == []
    rt.advance(0.01)
    assert presenter.state_of("req-1") == "expired"
    assert ctx.responses == [{"outcome": {"outcome": "cancelled"}}]
