"""The platform contract, written once and run on every chat platform through its emulator.

Each test drives the real channel of a platform (``Playground``: emulator + channel over
real HTTP/WebSocket on 127.0.0.1) with a scripted FunctionAgent and a FakeClock, through
the driver of :mod:`contract_drivers`. One emulator+channel serves every test of a
platform (reset between tests through the emulator's API). A rule a platform cannot
offer is skipped with the reason its driver declares, never silently.
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from channelkit.agents import FunctionAgent, Question, Turn
from channelkit.agents.base import PermissionResponse
from channelkit.core import InboundMessage
from channelkit.errors import QuestionError
from channelkit.runtime import FakeClock
from contract_drivers import BOUND_S, DRIVERS, FOREIGN, Driver, wait_for

LIFETIME_S = 270.0  # the question lifetime every channel uses by default
COLOR = Question("Pick a color?", ["Red", "Blue"], header="Color")
SIZE = Question("Pick a size?", ["Small", "Large"], header="Size")


class Script:
    """The agent of the shared channel: each test sets ``fn``; outcomes go to a queue."""

    def __init__(self) -> None:
        self.fn: Callable[[Turn], str | None] = lambda turn: "idle"
        self.outcomes: queue.Queue[Any] = queue.Queue()

    def __call__(self, turn: Turn) -> str | None:
        return self.fn(turn)

    def outcome(self) -> Any:
        try:
            return self.outcomes.get(timeout=BOUND_S)
        except queue.Empty:
            raise AssertionError("the agent reported no outcome") from None

    def no_outcome(self, within: float = 0.2) -> bool:
        try:
            got = self.outcomes.get(timeout=within)
        except queue.Empty:
            return True
        self.outcomes.put(got)
        return False


class GatedAgent(FunctionAgent):
    """A FunctionAgent whose next answer (``hold_next``) waits at the responder until the
    test releases it: a deterministic interleaving of answers and the responder."""

    def __init__(self, fn: Callable[[Turn], str | None]) -> None:
        super().__init__(fn, question_timeout=3600.0, name="contract")
        self._lock_gate = threading.Lock()
        self._hold: threading.Event | None = None
        self.entered = threading.Event()
        self.results: queue.Queue[bool] = queue.Queue()

    def hold_next(self) -> threading.Event:
        release = threading.Event()
        with self._lock_gate:
            self._hold = release
        self.entered.clear()
        return release

    def respond_to_permission(self, request_id: str, response: PermissionResponse) -> bool:
        with self._lock_gate:
            hold, self._hold = self._hold, None
        if hold is None:
            return super().respond_to_permission(request_id, response)
        self.entered.set()
        hold.wait(BOUND_S)
        accepted = super().respond_to_permission(request_id, response)
        self.results.put(accepted)
        return accepted


class Context:
    def __init__(self, driver: Driver, script: Script, agent: GatedAgent) -> None:
        self.driver = driver
        self.script = script
        self.agent = agent


@contextmanager
def _open(platform: str, **channel_options: Any) -> Iterator[Context]:
    from channelkit.playground.app import PLATFORMS as EMULATED

    if platform not in EMULATED:
        pytest.skip(f"{platform} has a contract driver but the playground cannot emulate it yet")
    script = Script()
    agent = GatedAgent(script)
    clock = FakeClock(start=time.monotonic(), wall_start=time.time())
    try:
        with DRIVERS[platform].start(agent, clock, **channel_options) as driver:
            yield Context(driver, script, agent)
    finally:
        agent.close()


@pytest.fixture(scope="module", params=sorted(DRIVERS))
def platform_ctx(request: pytest.FixtureRequest) -> Iterator[Context]:
    """One emulator + channel per platform for the module's tests."""
    with _open(request.param) as context:
        yield context


@pytest.fixture
def ctx(platform_ctx: Context) -> Iterator[Context]:
    """The platform's shared channel, reset after the test."""
    platform_ctx.script.fn = lambda turn: "idle"
    while not platform_ctx.script.outcomes.empty():
        platform_ctx.script.outcomes.get_nowait()
    yield platform_ctx
    if platform_ctx.driver.pg.channel.pending_request_ids():
        platform_ctx.driver.send("/cancel")
    platform_ctx.driver.reset()


@pytest.fixture(params=sorted(DRIVERS))
def own_ctx(request: pytest.FixtureRequest) -> Iterator[Context]:
    """A channel of its own, for a test that moves the clock far (signed callbacks carry
    the real time, so a clock minutes ahead would refuse the next test's callbacks)."""
    with _open(request.param) as context:
        yield context


def _known_defect(d: Driver, rule: str, request: pytest.FixtureRequest) -> None:
    reason = d.known_defects.get(rule)
    if reason is not None:
        request.node.add_marker(pytest.mark.xfail(strict=True, reason=f"{d.platform}: {reason}"))


def _token() -> str:
    return uuid.uuid4().hex[:8]


def _hold_until_cancelled(
    script: Script, text: str, said: threading.Event | None = None
) -> Callable[[Turn], str | None]:
    def fn(turn: Turn) -> str | None:
        turn.say(text)
        if said is not None:
            said.set()
        deadline = time.monotonic() + BOUND_S
        while not turn.cancelled and time.monotonic() < deadline:
            time.sleep(0.01)
        script.outcomes.put("cancelled" if turn.cancelled else "not cancelled")
        return None

    return fn


def _ask(script: Script, *questions: Question) -> Callable[[Turn], str | None]:
    def fn(turn: Turn) -> str | None:
        try:
            answers: Any = turn.ask(list(questions))
        except QuestionError as exc:
            answers = exc
        script.outcomes.put(answers)
        return None

    return fn


# -- output segments -----------------------------------------------------------------------------


def test_a_reply_ends_its_segment_completed(ctx: Context) -> None:
    token = _token()
    ctx.script.fn = lambda turn: f"echo {token}"
    ctx.driver.send("hello")
    ctx.driver.wait_segment(token, "completed")
    assert ctx.driver.failures() == 0


def test_the_owners_stop_cancels_the_run_and_ends_its_segment_cancelled(ctx: Context) -> None:
    d = ctx.driver
    token = _token()
    said = threading.Event()
    ctx.script.fn = _hold_until_cancelled(ctx.script, f"holding {token}", said)
    d.send("hold")
    assert said.wait(BOUND_S)
    if d.caps.live_output is None:
        running = d.wait_segment(token, "running")
        if d.caps.stop_button is None:
            running = d.wait_stoppable(token)
    else:  # nothing shows before the segment ends
        running = None
    d.stop_run(running)  # type: ignore[arg-type]
    assert ctx.script.outcome() == "cancelled"
    if d.caps.live_output is None:
        d.wait_segment(token, "cancelled")
    assert d.pg.channel.wait_idle(BOUND_S)
    d.settle()
    assert all(s.state != "completed" for s in d.segments() if token in s.text), d.segments()
    assert d.failures() == 0


def test_a_stop_cancels_exactly_its_own_run_and_a_run_in_another_chat_goes_on(
    ctx: Context,
) -> None:
    """Run A (the emulated chat) and run B (another chat and person, handed to the
    channel as a real human message) run at once; stopping A leaves B running."""
    d = ctx.driver
    token = _token()
    said_a, entered_b, release_b = threading.Event(), threading.Event(), threading.Event()
    hold_a = _hold_until_cancelled(ctx.script, f"holding {token}", said_a)

    def fn(turn: Turn) -> str | None:
        if turn.text != "run B":
            return hold_a(turn)
        entered_b.set()
        deadline = time.monotonic() + BOUND_S
        while not turn.cancelled and not release_b.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)
        ctx.script.outcomes.put("B cancelled" if turn.cancelled else "B released")
        return None

    ctx.script.fn = fn
    d.send("hold")
    assert said_a.wait(BOUND_S)
    channel = d.pg.channel
    channel.handle_inbound(
        InboundMessage(
            channel_name=channel.name,
            chat_id=d.other_chat,
            sender_id=FOREIGN,
            text="run B",
            message_id=f"other-{token}",
        )
    )
    assert entered_b.wait(BOUND_S)
    running = None
    if d.caps.live_output is None:
        running = d.wait_segment(token, "running")
        if d.caps.stop_button is None:
            running = d.wait_stoppable(token)
    d.stop_run(running)  # type: ignore[arg-type]
    assert ctx.script.outcome() == "cancelled"  # run A
    assert ctx.script.no_outcome(0.3)  # run B goes on
    release_b.set()
    assert ctx.script.outcome() == "B released"


def test_a_foreign_users_stop_is_refused_privately_and_the_run_goes_on(ctx: Context) -> None:
    d = ctx.driver
    d.require("stop_button")
    d.require("foreign_users")
    token = _token()
    ctx.script.fn = _hold_until_cancelled(ctx.script, f"holding {token}")
    d.send("hold")
    running = d.wait_stoppable(token)
    d.stop(running, user=FOREIGN)
    if d.caps.private_notice is None:
        wait_for(lambda: d.notices(FOREIGN), "the private notice to the foreign user")
        assert len(d.notices(FOREIGN)) == 1
    assert ctx.script.no_outcome(0.3)  # the run was not cancelled
    assert d.segment(token).state == "running"
    d.stop(running)
    assert ctx.script.outcome() == "cancelled"
    d.wait_segment(token, "cancelled")
    assert len(d.notices(FOREIGN)) == (1 if d.caps.private_notice is None else 0)


@pytest.mark.parametrize("when", ["mid-run", "before any output"])
def test_a_failed_run_ends_failed_and_the_failure_is_told_once(
    ctx: Context, request: pytest.FixtureRequest, when: str
) -> None:
    d = ctx.driver
    _known_defect(d, "failure_told_once", request)
    token = _token()

    def fails(turn: Turn) -> str:
        if when == "mid-run":
            turn.say(f"partial {token}")
        raise RuntimeError("agent process exited")

    ctx.script.fn = lambda turn: f"before {_token()}"  # not the chat's first run
    d.send("hello")
    wait_for(lambda: [s for s in d.segments() if s.state == "completed"], "a first reply")
    assert d.pg.channel.wait_idle(BOUND_S)
    ctx.script.fn = fails
    d.send("fail")
    wait_for(d.failures, "the failure shown in the chat", tick=d.tick)
    assert d.pg.channel.wait_idle(BOUND_S)
    d.settle()
    assert d.failures() == 1
    seg = d.segment(token)
    assert seg is None or seg.state == "failed", seg  # never shown as a normal answer


def test_a_redelivered_message_starts_no_second_run(ctx: Context) -> None:
    d = ctx.driver
    token = _token()
    runs: list[str] = []

    def counts(turn: Turn) -> str:
        runs.append(turn.text)
        return f"once {token}"

    ctx.script.fn = counts
    d.send(f"dedup {token}")
    d.wait_segment(f"once {token}", "completed")
    assert d.pg.channel.wait_idle(BOUND_S)
    assert d.redeliver_last_message() == 200  # ACKed, so the platform stops retrying
    time.sleep(0.3)  # a second run would start now
    assert d.pg.channel.wait_idle(BOUND_S)
    d.settle()
    assert runs == [f"dedup {token}"]
    assert len([s for s in d.segments() if f"once {token}" in s.text]) == 1


@pytest.fixture(params=sorted(DRIVERS))
def one_slot(request: pytest.FixtureRequest) -> Iterator[Context]:
    """A channel of its own that runs one agent run at a time (admission limit)."""
    with _open(request.param, max_concurrent_runs=1) as context:
        yield context


def test_a_run_that_must_wait_for_a_slot_is_told_it_is_queued_then_runs(
    one_slot: Context,
) -> None:
    from channelkit.core.text import MSG_QUEUED_AHEAD, MSG_QUEUED_NEXT

    ctx = one_slot
    d = ctx.driver
    entered_b, release_b = threading.Event(), threading.Event()
    token = _token()

    def fn(turn: Turn) -> str | None:
        if turn.text == "run B":  # holds the only slot
            entered_b.set()
            release_b.wait(BOUND_S)
            return None
        return f"after the queue {token}"

    ctx.script.fn = fn
    channel = d.pg.channel
    channel.handle_inbound(
        InboundMessage(
            channel_name=channel.name, chat_id=d.other_chat, sender_id=FOREIGN, text="run B"
        )
    )
    assert entered_b.wait(BOUND_S)
    d.send("hello")
    queued = (MSG_QUEUED_NEXT, MSG_QUEUED_AHEAD.split("{", 1)[0])
    wait_for(
        lambda: any(t.startswith(queued) for t in d.chat_texts()),
        "the queue notice in the waiting person's chat",
        tick=d.tick,
    )
    assert d.segment(f"after the queue {token}") is None  # it waits
    release_b.set()
    d.wait_segment(f"after the queue {token}", "completed")


# -- questions -----------------------------------------------------------------------------------


def _pending(d: Driver, text: str) -> Any:
    prompt = d.wait_prompt(text)
    assert prompt.native, prompt
    # the channel holds it (the emulator may show it a moment before)
    wait_for(lambda: d.pg.channel.pending_request_ids(), "the channel to hold the question")
    time.sleep(0.05)
    return prompt


def test_an_answered_question_reaches_the_agent_and_settles_submitted(ctx: Context) -> None:
    d = ctx.driver
    d.require("native_questions")
    ctx.script.fn = _ask(ctx.script, COLOR)
    d.send("ask")
    prompt = _pending(d, "Pick a color?")
    d.answer(prompt, "Blue")
    assert ctx.script.outcome() == {"0": "Blue"}
    settled = d.wait_prompt("Pick a color?", "submitted")
    assert settled.id == prompt.id  # settled in place
    assert "Blue" in d.shown(settled)  # with the answer


def test_a_question_is_one_shot_a_second_answer_changes_nothing(ctx: Context) -> None:
    d = ctx.driver
    d.require("native_questions")
    ctx.script.fn = _ask(ctx.script, COLOR)
    d.send("ask")
    prompt = _pending(d, "Pick a color?")
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
    ctx.script.fn = _ask(ctx.script, COLOR)
    d.send("ask")
    prompt = _pending(d, "Pick a color?")
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
    ctx.script.fn = _ask(ctx.script, COLOR)
    d.send("ask")
    prompt = _pending(d, "Pick a color?")
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
    prompt = _pending(d, "Pick a color?")
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
    d.settle()
    natives = [p for p in d.prompts() if p.native and p.state == "pending"]
    assert len(natives) == 1, natives  # at most one native input per run
    texts = [p for p in d.prompts() if not p.native]
    assert texts, f"the second question has no text prompt: {d.bot_views()}"
    d.send("/cancel")
    ctx.script.outcome()


def test_a_form_never_shows_submitted_before_the_responder_accepted(ctx: Context) -> None:
    """The owner submits while the responder is held; ``/deny`` arrives meanwhile. The
    form shows nothing final before the responder answered, and then exactly what won:
    Submitted only when the held answer was accepted, else the request's own end."""
    d = ctx.driver
    d.require("native_questions")
    ctx.script.fn = _ask(ctx.script, COLOR)
    d.send("ask")
    prompt = _pending(d, "Pick a color?")
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
    ctx.script.fn = _ask(ctx.script, COLOR)
    d.send("ask")
    prompt = _pending(d, "Pick a color?")
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


def test_without_native_input_a_question_is_the_text_prompt(ctx: Context) -> None:
    d = ctx.driver
    if d.caps.native_questions is None:
        pytest.skip(f"{d.platform} shows questions natively (the other question tests)")
    ctx.script.fn = _ask(ctx.script, COLOR)
    d.send("ask")
    prompt = wait_for(lambda: [p for p in d.prompts() if not p.native], "the text prompt")[0]
    assert "/approve" in prompt.text and "/deny" in prompt.text
    d.send("/deny")
    assert isinstance(ctx.script.outcome(), QuestionError)
    wait_for(lambda: not d.pg.channel.pending_request_ids(), "no question waiting")


# -- approval buttons ----------------------------------------------------------------------------


def test_approval_buttons_answer_a_tool_permission_once_and_only_for_the_owner(
    ctx: Context,
) -> None:
    d = ctx.driver
    d.require("approval_buttons")
    title = f"Run ls {_token()}"

    def asks(turn: Turn) -> str:
        ctx.script.outcomes.put(turn.request_permission(title))
        return ""

    ctx.script.fn = asks
    d.send("permission")
    shown = wait_for(
        lambda: (a := d.approval_buttons(title)) and a["buttons"] and a, "the approval buttons"
    )
    wait_for(lambda: d.pg.channel.pending_request_ids(), "the channel to hold the request")
    time.sleep(0.05)
    assert {"Allow", "Reject"} <= set(shown["buttons"]), shown
    if d.caps.foreign_users is None:
        d.press(shown, "Reject", user=FOREIGN)
        assert ctx.script.no_outcome(0.3)  # refused: the request still waits
        if d.caps.private_notice is None:
            wait_for(lambda: d.notices(FOREIGN), "the private notice to the foreign user")
    d.press(shown, "Allow")
    decision = ctx.script.outcome()
    assert decision.allowed and decision.option_id == "proceed_once", decision
    wait_for(lambda: not d.approval_buttons(title)["buttons"], "the buttons settled in place")
    assert ctx.script.no_outcome()


# -- presentations -------------------------------------------------------------------------------


def test_a_presentation_is_rendered_natively_with_a_message_id(ctx: Context) -> None:
    d = ctx.driver
    title = f"Deploy {_token()}"
    card = {
        "title": title,
        "blocks": [
            {"type": "text", "text": "All 3 services are up."},
            {
                "type": "buttons",
                "buttons": [{"label": "Dashboard", "url": "https://example.test/d"}],
            },
        ],
    }

    def presents(turn: Turn) -> str:
        turn.present(card)
        return ""

    ctx.script.fn = presents
    d.send("present")
    shown = wait_for(lambda: d.presentations(title), "the presentation", tick=d.tick)
    assert len(shown) == 1, shown
    assert shown[0]["messageId"], shown  # the platform's id of the message (pins need it)
    if d.caps.native_presentation is None:
        assert shown[0]["native"], shown  # not degraded to plain text


def test_a_pinned_presentation_is_pinned_where_the_platform_pins(ctx: Context) -> None:
    d = ctx.driver
    d.require("pins")
    title = f"Pinned {_token()}"
    payload = {
        "presentation": {"title": title, "blocks": [{"type": "text", "text": "Read me."}]},
        "delivery": {"pin": True},
    }

    def presents(turn: Turn) -> str:
        turn.present(payload)
        return ""

    ctx.script.fn = presents
    d.send("present")
    shown = wait_for(
        lambda: [p for p in d.presentations(title) if p["pinned"]], "the pinned presentation"
    )
    assert len(shown) == 1
