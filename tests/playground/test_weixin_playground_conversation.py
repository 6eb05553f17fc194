"""The Weixin playground over real HTTP: the real ``WeixinChannel`` long-polls the
emulator's ``/ilink/bot/getupdates`` and answers through ``sendmessage``, ``getconfig``
and ``sendtyping``, driven through ``/_emulator/...`` as the page drives it.

A message reaches the agent and the answer comes back as plain text with typing shown
while the run works; a question arrives as the text prompt (no cards on Weixin) and a
typed ``/approve`` or ``/deny`` answers it, typing off while it waits and on again (on
the channel's FakeClock) once answered; ``/cancel`` cancels a run; a redelivered
message (same ``message_id``) starts no second run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import requests
from channelkit.agents import FunctionAgent
from channelkit.agents.function import Question, QuestionError, Turn
from channelkit.core.text import MSG_APPROVED, MSG_CANCELLED, MSG_DENIED
from channelkit.playground import Playground
from channelkit.runtime import FakeClock
from playground_helpers import callbacks, calls, send, state, wait

LONG = 20.0  # generous bound for a loaded 2-core CI machine
GATE = 30.0  # an agent never waits longer than this for the test


class Script:
    """The agent's side: what it saw, and gates the test opens."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.prompts: list[str] = []
        self.release = threading.Event()
        self.cancelled = threading.Event()
        self.answers: list[Any] = []

    def seen(self) -> list[str]:
        with self.lock:
            return list(self.prompts)

    def __call__(self, turn: Turn) -> str:
        with self.lock:
            self.prompts.append(turn.text)
        if turn.text == "wait":
            assert self.release.wait(GATE), "the test never released the run"
            return "done **waiting**"
        if turn.text == "ask":
            try:
                answers: Any = turn.ask([Question("Deploy where?", ["Prod", "Staging"])])
            except QuestionError as exc:
                answers = type(exc).__name__
            with self.lock:
                self.answers.append(answers)
            assert self.release.wait(GATE), "the test never released the run"
            return f"asked: {answers}"
        if turn.text == "long":
            deadline = time.monotonic() + GATE
            while not turn.cancelled and time.monotonic() < deadline:
                self.release.wait(0.02)
            if turn.cancelled:
                self.cancelled.set()
            return "never shown"
        return f"echo: {turn.text}"


@contextmanager
def weixin(clock: FakeClock | None = None) -> Iterator[tuple[Playground, Script]]:
    script = Script()
    with Playground(platform="weixin", agent=FunctionAgent(script), clock=clock) as pg:
        try:
            yield pg, script
        finally:
            script.release.set()


def bot_texts(pg: Playground) -> list[str]:
    return [
        e["text"] for e in state(pg)["timeline"] if e["kind"] == "message" and e["from"] == "bot"
    ]


def bot_text(pg: Playground, predicate: Callable[[str], bool], what: str) -> str:
    return str(wait(lambda: next((t for t in bot_texts(pg) if predicate(t)), None), what, LONG))


def endpoint(call: dict[str, Any]) -> str:
    return str(call["path"]).rsplit("/", 1)[1]


def typing_statuses(pg: Playground) -> list[int]:
    """The ``sendtyping`` statuses the emulator answered, in order."""
    return [c["body"]["status"] for c in calls(pg) if endpoint(c) == "sendtyping"]


def user_message_id(pg: Playground, text: str) -> str:
    entry = next(e for e in state(pg)["timeline"] if e["from"] == "user" and e["text"] == text)
    return str(entry["msgId"])


def test_a_message_reaches_the_agent_and_the_answer_comes_back_as_text() -> None:
    with weixin() as (pg, script):
        assert pg.ingress == "polling" and pg.channel.ingress_routes() == []
        send(pg, "hello")
        assert bot_text(pg, lambda t: t.startswith("echo"), "the answer") == "echo: hello"
        assert script.seen() == ["hello"]
        # typing runs on its own lane: an instant answer may overtake it
        wait(lambda: typing_statuses(pg) == [1, 2], "typing on, then off", LONG)
        assert not state(pg)["typing"]
        recorded = calls(pg)
        polls = [c for c in recorded if endpoint(c) == "getupdates"]
        with_message = next(c for c in polls if c["response"]["msgs"])
        (message,) = with_message["response"]["msgs"]
        assert message["item_list"] == [{"type": 1, "text_item": {"text": "hello"}}]
        assert with_message["body"]["get_updates_buf"] == ""  # the first poll: no cursor
        # the next poll carries the answer's cursor, which confirms the message: the
        # emulator keeps nothing for getupdates and holds that poll
        wait(
            lambda: (s := state(pg))["pendingMessages"] == 0 and s["waitingPolls"] == 1,
            "the message confirmed by the next poll's cursor",
            LONG,
        )
        (sent,) = [c for c in recorded if endpoint(c) == "sendmessage"]
        assert sent["body"]["msg"]["to_user_id"] == message["from_user_id"]
        assert sent["body"]["msg"]["context_token"] == message["context_token"]
        assert sent["body"]["base_info"] == {"channel_version": "2.1.3"}
        # the typing ticket once, then on, then off; every call answered ret 0
        order = [
            (endpoint(c), c["body"].get("status"))
            for c in recorded
            if endpoint(c) in ("getconfig", "sendtyping")
        ]
        assert order == [("getconfig", None), ("sendtyping", 1), ("sendtyping", 2)]
        assert all(c["status"] == 200 and c["response"]["ret"] == 0 for c in recorded)
        (delivered,) = callbacks(pg)
        assert delivered["transport"] == "polling" and delivered["fetched"] is True


def test_typing_shows_while_the_run_works_and_stops_when_it_ends() -> None:
    with weixin() as (pg, script):
        send(pg, "wait")
        wait(lambda: state(pg)["typing"], "typing on while the run works", LONG)
        current = state(pg)
        assert current["typingAction"] == "typing" and not current["waiting"]
        assert bot_texts(pg) == []  # nothing sent while the run works
        script.release.set()
        # Markdown is flattened: Weixin shows it verbatim
        assert bot_text(pg, lambda t: t.startswith("done"), "the answer") == "done waiting"
        wait(lambda: typing_statuses(pg) == [1, 2], "typing off once the run ended", LONG)
        assert not state(pg)["typing"]
        order = [
            (endpoint(c), c["body"].get("status"))
            for c in calls(pg)
            if endpoint(c) in ("getconfig", "sendtyping", "sendmessage")
        ]
        assert order == [
            ("getconfig", None),
            ("sendtyping", 1),
            ("sendmessage", None),
            ("sendtyping", 2),
        ]


@pytest.mark.parametrize(
    ("reply", "notice", "answers"),
    [("/approve", MSG_APPROVED, {}), ("/deny", MSG_DENIED, "QuestionCancelled")],
    ids=["approve", "deny"],
)
def test_a_question_arrives_as_a_text_prompt_and_a_typed_reply_answers_it(
    reply: str, notice: str, answers: Any
) -> None:
    clock = FakeClock(start=time.monotonic(), wall_start=time.time())
    with weixin(clock) as (pg, script):
        send(pg, "ask")
        prompt = bot_text(pg, lambda t: "/approve" in t, "the text prompt")
        assert prompt.startswith("Permission required to run a tool")
        assert "/deny" in prompt
        waiting = wait(lambda: (s := state(pg))["requestPending"] and s, "the prompt pending")
        # the person's turn: typing is off and the page shows no working indicator
        wait(lambda: typing_statuses(pg) == [1, 2], "typing off while the prompt waits", LONG)
        assert not state(pg)["typing"]
        assert waiting["waiting"] and waiting["views"] == {} and waiting["cards"] == {}

        send(pg, reply)
        bot_text(pg, lambda t: t == notice, f"the reply {notice!r}")
        wait(lambda: script.answers == [answers], "the agent's answer", LONG)
        assert not state(pg)["requestPending"]
        if reply == "/approve":
            # typing comes back once the request is no longer pending (checked each
            # second on the channel's clock) while the run goes on
            wait(
                lambda: typing_statuses(pg) == [1, 2, 1],
                "typing on again",
                LONG,
                tick=lambda: clock.advance(1),
            )
            assert state(pg)["typing"]
        script.release.set()
        assert bot_text(pg, lambda t: t.startswith("asked"), "the answer") == f"asked: {answers}"
        ended = [1, 2, 1, 2] if reply == "/approve" else [1, 2]
        wait(lambda: typing_statuses(pg) == ended, "typing off at the end", LONG)
        assert not state(pg)["typing"]


def test_cancel_stops_the_run() -> None:
    with weixin() as (pg, script):
        send(pg, "long")
        wait(lambda: state(pg)["typing"], "typing on while the run works", LONG)
        send(pg, "/cancel")
        assert script.cancelled.wait(LONG), "the agent never saw the cancel"
        bot_text(pg, lambda t: t == MSG_CANCELLED, "the cancel notice")
        wait(lambda: not state(pg)["typing"], "typing off after the cancel", LONG)
        wait(lambda: pg.channel.run_stats["active"] == 0, "no run left", LONG)
        assert "never shown" not in bot_texts(pg)
        assert script.seen() == ["long"]  # the command is no prompt


def test_a_redelivered_message_starts_no_second_run() -> None:
    with weixin() as (pg, script):
        send(pg, "hello")
        bot_text(pg, lambda t: t == "echo: hello", "the answer")
        first_id = user_message_id(pg, "hello")
        response = requests.post(
            f"{pg.url}/_emulator/redeliver", json={"msgId": first_id}, timeout=5
        )
        assert response.status_code == 200, response.text

        def redelivery_fetched() -> bool:
            return any(c["kind"] == "redelivery" and c["fetched"] for c in callbacks(pg))

        wait(redelivery_fetched, "the poller to fetch the redelivered message", LONG)
        polled = [c for c in calls(pg) if endpoint(c) == "getupdates" and c["response"]["msgs"]]
        assert [m["message_id"] for c in polled for m in c["response"]["msgs"]] == [
            int(first_id),
            int(first_id),
        ]
        # a later message is answered after it: a second run of "hello" would come first
        send(pg, "after")
        bot_text(pg, lambda t: t == "echo: after", "the next answer")
        assert script.seen() == ["hello", "after"]
        assert bot_texts(pg) == ["echo: hello", "echo: after"]
