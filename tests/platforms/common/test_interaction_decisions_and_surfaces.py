"""The platform contract's types: a Decision is the ACK then its work, one router tries
a platform's handlers in order, and every chat platform's presenters have the same
surface methods with the same arguments."""

from __future__ import annotations

import inspect
import json
import threading
from typing import Any

import pytest
from channelkit.core import ChannelBusy, ChannelClosed, InboundMessage
from channelkit.platforms.common.contract import (
    Decision,
    Interaction,
    OutputSurface,
    QuestionSurface,
)
from channelkit.platforms.common.router import InteractionRouter, decide_inbound
from channelkit.platforms.dingtalk.approvals import ApprovalCards
from channelkit.platforms.dingtalk.output import DingtalkPresenter
from channelkit.platforms.discord.approvals import DiscordApprovals
from channelkit.platforms.discord.output import SegmentMessages
from channelkit.platforms.discord.questions import DiscordQuestions
from channelkit.platforms.feishu.approvals import FeishuApprovalPresenter
from channelkit.platforms.feishu.output import OutputCardPresenter
from channelkit.platforms.feishu.questions import QuestionPresenter
from channelkit.platforms.slack.approvals import SlackApprovals
from channelkit.platforms.slack.output import SegmentStreams
from channelkit.platforms.slack.questions import SlackQuestions
from channelkit.platforms.telegram.approvals import TelegramApprovalPresenter
from channelkit.platforms.telegram.output import SegmentOutput
from channelkit.platforms.telegram.questions import TelegramQuestionPresenter


def press(kind: str = "button", **kw: Any) -> Interaction:
    return Interaction(kind=kind, platform="test", actor_id="u1", **kw)  # type: ignore[arg-type]


# -- Decision ----------------------------------------------------------------------------


def test_then_keeps_the_work_in_order_and_runs_nothing_before_run_after() -> None:
    ran: list[str] = []
    decision = Decision.ack({"ok": 1}).then(lambda: ran.append("a")).then(lambda: ran.append("b"))
    assert ran == [] and decision.outcome == "accepted"
    decision.run_after()
    assert ran == ["a", "b"]


def test_a_failing_work_item_is_logged_and_the_rest_still_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran: list[str] = []

    def boom() -> None:
        raise RuntimeError("x")

    Decision.ack().then(boom, lambda: ran.append("after")).run_after()
    assert ran == ["after"]
    assert "work after an interaction's ACK failed" in caplog.text


def test_merge_keeps_the_first_body_the_higher_status_and_both_works() -> None:
    ran: list[str] = []
    first = Decision.ignored().then(lambda: ran.append("answer"))
    second = Decision(status=503, body={"busy": True}, outcome="accepted").then(
        lambda: ran.append("run")
    )
    merged = first.merge(second)
    assert (merged.status, merged.body, merged.outcome) == (503, {"busy": True}, "accepted")
    merged.run_after()
    assert ran == ["answer", "run"]
    assert Decision.ack({"a": 1}).merge(Decision.ack({"b": 2})).body == {"a": 1}


def test_handed_to_posts_all_the_work_as_one_job_in_order() -> None:
    posted: list[Any] = []
    ran: list[int] = []
    decision = Decision.ack().then(lambda: ran.append(1), lambda: ran.append(2))
    handed = decision.handed_to(posted.append)
    assert len(handed.after) == 1
    handed.run_after()
    assert ran == [] and len(posted) == 1  # the hand-off only posts
    posted[0]()
    assert ran == [1, 2]
    assert Decision.ignored().handed_to(posted.append).after == ()


def test_to_response_carries_status_body_and_work_once() -> None:
    ran: list[int] = []
    response = Decision.ack({"toast": "hi"}, status=200).then(lambda: ran.append(1)).to_response()
    assert response.status == 200 and json.loads(response.body) == {"toast": "hi"}
    response.run_after()
    response.run_after()
    assert ran == [1]
    assert Decision.ignored().to_response().body == b"{}"
    assert Decision.ignored(b"raw").to_response().body == b"raw"


def test_bad_decisions_and_interactions_name_the_field() -> None:
    with pytest.raises(ValueError, match="Decision.status"):
        Decision(status=42)
    with pytest.raises(TypeError, match="Decision.after"):
        Decision(after=[lambda: None])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Decision.after"):
        Decision(after=("not callable",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Interaction.kind"):
        press(kind="swipe")


def test_a_decision_is_immutable() -> None:
    decision = Decision.ack()
    with pytest.raises(AttributeError):
        decision.status = 500  # type: ignore[misc]
    assert decision.then(lambda: None) is not decision and decision.after == ()


# -- the router ---------------------------------------------------------------------------


def test_the_first_handler_that_decides_wins_and_later_ones_are_not_asked() -> None:
    asked: list[str] = []

    def not_mine(i: Interaction) -> Decision | None:
        asked.append("not_mine")
        return None

    def mine(i: Interaction) -> Decision | None:
        asked.append("mine")
        return Decision.ack({"who": "mine"})

    def never(i: Interaction) -> Decision | None:
        asked.append("never")
        return Decision.ack({"who": "never"})

    decision = InteractionRouter((not_mine, mine, never)).route(press())
    assert decision.body == {"who": "mine"} and asked == ["not_mine", "mine"]


def test_no_handler_claims_it_the_fallback_answers() -> None:
    router = InteractionRouter(
        (lambda i: None,), fallback=lambda i: Decision.ignored({"unknown": i.token})
    )
    assert router.route(press(token="t-1")).body == {"unknown": "t-1"}
    assert InteractionRouter((lambda i: None,)).route(press()).body is None


def test_a_raising_handler_is_answered_with_the_error_decision_never_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def boom(i: Interaction) -> Decision | None:
        raise RuntimeError("bad payload")

    router = InteractionRouter((boom,), on_error=Decision.ignored({"err": 1}), name="t")
    assert router.route(press()).body == {"err": 1}
    assert "[t] button handler failed" in caplog.text
    with pytest.raises(ValueError, match="handlers"):
        InteractionRouter(())


class _Channel:
    name = "fake"

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error

    def handle_inbound(self, message: InboundMessage, *, defer: list[Any] | None = None) -> Any:
        if self.error is not None:
            raise self.error
        assert defer is not None
        defer.append(lambda: None)
        return object()


def _msg() -> InboundMessage:
    return InboundMessage(channel_name="fake", chat_id="c", sender_id="u", text="hi")


def test_decide_inbound_defers_the_start_and_answers_503_when_closed() -> None:
    outcome, decision = decide_inbound(_Channel(), _msg())  # type: ignore[arg-type]
    assert outcome == "accepted" and decision.status == 200 and len(decision.after) == 1
    outcome, decision = decide_inbound(_Channel(ChannelBusy("full")), _msg())  # type: ignore[arg-type]
    assert outcome == "busy" and decision.status == 200 and decision.after == ()
    outcome, decision = decide_inbound(_Channel(ChannelClosed("closed")), _msg())  # type: ignore[arg-type]
    assert outcome == "closed" and decision.status == 503


# -- the surfaces --------------------------------------------------------------------------

OUTPUT_SURFACES = [
    DingtalkPresenter,
    OutputCardPresenter,
    SegmentOutput,
    SegmentStreams,
    SegmentMessages,
]
QUESTION_SURFACES = [
    DingtalkPresenter,
    ApprovalCards,
    QuestionPresenter,
    FeishuApprovalPresenter,
    TelegramQuestionPresenter,
    TelegramApprovalPresenter,
    SlackQuestions,
    SlackApprovals,
    DiscordQuestions,
    DiscordApprovals,
]


def _required(fn: Any) -> list[str]:
    """The parameters a caller must pass (beyond self)."""
    return [
        p.name
        for p in list(inspect.signature(fn).parameters.values())[1:]
        if p.default is inspect.Parameter.empty
    ]


@pytest.mark.parametrize("cls", OUTPUT_SURFACES, ids=lambda c: c.__qualname__)
def test_every_output_surface_takes_the_whole_segment(cls: type) -> None:
    assert _required(cls.open_segment) == ["segment"]
    assert _required(cls.append) == ["segment", "chunk"]
    assert _required(cls.close_segment) == ["segment", "reason"]


@pytest.mark.parametrize("cls", QUESTION_SURFACES, ids=lambda c: c.__qualname__)
def test_every_question_surface_presents_the_request_alone(cls: type) -> None:
    assert len(_required(cls.present)) == 1  # the request; nothing else is needed


@pytest.mark.parametrize(
    "cls", [SlackApprovals, TelegramApprovalPresenter, DiscordApprovals], ids=lambda c: c.__name__
)
def test_an_approval_presenter_without_a_prompt_maker_refuses_a_request_without_text(
    cls: type,
) -> None:
    presenter = cls(object(), submit=lambda key, fn: fn(), clock=_Clock())
    with pytest.raises(ValueError, match="^text: "):
        presenter.present(object())
    assert presenter.live_count() == 0  # nothing registered, nothing sent


def test_runtime_checkable_surfaces_recognize_a_segment_output() -> None:
    output = SegmentOutput(lambda chat, text, thread: None)
    assert isinstance(output, OutputSurface)
    assert not isinstance(object(), OutputSurface)
    presenter = TelegramApprovalPresenter(
        object(),  # type: ignore[arg-type]
        submit=lambda key, fn: fn(),
        clock=_Clock(),
    )
    assert isinstance(presenter, QuestionSurface)


class _Clock:
    def now(self) -> float:
        return 0.0

    def time(self) -> float:
        return 0.0


def test_decisions_are_safe_to_share_between_threads() -> None:
    ran: list[int] = []
    lock = threading.Lock()

    def work() -> None:
        with lock:
            ran.append(1)

    response = Decision.ack().then(work).to_response()
    threads = [threading.Thread(target=response.run_after) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert ran == [1]  # the response runs its work once, whoever asks
