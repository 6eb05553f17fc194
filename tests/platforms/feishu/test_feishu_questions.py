"""Question forms: presentation, callbacks, one-shot claims, settlement, expiry."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from channelkit.core.types import (
    ChannelPromptOwner,
    ChannelUserQuestion,
    QuestionOption,
    SessionTarget,
    SettlementReason,
    UserInputPresentationResult,
)
from channelkit.platforms.common import EXPIRY_MARGIN
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.platforms.feishu.ingress import parse_card_action
from channelkit.platforms.feishu.questions import InvalidForm, QuestionPresenter, encode_answers
from feishu_helpers import FakeFeishu, card_action

QUESTIONS = (
    ChannelUserQuestion(
        "0",
        "Region",
        "Which region?",
        (QuestionOption("Beijing", ""), QuestionOption("Shanghai", "")),
    ),
    ChannelUserQuestion(
        "1",
        "Signals",
        "What?",
        (QuestionOption("Logs", ""), QuestionOption("Metrics", ""), QuestionOption("Traces", "")),
        multi_select=True,
    ),
)


class FakeCtx:
    def __init__(
        self,
        request_id: str = "req-1",
        run_id: str = "run-1",
        owner: str = "ou_owner",
        session_id: str = "s1",
        accept: bool | Exception = True,
        events: list[str] | None = None,
    ) -> None:
        self.request_id = request_id
        self.session_id = session_id
        self.run_id = run_id
        self.owner = ChannelPromptOwner(owner)
        self.target = SessionTarget("feishu", owner, "oc_chat")
        self.questions = QUESTIONS
        self.submit_option_id = "allow-once"
        self.preceding_segment_id = None
        self.accept = accept
        self.responses: list[Any] = []
        self.listeners: list[Callable[[SettlementReason], None]] = []
        self.events = events if events is not None else []
        self.lock = threading.Lock()
        self.settled: SettlementReason | None = None

    def respond(self, response: Any) -> bool:
        with self.lock:
            self.responses.append(response)
            self.events.append("respond")
        if isinstance(self.accept, Exception):
            raise self.accept
        if self.accept:
            self.settle(SettlementReason.RESOLVED_OUTSIDE_PRESENTER)
        else:
            self.settle(SettlementReason.CANCELLED)  # like ChannelBase: a refusal cancels
        return bool(self.accept)

    def on_settled(self, listener: Callable[[SettlementReason], None]) -> Callable[[], None]:
        if self.settled is not None:
            listener(self.settled)
            return lambda: None
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener) if listener in self.listeners else None

    def settle(self, reason: SettlementReason) -> None:
        if self.settled is not None:
            return
        self.settled = reason
        for listener in list(self.listeners):
            listener(reason)


def make(rt: Any, api: FeishuApi, fake: FakeFeishu, **kw: Any) -> QuestionPresenter:
    texts: list[tuple[str, str]] = []
    presenter = QuestionPresenter(
        api,
        clock=rt.clock,
        scheduler=rt.scheduler,
        submit=rt.serial.submit,
        send_text=lambda chat, text: texts.append((chat, text)),
        timeout_s=270.0,
        **kw,
    )
    presenter.texts = texts  # type: ignore[attr-defined]
    return presenter


def submit(form: dict[str, Any], rid: str = "req-1", message: str = "om_1", **kw: Any) -> Any:
    action = parse_card_action(
        card_action(
            {"action": "ck_submit", "request": rid}, form_value=form, message_id=message, **kw
        )
    )
    assert action is not None
    return action


def cancel(rid: str = "req-1", message: str = "om_1", **kw: Any) -> Any:
    action = parse_card_action(
        card_action({"action": "ck_cancel", "request": rid}, message_id=message, **kw)
    )
    assert action is not None
    return action


def last_label(fake: FakeFeishu) -> str:
    patch = fake.ops("patch")[-1]
    return str(patch.card["body"]["elements"][-1]["content"])


def test_present_sends_one_form_card(rt: Any, fake: FakeFeishu, api: FeishuApi) -> None:
    p = make(rt, api, fake)
    assert p.present(FakeCtx()) is UserInputPresentationResult.PRESENTED
    sends = fake.ops("send")
    assert len(sends) == 1 and sends[0].body["receive_id"] == "oc_chat"
    assert sends[0].card["body"]["elements"][0]["tag"] == "form"
    record = p.get("req-1")
    assert record is not None and record.message_id == "om_1" and record.cell.state == "pending"


def test_submit_encodes_seed_001_format(rt: Any, fake: FakeFeishu, api: FeishuApi) -> None:
    p = make(rt, api, fake)
    ctx = FakeCtx()
    p.present(ctx)
    result = p.handle_action(submit({"0": "0", "1": ["0", "1"]}))
    assert result.outcome == "accepted"
    assert result.body["toast"]["type"] == "success"
    assert ctx.responses == []  # the responder runs after the ACK
    assert result.after != ()
    result.run_after()
    rt.settle()
    assert ctx.responses == [
        {
            "outcome": {"outcome": "selected", "optionId": "allow-once"},
            "answers": {"0": "Beijing", "1": "Logs, Metrics"},
        }
    ]
    assert fake.ops("patch")[-1].path.endswith("/messages/om_1")
    assert last_label(fake) == "*已提交*"
    assert p.get("req-1") is None and p.tombstone("req-1") == ("run-1", "submitted")


def test_custom_text(rt: Any, fake: FakeFeishu, api: FeishuApi) -> None:
    assert encode_answers(
        QUESTIONS, {"0": "1", "0_other": "Hangzhou", "1": ["2"], "1_other": "Profiles"}
    ) == {
        "0": "Hangzhou",
        "1": "Traces, Profiles",
    }
    assert encode_answers(QUESTIONS, {"0_other": " Xi'an ", "1": ["1"]}) == {
        "0": "Xi'an",
        "1": "Metrics",
    }


@pytest.mark.parametrize(
    "form",
    [
        {"0": "0"},  # question 1 unanswered
        {"0": "9", "1": ["0"]},  # unknown option
        {"0": ["0", "1"], "1": ["0"]},  # several values for a single select
        {"0": "0", "1": ["0"], "2": "x"},  # unknown key
        {"0": "0", "1": ["0"], "1_other": 5},
        {"0": "zero", "1": ["0"]},
    ],
)
def test_invalid_forms_rejected_before_claim(
    rt: Any, fake: FakeFeishu, api: FeishuApi, form: dict[str, Any]
) -> None:
    with pytest.raises(InvalidForm):
        encode_answers(QUESTIONS, form)
    p = make(rt, api, fake)
    ctx = FakeCtx()
    p.present(ctx)
    result = p.handle_action(submit(form))
    assert result.outcome == "invalid" and result.after == ()
    assert result.body["toast"]["content"] == "请完整选择有效答案。"
    record = p.get("req-1")
    assert record is not None and record.cell.state == "pending"
    # a later valid submit still works
    good = p.handle_action(submit({"0": "1", "1": ["2"]}))
    assert good.outcome == "accepted"


def test_duplicate_submit_one_responder_call(rt: Any, fake: FakeFeishu, api: FeishuApi) -> None:
    p = make(rt, api, fake)
    ctx = FakeCtx()
    p.present(ctx)
    results: list[Any] = []
    barrier = threading.Barrier(64)

    def tap() -> None:
        barrier.wait(5.0)
        results.append(p.handle_action(submit({"0": "0", "1": ["1"]})))

    threads = [threading.Thread(target=tap) for _ in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5.0)
    claimed = [r for r in results if r.outcome == "accepted"]
    assert len(results) == 64 and len(claimed) == 1
    for r in results:
        if r.after != ():
            r.run_after()
    rt.settle()
    assert len(ctx.responses) == 1
    assert [c.op for c in fake.calls].count("patch") == 1
    # a late duplicate after the answer was taken says it was already answered
    late = p.handle_action(submit({"0": "0", "1": ["1"]}))
    assert late.after == () and late.body["toast"]["content"] == "该问题已被回答。"


@pytest.mark.parametrize(
    ("action", "disposition"),
    [
        (lambda: submit({"0": "0", "1": ["1"]}, open_id="ou_intruder"), "forbidden"),
        (lambda: cancel(open_id="ou_intruder"), "forbidden"),
        (lambda: submit({"0": "0", "1": ["1"]}, open_id=""), "forbidden"),
        (lambda: submit({"0": "0", "1": ["1"]}, chat_id="oc_other"), "ignored"),
        (lambda: submit({"0": "0", "1": ["1"]}, message="om_other"), "ignored"),
        (lambda: submit({"0": "0", "1": ["1"]}, rid="req-unknown"), "ignored"),
        (lambda: cancel(chat_id=""), "ignored"),
    ],
)
def test_fail_closed_without_claiming(
    rt: Any, fake: FakeFeishu, api: FeishuApi, action: Any, disposition: str
) -> None:
    p = make(rt, api, fake)
    ctx = FakeCtx()
    p.present(ctx)
    result = p.handle_action(action())
    assert result.outcome == disposition and result.after == ()
    assert result.body["toast"]["type"] == "warning"
    rt.settle()
    assert ctx.responses == [] and fake.ops("patch") == []
    record = p.get("req-1")
    assert record is not None and record.cell.state == "pending"


def test_cancel_button(rt: Any, fake: FakeFeishu, api: FeishuApi) -> None:
    p = make(rt, api, fake, language="en")
    ctx = FakeCtx()
    p.present(ctx)
    result = p.handle_action(cancel())
    assert result.after != ()
    result.run_after()
    rt.settle()
    assert ctx.responses == [{"outcome": {"outcome": "cancelled"}}]
    assert last_label(fake) == "*Cancelled*"


@pytest.mark.parametrize("accept", [False, RuntimeError("bridge down")])
def test_refused_responder_expires(rt: Any, fake: FakeFeishu, api: FeishuApi, accept: Any) -> None:
    p = make(rt, api, fake)
    ctx = FakeCtx(accept=accept)
    p.present(ctx)
    result = p.handle_action(submit({"0": "0", "1": ["1"]}))
    assert result.after != ()
    result.run_after()
    rt.settle()
    assert last_label(fake) == "*已过期*"
    assert p.get("req-1") is None


def test_timeout_expires_before_calling_responder(
    rt: Any, fake: FakeFeishu, api: FeishuApi
) -> None:
    events: list[str] = []
    p = make(rt, api, fake)
    ctx = FakeCtx(events=events)
    p.present(ctx)
    original = api.patch_card

    def patch(message_id: str, card: Any) -> None:
        events.append("patch")
        original(message_id, card)

    api.patch_card = patch  # type: ignore[method-assign]
    rt.advance(269.0)
    assert events == []
    rt.advance(1.0)
    assert events == ["patch", "respond"]
    assert ctx.responses == [{"outcome": {"outcome": "cancelled"}}]
    assert last_label(fake) == "*已过期*"
    # the settlement the responder caused does not relabel it
    assert len(fake.ops("patch")) == 1
    assert p.handle_action(submit({"0": "0", "1": ["1"]})).after == ()


def test_second_request_same_run_unsupported(rt: Any, fake: FakeFeishu, api: FeishuApi) -> None:
    p = make(rt, api, fake)
    first = FakeCtx("req-1")
    assert p.present(first) is UserInputPresentationResult.PRESENTED
    assert p.present(FakeCtx("req-2")) is UserInputPresentationResult.UNSUPPORTED
    # the first stays answerable; other runs and owners are independent
    assert p.present(FakeCtx("req-3", run_id="run-2")) is UserInputPresentationResult.PRESENTED
    assert p.present(FakeCtx("req-4", owner="ou_other")) is UserInputPresentationResult.PRESENTED
    assert p.handle_action(submit({"0": "0", "1": ["1"]})).outcome == "accepted"


@pytest.mark.parametrize(
    ("reason", "label"),
    [
        (SettlementReason.RESOLVED_OUTSIDE_PRESENTER, "*已过期*"),
        (SettlementReason.CANCELLED, "*已取消*"),
        (SettlementReason.RUN_CANCELLED, "*已取消*"),
    ],
)
def test_external_settlement_patches_in_place(
    rt: Any, fake: FakeFeishu, api: FeishuApi, reason: SettlementReason, label: str
) -> None:
    p = make(rt, api, fake)
    ctx = FakeCtx()
    p.present(ctx)
    ctx.settle(reason)
    rt.settle()
    assert last_label(fake) == label
    assert fake.ops("patch")[-1].path.endswith("/om_1")
    assert ctx.responses == []
    assert p.get("req-1") is None


def test_settled_during_subscription_shows_nothing(
    rt: Any, fake: FakeFeishu, api: FeishuApi
) -> None:
    p = make(rt, api, fake)
    ctx = FakeCtx()
    ctx.settled = SettlementReason.CANCELLED
    assert p.present(ctx) is UserInputPresentationResult.PRESENTED
    assert fake.calls == []


def test_delivery_failure_falls_back_and_cancels(rt: Any, fake: FakeFeishu, api: FeishuApi) -> None:
    fake.fail.add("send")
    p = make(rt, api, fake)
    ctx = FakeCtx()
    assert p.present(ctx) is UserInputPresentationResult.HANDLED
    assert ctx.responses == [{"outcome": {"outcome": "cancelled"}}]
    text = p.texts[0][1]  # type: ignore[attr-defined]
    assert "互动问题卡片投递失败" in text and "Which region?" in text
    fake.fail.clear()
    assert p.present(FakeCtx("req-9")) is UserInputPresentationResult.PRESENTED


def test_claimed_then_run_cancelled_before_execute(
    rt: Any, fake: FakeFeishu, api: FeishuApi
) -> None:
    p = make(rt, api, fake)
    ctx = FakeCtx()
    p.present(ctx)
    result = p.handle_action(submit({"0": "0", "1": ["1"]}))
    ctx.settle(SettlementReason.RUN_CANCELLED)
    assert result.after != ()
    result.run_after()
    rt.settle()
    assert ctx.responses == []
    assert last_label(fake) == "*已取消*"


def test_cancel_run_finalizes_each_request_once(rt: Any, fake: FakeFeishu, api: FeishuApi) -> None:
    p = make(rt, api, fake)
    p.present(FakeCtx("req-1", run_id="run-1"))
    p.present(FakeCtx("req-2", run_id="run-2"))
    assert p.cancel_run("run-1") == 1
    assert p.cancel_run("run-1") == 0
    rt.settle()
    assert len(fake.ops("patch")) == 1 and last_label(fake) == "*已取消*"
    assert (
        p.handle_action(submit({"0": "0", "1": ["1"]}, rid="req-2", message="om_2")).outcome
        == "accepted"
    )


class StubApi:
    """No HTTP at all (keeps the bound test fast)."""

    def __init__(self) -> None:
        self.n = 0

    def send_card(self, chat_id: str, card: Any, reply_to: str | None = None) -> str:
        self.n += 1
        return f"om_{self.n}"

    def patch_card(self, message_id: str, card: Any) -> None:
        pass


def test_many_lifecycles_stay_bounded(rt: Any, fake: FakeFeishu) -> None:
    p = make(rt, StubApi(), fake)  # type: ignore[arg-type]
    for i in range(5000):
        ctx = FakeCtx(f"req-{i}", run_id=f"run-{i}")
        p.present(ctx)
        ctx.settle(SettlementReason.CANCELLED)
    rt.settle()
    assert len(p) == 0
    assert p.registry.tombstone_count() <= 1000


# --- early callbacks: the form is visible before send_card answers -------------------------


def _present_blocked(rt: Any, fake: FakeFeishu, p: QuestionPresenter, ctx: FakeCtx) -> Any:
    """Present ``ctx`` on a thread while ``send_card`` is held; returns the result box."""
    fake.gate = threading.Event()
    fake.gate_ops = ("send",)
    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.setdefault("result", p.present(ctx)))
    thread.start()
    assert fake.entered.wait(5.0)
    record = p.get(ctx.request_id)
    assert record is not None and record.cell.state == "reserved" and record.message_id is None
    box["thread"] = thread
    return box


def test_early_submit_claims_a_reserved_form_delivery_first(
    rt: Any, fake: FakeFeishu, api: FeishuApi
) -> None:
    p = make(rt, api, fake)
    ctx = FakeCtx()
    box = _present_blocked(rt, fake, p, ctx)
    result = p.handle_action(submit({"0": "1", "1": ["2"]}))
    assert result.outcome == "accepted" and result.after != ()
    assert p.handle_action(submit({"0": "0", "1": ["0"]})).after == ()  # one claim
    fake.gate.set()  # send_card answers: the activation sees the claim
    box["thread"].join(5.0)
    assert box["result"] is UserInputPresentationResult.PRESENTED
    record = p.get("req-1")
    assert record is not None and record.cell.state == "claimed" and record.timer is None
    result.run_after()
    rt.settle()
    assert ctx.responses == [
        {
            "outcome": {"outcome": "selected", "optionId": "allow-once"},
            "answers": {"0": "Shanghai", "1": "Traces"},
        }
    ]
    assert last_label(fake) == "*已提交*" and len(fake.ops("patch")) == 1
    rt.advance(600.0)  # no expiry timer was armed
    assert len(fake.ops("patch")) == 1 and len(ctx.responses) == 1


def test_early_cancel_claims_a_reserved_form_responder_queued_first(
    rt: Any, fake: FakeFeishu, api: FeishuApi
) -> None:
    p = make(rt, api, fake, language="en")
    ctx = FakeCtx()
    box = _present_blocked(rt, fake, p, ctx)
    result = p.handle_action(cancel())
    assert result.outcome == "accepted" and result.after != ()
    result.run_after()  # queued on the run's projection queue, behind the delivery
    assert ctx.responses == []
    fake.gate.set()
    box["thread"].join(5.0)
    rt.settle()
    assert box["result"] is UserInputPresentationResult.PRESENTED
    assert ctx.responses == [{"outcome": {"outcome": "cancelled"}}]
    assert [c.path for c in fake.ops("patch")] == ["/open-apis/im/v1/messages/om_1"]
    assert last_label(fake) == "*Cancelled*"
    rt.advance(600.0)
    assert len(fake.ops("patch")) == 1 and p.get("req-1") is None


def test_early_callback_from_someone_else_claims_nothing(
    rt: Any, fake: FakeFeishu, api: FeishuApi
) -> None:
    p = make(rt, api, fake)
    ctx = FakeCtx()
    box = _present_blocked(rt, fake, p, ctx)
    assert p.handle_action(cancel(open_id="ou_other")).outcome == "forbidden"
    assert p.handle_action(cancel(chat_id="oc_other")).after == ()
    fake.gate.set()
    box["thread"].join(5.0)
    record = p.get("req-1")
    assert record is not None and record.cell.state == "pending"


def test_form_deadline_is_cut_before_the_context_deadline(
    rt: Any, fake: FakeFeishu, api: FeishuApi
) -> None:
    p = make(rt, api, fake)  # timeout_s=270
    ctx = FakeCtx()
    ctx.expires_at = rt.clock.now() + 100.0  # type: ignore[attr-defined]
    p.present(ctx)
    rt.advance(100.0 - EXPIRY_MARGIN - 0.01)
    assert ctx.responses == []
    rt.advance(0.01)
    assert ctx.responses == [{"outcome": {"outcome": "cancelled"}}]
    assert last_label(fake) == "*已过期*"
