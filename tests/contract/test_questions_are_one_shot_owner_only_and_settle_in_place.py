"""Contract: a question is shown natively (at most one native input per run, else the
text prompt), answered once and only by its owner, settles in place (submitted with the
answers / cancelled / expired on the FakeClock) and never shows Submitted before the
responder accepted; on every chat platform through its emulator."""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

import pytest
from channelkit.agents import Turn
from channelkit.errors import QuestionError
from contract_drivers import BOUND_S, FOREIGN, wait_for
from contract_harness import (
    COLOR,
    LIFETIME_S,
    SIZE,
    Context,
    ask,
    pending,
)

pytestmark = pytest.mark.slow  # many seconds of real time: its file starts first

# -- questions -----------------------------------------------------------------------------------


def test_an_answered_question_reaches_the_agent_and_settles_submitted(ctx: Context) -> None:
    d = ctx.driver
    d.require("native_questions")
    ctx.script.fn = ask(ctx.script, COLOR)
    d.send("ask")
    prompt = pending(d, "Pick a color?")
    d.answer(prompt, "Blue")
    assert ctx.script.outcome() == {"0": "Blue"}
    settled = d.wait_prompt("Pick a color?", "submitted")
    assert settled.id == prompt.id  # settled in place
    assert "Blue" in d.shown(settled)  # with the answer


def test_a_question_is_one_shot_a_second_answer_changes_nothing(ctx: Context) -> None:
    d = ctx.driver
    d.require("native_questions")
    ctx.script.fn = ask(ctx.script, COLOR)
    d.send("ask")
    prompt = pending(d, "Pick a color?")
    release = ctx.agent.hold_next()
    d.answer(prompt, "Blue")
    assert ctx.agent.entered.wait(BOUND_S)
    second = d.prompt("Pick a color?")
    if second is not None and second.state == "pending" and second.id == prompt.id:
        d.answer(second, "Red")  # the same form, answered again while the first is accepted
    release.set()
    assert ctx.script.outcome() == {"0": "Blue"}
    settled = d.wait_prompt("Pick a color?", "submitted")
    assert settled.id == prompt.id
    assert ctx.script.no_outcome()  # the second answer reached nobody


def test_a_foreign_users_answer_is_refused_then_the_owners_answer_works(ctx: Context) -> None:
    d = ctx.driver
    d.require("native_questions")
    d.require("foreign_users")
    ctx.script.fn = ask(ctx.script, COLOR)
    d.send("ask")
    prompt = pending(d, "Pick a color?")
    d.answer(prompt, "Red", user=FOREIGN)
    if d.caps.private_notice is None:
        wait_for(lambda: d.notices(FOREIGN), "the private notice to the foreign user")
    assert ctx.script.no_outcome(0.3)
    assert d.prompt("Pick a color?").state == "pending"
    d.answer(d.prompt("Pick a color?"), "Blue")
    assert ctx.script.outcome() == {"0": "Blue"}
    d.wait_prompt("Pick a color?", "submitted")


def test_the_forms_cancel_settles_cancelled_and_the_agent_sees_it(ctx: Context) -> None:
    d = ctx.driver
    d.require("native_questions")
    ctx.script.fn = ask(ctx.script, COLOR)
    d.send("ask")
    prompt = pending(d, "Pick a color?")
    d.cancel(prompt)
    assert isinstance(ctx.script.outcome(), QuestionError)
    assert d.wait_prompt("Pick a color?", "cancelled").id == prompt.id


def test_an_unanswered_question_expires_on_the_fake_clock(own_ctx: Context) -> None:
    """No answer within the lifetime (FakeClock, no real waiting): the form ends Expired
    in place with nothing left to press, the agent's question ends, and the run goes on
    (its text after the question shows)."""
    ctx = own_ctx
    d = ctx.driver
    d.require("native_questions")
    started = time.monotonic()

    def asks(turn: Turn) -> str:
        try:
            answers: Any = turn.ask([COLOR])
        except QuestionError as exc:
            answers = exc
        ctx.script.outcomes.put(answers)
        return "No answers, going on."

    ctx.script.fn = asks
    d.send("ask")
    prompt = pending(d, "Pick a color?")
    assert d.inputs(prompt)
    d.clock.advance(LIFETIME_S - 5)
    assert ctx.script.no_outcome(0.2)
    assert d.prompt("Pick a color?").state == "pending"  # not before its lifetime
    d.clock.advance(6)
    expired = d.wait_prompt("Pick a color?", "expired")
    assert expired.id == prompt.id
    wait_for(lambda: not d.inputs(expired), f"nothing left to press: {d.prompts()}")
    assert isinstance(ctx.script.outcome(), QuestionError)
    d.wait_segment("No answers, going on.", "completed")
    assert time.monotonic() - started < 5.0  # 270 s of lifetime, no real waiting


def test_a_second_question_in_the_same_run_gets_the_text_prompt(ctx: Context) -> None:
    d = ctx.driver
    d.require("native_questions")
    first_asked = threading.Event()

    def two(turn: Turn) -> str | None:
        got: dict[str, Any] = {}

        def size() -> None:
            first_asked.wait(BOUND_S)
            try:
                got["size"] = turn.ask([SIZE])
            except QuestionError as exc:
                got["size"] = exc

        helper = threading.Thread(target=size, daemon=True)
        helper.start()
        try:
            first_asked.set()
            got["color"] = turn.ask([COLOR])
        except QuestionError as exc:
            got["color"] = exc
        helper.join(BOUND_S)
        ctx.script.outcomes.put(got)
        return None

    ctx.script.fn = two
    d.send("two")
    wait_for(lambda: len(d.pg.channel.pending_request_ids()) == 2, "both questions pending")
    # a question is pending once the channel holds it; its prompt is posted right after
    wait_for(
        lambda: [p for p in d.prompts() if not p.native],
        lambda: f"the second question's text prompt: {d.bot_views()}",
        tick=d.tick,
    )
    d.settle()
    natives = [p for p in d.prompts() if p.native and p.state == "pending"]
    assert len(natives) == 1, natives  # at most one native input per run
    d.send("/cancel")
    ctx.script.outcome()


def test_a_form_never_shows_submitted_before_the_responder_accepted(ctx: Context) -> None:
    """The owner submits while the responder is held; ``/deny`` arrives meanwhile. The
    form shows nothing final before the responder answered, and then exactly what won:
    Submitted only when the held answer was accepted, else the request's own end."""
    d = ctx.driver
    d.require("native_questions")
    ctx.script.fn = ask(ctx.script, COLOR)
    d.send("ask")
    prompt = pending(d, "Pick a color?")
    release = ctx.agent.hold_next()
    d.answer(prompt, "Blue")
    assert ctx.agent.entered.wait(BOUND_S)
    d.settle()
    assert d.prompt("Pick a color?").state != "submitted"  # not before the responder
    d.send("/deny")
    try:  # /deny either wins (the agent's question ends now) or is refused
        early = ctx.script.outcomes.get(timeout=1.0)
    except queue.Empty:
        early = None
    release.set()
    accepted = ctx.agent.results.get(timeout=BOUND_S)
    outcome = early if early is not None else ctx.script.outcome()
    if accepted:
        assert outcome == {"0": "Blue"}
        d.wait_prompt("Pick a color?", "submitted")
    else:  # /deny won: the form must not claim the lost answer
        assert isinstance(outcome, QuestionError), outcome
        wait_for(
            lambda: d.prompt("Pick a color?").state in ("cancelled", "expired"),
            f"the form to end as the request did: {d.prompts()}",
            tick=d.tick,
        )
        d.settle()
        assert d.prompt("Pick a color?").state != "submitted"


def test_a_submit_after_deny_won_never_shows_submitted(ctx: Context) -> None:
    """``/deny`` is accepted first (its answer held at the responder); the owner's submit
    lands meanwhile and loses: the form ends as the request did, never Submitted."""
    d = ctx.driver
    d.require("native_questions")
    ctx.script.fn = ask(ctx.script, COLOR)
    d.send("ask")
    prompt = pending(d, "Pick a color?")
    release = ctx.agent.hold_next()
    d.send("/deny")
    assert ctx.agent.entered.wait(BOUND_S)  # /deny reached the responder and waits there
    d.answer(prompt, "Blue")
    d.settle()
    assert d.prompt("Pick a color?").state != "submitted"
    release.set()
    assert ctx.agent.results.get(timeout=BOUND_S) is True  # /deny won
    assert isinstance(ctx.script.outcome(), QuestionError)
    wait_for(
        lambda: d.prompt("Pick a color?").state in ("cancelled", "expired"),
        f"the form to end as the request did: {d.prompts()}",
        tick=d.tick,
    )
    d.settle()
    assert d.prompt("Pick a color?").state != "submitted"
    assert ctx.script.no_outcome()


def test_a_deny_that_ends_the_turn_leaves_the_form_cancelled_not_expired(ctx: Context) -> None:
    """``/deny`` reaches the agent, whose turn then ends at once, while the deny's own
    settlement is still on its way (held at the responder). The run's end waits for it:
    the form ends cancelled (what the deny did), not expired (what a run ending on an
    unanswered question shows)."""
    d = ctx.driver
    d.require("native_questions")
    ctx.script.fn = ask(ctx.script, COLOR)
    d.send("ask")
    pending(d, "Pick a color?")
    release = ctx.agent.hold_resolution()
    d.send("/deny")
    assert ctx.agent.entered.wait(BOUND_S)  # the agent has the deny; its settlement is held
    assert isinstance(ctx.script.outcome(), QuestionError)  # and the turn ends
    try:  # give the run's end the time to label the form before the settlement
        wait_for(
            lambda: d.prompt("Pick a color?").state != "pending",
            "the form to end",
            timeout=1.0,
            tick=d.tick,
        )
    except AssertionError:
        pass  # it waits for the deny's settlement (what must happen)
    release.set()
    wait_for(
        lambda: (p := d.prompt("Pick a color?")) is not None and p.state != "pending",
        f"the form to end: {d.prompts()}",
        tick=d.tick,
    )
    d.settle()
    assert d.prompt("Pick a color?").state == "cancelled", d.prompts()


def test_without_native_input_a_question_is_the_text_prompt(ctx: Context) -> None:
    d = ctx.driver
    if d.caps.native_questions is None:
        pytest.skip(f"{d.platform} shows questions natively (the other question tests)")
    ctx.script.fn = ask(ctx.script, COLOR)
    d.send("ask")
    prompt = wait_for(lambda: [p for p in d.prompts() if not p.native], "the text prompt")[0]
    assert "/approve" in prompt.text and "/deny" in prompt.text
    d.send("/deny")
    assert isinstance(ctx.script.outcome(), QuestionError)
    wait_for(lambda: not d.pg.channel.pending_request_ids(), "no question waiting")
