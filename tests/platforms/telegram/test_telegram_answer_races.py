"""Answers racing on one Telegram request: one wins, the agent hears it once, the
keyboard message shows it.

Each race is repeated over many seeded interleavings (a fresh channel per round, the
contenders released together by a barrier, each after a seeded random spin). The seed
also picks who, if anyone, gets a head start (the other side waits until the first
answer reached the agent), so both kinds of winner occur on any machine. A keyboard
answer that loses ends in the winner's state (a winning ``/deny``: cancelled; an answer
given elsewhere: expired) and the chat is told once that the question was already
answered; a winning keyboard answer shows ``Submitted`` with the choice.
"""

from __future__ import annotations

import itertools
import json
import random
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import requests_mock as rm
from channelkit.agents.function import FunctionAgent, Question, Turn
from channelkit.core import ChannelConfig
from channelkit.core.text import MSG_APPROVED, MSG_DENIED, MSG_NONE, MSG_NOT_PENDING
from channelkit.http import RetryPolicy
from channelkit.ingress import Headers, IngressRequest
from channelkit.platforms.telegram import TelegramChannel, TelegramConfig
from channelkit.platforms.telegram.api import TelegramApi
from channelkit.platforms.telegram.ingress import SECRET_HEADER
from channelkit.platforms.telegram.questions import (
    LABEL_CANCELLED,
    LABEL_EXPIRED,
    LABEL_SUBMITTED,
    TEXT_ALREADY_ANSWERED,
    TEXT_SUBMITTED,
    encode_callback,
)
from channelkit.testing import wait_until

from tests.platforms._shared import RecordingContext as _Recording
from tests.platforms.telegram.tg_env import BASE, CHAT, OWNER, SECRET, TOKEN

ROUNDS = 30
GROUP = -100777
OPTIONS = ["Prod", "Staging", "Dev", "Test"]
QUESTIONS = [Question("Where to deploy?", OPTIONS, header="Env")]
MODES = ("free", "first", "second")  # who gets a head start (seed % 3)


class Round:
    """One fresh channel whose run waits on a keyboard question (or a permission)."""

    def __init__(
        self, rt: Any, mock: rm.Mocker, *, permission: bool = False, group: bool = False
    ) -> None:
        self.rt = rt
        self.mock = mock
        self.start = len(mock.request_history)
        self.chat = GROUP if group else CHAT
        self.outcome: list[Any] = []
        self.done = threading.Event()
        self.results: list[bool] = []
        self.agent_calls: list[Any] = []
        self.contexts: list[_Recording] = []
        self.lock = threading.Lock()
        self.ids = itertools.count(1)

        def behaviour(turn: Turn) -> str:
            try:
                if permission:
                    self.outcome.append(turn.request_permission("Run ls"))
                else:
                    self.outcome.append(turn.ask(QUESTIONS))
            except Exception as exc:
                self.outcome.append(type(exc).__name__)
            finally:
                self.done.set()
            return "done"

        config = TelegramConfig(
            bot_token=TOKEN,
            webhook_secret=SECRET,
            api_base_url=BASE,
            bot_username="race_bot",
            group_policy="open",
            ingress="webhook",
        )
        bridge = FunctionAgent(behaviour, question_timeout=600.0, scheduler=rt.scheduler)
        self.ch = TelegramChannel(
            config,
            bridge,
            channel_config=ChannelConfig(
                name="telegram", max_workers=8, session_scope="chat" if group else "user"
            ),
            api=TelegramApi(TOKEN, base_url=BASE, retry=RetryPolicy.never()),
            executor=rt.pool,
            run_executor=rt.run_pool,
            scheduler=rt.scheduler,
            clock=rt.clock,
        )
        self.route = self.ch.ingress_routes()[0]
        respond = self.ch.bridge.respond_to_permission

        def counting(request_id: str, response: Any) -> bool:
            with self.lock:
                self.agent_calls.append(response)
            return respond(request_id, response)

        self.ch.bridge.respond_to_permission = counting  # type: ignore[method-assign]
        present = self.ch.present_user_input_request

        def recording_present(ctx: Any) -> Any:
            wrapped = _Recording(ctx, self.results, self.lock)
            self.contexts.append(wrapped)
            return present(wrapped)  # type: ignore[arg-type]

        self.ch.present_user_input_request = recording_present  # type: ignore[method-assign]
        assert self.message("deploy", OWNER) == 200

    # -- surfaces ------------------------------------------------------------------------
    def _post(self, update: dict[str, Any]) -> int:
        request = IngressRequest(
            method="POST",
            path=self.route.path,
            headers=Headers({SECRET_HEADER: SECRET}),
            body=json.dumps({"update_id": next(self.ids), **update}).encode(),
        )
        response = self.route.handler(request)
        response.run_after()
        return response.status

    def message(self, text: str, user: int = OWNER) -> int:
        chat_type = "group" if self.chat == GROUP else "private"
        return self._post(
            {
                "message": {
                    "message_id": 500 + next(self.ids),
                    "date": 0,
                    "chat": {"id": self.chat, "type": chat_type},
                    "from": {"id": user, "is_bot": False, "first_name": f"u{user}"},
                    "text": text,
                }
            }
        )

    def record(self) -> Any:
        (record,) = self.ch.questions.registry.records()
        return record

    def tap(self, option: int) -> None:
        """The owner taps an option of the keyboard (a single select: it submits)."""
        data = encode_callback(self.token, "option", 0, option)
        assert (
            self._post(
                {
                    "callback_query": {
                        "id": f"cq{next(self.ids)}",
                        "chat_instance": "ci",
                        "data": data,
                        "from": {"id": OWNER, "is_bot": False, "first_name": "x"},
                        "message": {
                            "message_id": self.message_id,
                            "date": 0,
                            "chat": {"id": self.chat, "type": "private"},
                        },
                    }
                }
            )
            == 200
        )

    def entered(self) -> bool:
        with self.lock:
            return bool(self.agent_calls)

    def race(
        self,
        first: list[Callable[[], Any]],
        second: list[Callable[[], Any]],
        seed: int,
    ) -> str:
        """Run every contender at once; ``seed`` picks the spins and the head start."""
        mode = MODES[seed % len(MODES)]
        rng = random.Random(seed)
        contenders = [(fn, mode == "second") for fn in first]
        contenders += [(fn, mode == "first") for fn in second]
        barrier = threading.Barrier(len(contenders))
        spins = [rng.randrange(0, 200_000) for _ in contenders]

        def run(fn: Callable[[], Any], late: bool, spin: int) -> None:
            barrier.wait(10)
            if late:  # the other side's answer reaches the agent first
                wait_until(self.entered, 10.0, what="the first answer to reach the agent")
            for _ in range(spin):
                pass
            fn()

        threads = [
            threading.Thread(target=run, args=(fn, late, spin))
            for (fn, late), spin in zip(contenders, spins, strict=True)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        assert not any(t.is_alive() for t in threads)
        assert self.done.wait(10)
        self.rt.settle()
        return mode

    # -- what the person sees ----------------------------------------------------------
    def requests(self, method: str) -> list[dict[str, Any]]:
        return [
            r.json()
            for r in self.mock.request_history[self.start :]
            if r.path.endswith("/" + method.lower())
        ]

    def texts(self) -> list[str]:
        return [m["text"] for m in self.requests("sendMessage")]

    def claimed_taps(self) -> int:
        return sum(a.get("text") == TEXT_SUBMITTED for a in self.requests("answerCallbackQuery"))

    def terminal_edits(self) -> list[str]:
        return [
            str(e["text"])
            for e in self.requests("editMessageText")
            if e["message_id"] == self.message_id and "reply_markup" not in e
        ]

    def terminal_edit(self) -> str:
        """The one edit that ended the keyboard message (keyboard removed); waits for it,
        then for the work that follows it (the already-answered notice)."""
        wait_until(self.terminal_edits, 10.0, what="the keyboard's terminal edit")
        self.rt.settle()
        (edit,) = self.terminal_edits()
        return edit

    def close(self) -> None:
        self.ch.close(timeout=2.0)


def question_round(rt: Any, mock: rm.Mocker) -> Round:
    r = Round(rt, mock)
    wait_until(lambda: bool(r.contexts) and r.ch.questions.live_count() == 1)
    wait_until(lambda: r.record().state == "pending")
    r.token, r.message_id = r.record().token, r.record().message_ids[0]  # type: ignore[attr-defined]
    return r


def _direct(ctx: Any, answer: str) -> dict[str, Any]:
    """An answer given through another surface (straight to the request's responder)."""
    return {
        "outcome": {"outcome": "selected", "optionId": ctx.submit_option_id},
        "answers": {"0": answer},
    }


def test_keyboard_tap_racing_the_owners_deny_shows_the_winner(rt: Any, mock: rm.Mocker) -> None:
    winners: set[str] = set()
    for seed in range(ROUNDS):
        r = question_round(rt, mock)
        try:
            r.race([partial(r.tap, 1)], [partial(r.message, "/deny")], seed=seed)
            assert len(r.agent_calls) == 1  # one agent call
            terminal, texts = r.terminal_edit(), r.texts()
            if isinstance(r.outcome[0], dict):
                winners.add("keyboard")
                assert r.outcome == [{"0": "Staging"}]
                assert r.results == [True]
                assert f"{LABEL_SUBMITTED}: Staging" in terminal
                assert MSG_DENIED not in texts and TEXT_ALREADY_ANSWERED not in texts
            else:
                winners.add("deny")
                assert r.outcome == ["QuestionCancelled"]
                assert True not in r.results
                assert LABEL_CANCELLED in terminal and LABEL_SUBMITTED not in terminal
                assert texts.count(MSG_DENIED) == 1
                assert texts.count(TEXT_ALREADY_ANSWERED) == r.claimed_taps()
        finally:
            r.close()
    assert winners == {"keyboard", "deny"}


def test_approve_and_deny_from_two_people_in_a_shared_session_one_wins(
    rt: Any, mock: rm.Mocker
) -> None:
    winners: set[bool] = set()
    for seed in range(ROUNDS):
        r = Round(rt, mock, permission=True, group=True)
        try:
            wait_until(lambda: bool(r.ch.pending_request_ids()))  # noqa: B023
            r.race(
                [partial(r.message, "/approve", 7001)],
                [partial(r.message, "/deny", 7002)],
                seed=seed,
            )
            assert len(r.agent_calls) == 1  # one respond() reached the agent
            texts = r.texts()
            approved = r.outcome[0].allowed
            winners.add(approved)
            winner, loser = (MSG_APPROVED, MSG_DENIED) if approved else (MSG_DENIED, MSG_APPROVED)
            assert texts.count(winner) == 1 and loser not in texts
            assert texts.count(MSG_NOT_PENDING) + texts.count(MSG_NONE) == 1
        finally:
            r.close()
    assert winners == {True, False}


def test_32_different_answers_at_once_one_wins_and_the_keyboard_shows_it(
    rt: Any, mock: rm.Mocker
) -> None:
    winners: set[str] = set()
    for seed in range(ROUNDS):
        r = question_round(rt, mock)
        try:
            ctx = r.contexts[0]
            taps = [partial(r.tap, i % len(OPTIONS)) for i in range(16)]
            direct = [partial(ctx.respond, _direct(ctx, f"direct-{i}")) for i in range(16)]
            r.race(taps, direct, seed=seed)
            assert len(r.agent_calls) == 1  # one agent call
            assert r.results.count(True) == 1  # exactly one respond() said True
            (answers,) = r.outcome
            terminal, texts = r.terminal_edit(), r.texts()
            claimed = r.claimed_taps()
            assert claimed <= 1
            if answers["0"] in OPTIONS:
                winners.add("keyboard")
                assert claimed == 1
                assert f"{LABEL_SUBMITTED}: {answers['0']}" in terminal
                assert TEXT_ALREADY_ANSWERED not in texts
            else:
                winners.add("direct")
                assert answers["0"].startswith("direct-")
                # answered elsewhere: the keyboard says so, never "submitted"
                assert LABEL_EXPIRED in terminal and LABEL_SUBMITTED not in terminal
                assert texts.count(TEXT_ALREADY_ANSWERED) == claimed
        finally:
            r.close()
    assert winners == {"keyboard", "direct"}
