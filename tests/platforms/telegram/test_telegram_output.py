"""Telegram plain output per segment: text before a question is sent before the question.

A real ``TelegramChannel`` on the real ``ChannelBase``; the Bot API is requests-mock.
``Bot`` records the messages Telegram accepted, in order, and can fail or hold sends.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest
import requests_mock as rm
from channelkit.core import (
    ChannelPromptOwner,
    LifecycleType,
    OutputSegmentContext,
    SessionTarget,
)
from channelkit.core.text import MSG_CANCELLED
from channelkit.platforms.common import TRUNCATION_MARKER
from channelkit.platforms.telegram.output import SegmentOutput, split_message
from channelkit.testing import (
    ScriptedBridge,
    ask,
    boundary,
    chunk,
    fail,
    final,
    gate,
    question_request,
)

from tests.platforms._shared import question
from tests.platforms.telegram.tg_env import CHAT, Env, url

WAIT = 5.0


class Bot:
    """``sendMessage`` on the mock: records accepted messages; ``fail`` holds the call
    numbers (0-based) that answer 500; ``hold`` holds a text whose send waits for
    ``release``."""

    def __init__(self, mock: rm.Mocker, *, fail: set[int] | None = None) -> None:
        self.lock = threading.Lock()
        self.delivered: list[dict[str, Any]] = []
        self.calls = itertools.count()
        self.ids = itertools.count(100)
        self.fail = fail or set()
        self.hold: str | None = None
        self.held = threading.Event()
        self.release = threading.Event()
        mock.post(url("sendMessage"), json=self._respond)

    def _respond(self, request: Any, context: Any) -> dict[str, Any]:
        body = request.json()
        if self.hold is not None and body["text"] == self.hold:
            self.held.set()
            assert self.release.wait(WAIT)
        with self.lock:
            if next(self.calls) in self.fail:
                context.status_code = 500
                return {"ok": False, "error_code": 500, "description": "boom"}
            mid = next(self.ids)
            self.delivered.append({**body, "message_id": mid})
        return {
            "ok": True,
            "result": {"message_id": mid, "date": 0, "chat": {"id": CHAT, "type": "private"}},
        }

    @property
    def texts(self) -> list[str]:
        with self.lock:
            return [m["text"] for m in self.delivered]

    def kinds(self) -> list[str]:
        """``q`` for a question message (inline keyboard), else the text."""
        with self.lock:
            return ["q" if "reply_markup" in m else m["text"] for m in self.delivered]

    def questions(self) -> list[dict[str, Any]]:
        with self.lock:
            return [m for m in self.delivered if "reply_markup" in m]


def _env(rt: Any, mock: rm.Mocker, steps: list[Any], **cfg: Any) -> Env:
    return Env(rt, mock, ScriptedBridge(steps), **cfg)


def _ask(request_id: str = "req-1", *, emit_boundary: bool = True) -> Any:
    return ask(
        lambda s: question_request(request_id, s, [question("Env", ["Prod", "Staging"])]),
        emit_boundary=emit_boundary,
    )


def _answer(env: Env, bot: Bot, label_index: int = 1) -> None:
    """The owner taps an option of the (single) live question."""
    env.rt.wait_for(lambda: len(bot.questions()) == 1)
    message = bot.questions()[-1]
    data = message["reply_markup"]["inline_keyboard"][label_index][0]["callback_data"]
    env.tap(data, message["message_id"])


def _done(env: Env) -> None:
    env.rt.wait_for(lambda: any(e.type.terminal for e in env.channel.events))
    env.settle()


# --- the acceptance order ----------------------------------------------------------------


@pytest.mark.parametrize("emit_boundary", [True, False], ids=["boundary", "input_requested"])
def test_text_question_answer_text_in_order_without_repetition(rt, mock, emit_boundary) -> None:  # type: ignore[no-untyped-def]
    bot = Bot(mock)
    steps = [
        chunk("Checking the "),
        chunk("cluster. "),
        _ask(emit_boundary=emit_boundary),
        chunk("Deploying to "),
        chunk("Staging."),
    ]
    env = _env(rt, mock, steps)
    env.message("deploy")
    _answer(env, bot)
    _done(env)
    assert bot.kinds() == ["Checking the cluster. ", "q", "Deploying to Staging."]
    assert env.bridge.responses[0][1]["answers"] == {"0": "Staging"}
    assert env.channel.events[-1].type is LifecycleType.COMPLETED
    assert env.channel.output.live_runs == 0  # removed at the terminal event
    env.channel.close()


def test_question_waits_for_the_pre_question_text(rt, mock) -> None:  # type: ignore[no-untyped-def]
    """The flush and the question run on the run's lane: a slow text send holds the
    question back, it never overtakes it."""
    bot = Bot(mock)
    bot.hold = "Before. "
    env = _env(rt, mock, [chunk("Before. "), _ask(), chunk("After.")])
    env.message("go")
    assert bot.held.wait(WAIT)
    rt.pool.wait_idle(0.1)  # the run is blocked in the agent; give the lane a chance
    assert bot.questions() == [] and bot.texts == []
    bot.release.set()
    _answer(env, bot)
    _done(env)
    assert bot.kinds() == ["Before. ", "q", "After."]
    env.channel.close()


def test_two_questions_in_a_run_each_get_their_own_text_first(rt, mock) -> None:  # type: ignore[no-untyped-def]
    bot = Bot(mock)
    steps = [chunk("One. "), _ask("req-1"), chunk("Two. "), _ask("req-2"), chunk("Three.")]
    env = _env(rt, mock, steps)
    env.message("go")
    _answer(env, bot)
    rt.wait_for(lambda: len(bot.questions()) == 2)
    second = bot.questions()[-1]
    env.tap(second["reply_markup"]["inline_keyboard"][0][0]["callback_data"], second["message_id"])
    _done(env)
    assert bot.kinds() == ["One. ", "q", "Two. ", "q", "Three."]
    env.channel.close()


def test_text_before_a_text_permission_prompt(rt, mock) -> None:  # type: ignore[no-untyped-def]
    bot = Bot(mock)
    env = _env(rt, mock, [chunk("Before. "), _ask(), chunk("After.")], native_questions=False)
    env.message("go")
    rt.wait_for(lambda: len(bot.texts) == 2)
    assert bot.texts[0] == "Before. " and bot.texts[1].startswith("Permission required")
    env.message("/deny")
    _done(env)
    # "After." follows the prompt; the "/deny" reply is sent from the pool and may land on
    # either side of it, so only the run's own messages are ordered here.
    run_texts = [t for t in bot.texts if t != "Permission denied."]
    assert run_texts[2:] == ["After."] and bot.texts.count("Before. ") == 1
    env.channel.close()


# --- runs without questions ----------------------------------------------------------------


def test_a_run_without_a_question_sends_its_text_once(rt, mock) -> None:  # type: ignore[no-untyped-def]
    bot = Bot(mock)
    env = _env(rt, mock, [chunk("Hello, "), chunk("world.")])
    env.message("hi")
    _done(env)
    assert bot.texts == ["Hello, world."]
    env.channel.close()


def test_a_final_text_that_was_never_streamed_is_sent_whole(rt, mock) -> None:  # type: ignore[no-untyped-def]
    bot = Bot(mock)
    env = _env(rt, mock, [final("Not streamed.")])
    env.message("hi")
    _done(env)
    assert bot.texts == ["Not streamed."]
    env.channel.close()


def test_a_boundary_without_a_question_flushes(rt, mock) -> None:  # type: ignore[no-untyped-def]
    bot = Bot(mock)
    release = threading.Event()
    env = _env(rt, mock, [chunk("Step 1."), boundary(), gate(release), chunk("Step 2.")])
    env.message("go")
    rt.wait_for(lambda: bot.texts == ["Step 1."])  # sent while the agent still works
    release.set()
    _done(env)
    assert bot.texts == ["Step 1.", "Step 2."]
    env.channel.close()


def test_nothing_is_sent_when_nothing_remains(rt, mock) -> None:  # type: ignore[no-untyped-def]
    bot = Bot(mock)
    env = _env(rt, mock, [chunk("All of it."), boundary()])
    env.message("go")
    _done(env)
    assert bot.texts == ["All of it."]
    assert env.channel.events[-1].type is LifecycleType.COMPLETED
    env.channel.close()


def test_final_text_minus_the_prefix_already_sent(rt, mock) -> None:  # type: ignore[no-untyped-def]
    # the agent streamed "A. " (flushed), then returned "A. B." without streaming "B."
    bot = Bot(mock)
    env = _env(rt, mock, [chunk("A. "), boundary(), final("A. B.")])
    env.message("go")
    _done(env)
    assert bot.texts == ["A. ", "B."]
    env.channel.close()


def test_a_final_text_not_starting_with_the_sent_text_is_sent_whole(rt, mock) -> None:  # type: ignore[no-untyped-def]
    bot = Bot(mock)
    env = _env(rt, mock, [chunk("A. "), boundary(), final("Something else.")])
    env.message("go")
    _done(env)
    assert bot.texts == ["A. ", "Something else."]
    env.channel.close()


def test_streamed_text_with_an_empty_final_is_still_sent(rt, mock) -> None:  # type: ignore[no-untyped-def]
    bot = Bot(mock)
    env = _env(rt, mock, [chunk("Streamed."), final("")])
    env.message("go")
    _done(env)
    assert bot.texts == ["Streamed."]
    env.channel.close()


def test_loop_runs_keep_the_whole_text(rt, mock) -> None:  # type: ignore[no-untyped-def]
    bot = Bot(mock)
    env = _env(rt, mock, [chunk("Nightly "), boundary(), chunk("report.")])
    target = SessionTarget("telegram", "cron", str(CHAT))
    env.channel.run_loop_prompt(target, "report").result(timeout=WAIT)
    env.settle()
    # no segments: one message at the end, a paragraph apart across the boundary
    assert bot.texts == ["Nightly \n\nreport."]
    env.channel.close()


# --- long text ------------------------------------------------------------------------------


def test_long_text_splits_at_4096(rt, mock) -> None:  # type: ignore[no-untyped-def]
    bot = Bot(mock)
    before = "x" * 9000
    after = "\n".join(f"line {i} " + "y" * 90 for i in range(60))  # ~6,000 chars
    env = _env(rt, mock, [chunk(before), _ask(), chunk(after)])
    env.message("go")
    _answer(env, bot)
    _done(env)
    kinds = bot.kinds()
    assert kinds.index("q") == 3  # three parts of the pre-question text, then the question
    assert "".join(kinds[:3]) == before
    assert all(len(t) <= 4096 for t in bot.texts)
    continuation = kinds[4:]
    assert len(continuation) == 2 and "\n".join(continuation) == after
    env.channel.close()


def test_a_segment_keeps_its_newest_20000_characters() -> None:
    sent: list[str] = []
    output = SegmentOutput(lambda chat, text, thread: sent.append(text))
    segment = _segment("run-1", "seg-1")
    for i in range(250):
        output.append(segment, f"{i:04d}" + "z" * 96)  # 25,000 chars in all
    output.segment_ended(segment, "response_boundary")
    flushed = "".join(sent)
    assert len(flushed) <= 20_000 and flushed.startswith(TRUNCATION_MARKER)
    assert flushed.endswith("0249" + "z" * 96)
    # the final text repeats everything streamed: nothing is left to send
    assert (
        output.final_text(
            _segment("run-1", "seg-2"), "".join(f"{i:04d}" + "z" * 96 for i in range(250))
        )
        == ""
    )


# --- failures ---------------------------------------------------------------------------------


def test_a_failed_flush_is_sent_at_completion(rt, mock) -> None:  # type: ignore[no-untyped-def]
    bot = Bot(mock, fail={0})  # the pre-question text fails
    env = _env(rt, mock, [chunk("Before. "), _ask(), chunk("After.")])
    env.message("go")
    _answer(env, bot, 0)
    _done(env)
    # the question still went out; the lost text comes first with the final answer
    assert bot.kinds() == ["q", "Before. After."]
    assert env.channel.events[-1].type is LifecycleType.COMPLETED
    env.channel.close()


def test_a_failed_flush_goes_out_with_the_next_flush(rt, mock) -> None:  # type: ignore[no-untyped-def]
    bot = Bot(mock, fail={0})
    env = _env(rt, mock, [chunk("One. "), boundary(), chunk("Two. "), boundary(), chunk("3.")])
    env.message("go")
    _done(env)
    assert bot.texts == ["One. Two. ", "3."]
    env.channel.close()


def test_a_partly_sent_long_flush_resumes_where_it_stopped() -> None:
    sent: list[str] = []
    calls = itertools.count()

    def send(chat: str, text: str, thread: str | None) -> None:
        if next(calls) == 1:
            raise RuntimeError("network down")
        sent.append(text)

    output = SegmentOutput(send)
    first = _segment("run-1", "seg-1")
    text = "a" * 4096 + "b" * 4096 + "c" * 10
    output.append(first, text)
    output.segment_ended(first, "input_requested")
    assert sent == ["a" * 4096]
    last = _segment("run-1", "seg-2")
    output.append(last, "Done.")
    due = output.final_text(last, text + "Done.")
    assert due == "b" * 4096 + "c" * 10 + "Done."
    output.send_final("1", due, None)
    assert "".join(sent) == text + "Done."


def test_a_final_send_that_fails_once_is_retried_after_the_run_completed(rt, mock) -> None:  # type: ignore[no-untyped-def]
    bot = Bot(mock, fail={0})
    env = _env(rt, mock, [chunk("Answer.")])
    env.message("go")
    _done(env)
    # the answer is in the delivery chain's hands: the run completes, nothing is lost
    assert env.channel.events[-1].type is LifecycleType.COMPLETED
    assert bot.texts == []
    rt.advance(60.0)  # past the capped backoff: the retry sends it, once
    assert bot.texts == ["Answer."]
    assert env.channel.output.live_runs == 0
    env.channel.close()


def test_a_final_send_every_path_refuses_fails_the_run_in_delivery(rt, mock) -> None:  # type: ignore[no-untyped-def]
    refused = {"ok": False, "error_code": 400, "description": "Bad Request: chat not found"}
    mock.post(url("sendMessage"), status_code=400, json=refused)
    env = _env(rt, mock, [chunk("Answer.")])
    env.message("go")
    _done(env)
    failed = env.channel.events[-1]
    assert failed.type is LifecycleType.FAILED and failed.phase == "delivery"
    assert env.channel.output.live_runs == 0
    assert env.channel.delivery_health.snapshot()["failed"] == 1
    env.channel.close()


# --- cancelled and failed runs keep today's behaviour -------------------------------------------


def test_a_failed_run_keeps_the_text_written_before_the_failure_notice(rt, mock) -> None:  # type: ignore[no-untyped-def]
    bot = Bot(mock)
    env = _env(rt, mock, [chunk("Sent. "), boundary(), chunk("partial"), fail(RuntimeError("x"))])
    env.message("go")
    _done(env)
    # what the agent wrote before failing stays, the failure notice follows it (issue 23)
    assert bot.texts == ["Sent. ", "partial\n\n[failed]", "Failed, please retry."]
    assert env.channel.events[-1].type is LifecycleType.FAILED
    assert env.channel.output.live_runs == 0
    env.channel.close()


def test_a_cancelled_run_sends_no_unsent_text(rt, mock) -> None:  # type: ignore[no-untyped-def]
    bot = Bot(mock)
    never = threading.Event()
    env = _env(rt, mock, [chunk("Before. "), _ask(), chunk("After."), gate(never, timeout=10)])
    env.message("go")
    rt.wait_for(lambda: len(bot.questions()) == 1)
    env.message("/cancel")
    _done(env)
    assert env.channel.events[-1].type is LifecycleType.CANCELLED
    assert bot.kinds() == ["Before. ", "q", MSG_CANCELLED]
    assert env.channel.output.live_runs == 0
    env.channel.close()


def test_split_message_keeps_every_character_but_cut_newlines() -> None:
    text = ("word " * 1000 + "\n") * 3
    parts = split_message(text)
    assert all(0 < len(p) <= 4096 for p in parts)
    assert "".join(parts).replace("\n", "") == text.replace("\n", "")


def _segment(run_id: str, segment_id: str) -> OutputSegmentContext:
    target = SessionTarget("telegram", "42", "1")
    return OutputSegmentContext(
        "telegram", "sess-1", run_id, segment_id, ChannelPromptOwner("42"), target
    )
