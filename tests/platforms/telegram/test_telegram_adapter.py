from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests_mock as rm
from channelkit.core import ChannelConfig
from channelkit.http import RetryPolicy
from channelkit.platforms.telegram import TelegramChannel, TelegramConfig
from channelkit.platforms.telegram.api import TelegramApi
from channelkit.platforms.telegram.ingress import SECRET_HEADER
from channelkit.platforms.telegram.questions import TEXT_NOT_OWNER, parse_callback
from channelkit.web.ingress import Headers, IngressRequest
from tg_bridge import ScriptBridge, Turn, question

BASE = "http://tg.test"
TOKEN = "123:abc"
SECRET = "hook-secret"
OWNER = 42
CHAT = 1001


def url(method: str) -> str:
    return f"{BASE}/bot{TOKEN}/{method}"


class Env:
    def __init__(self, rt: Any, mock: rm.Mocker, bridge: ScriptBridge, **cfg: Any) -> None:
        self.rt = rt
        self.mock = mock
        self.bridge = bridge
        config = TelegramConfig(bot_token=TOKEN, webhook_secret=SECRET, api_base_url=BASE, **cfg)
        api = TelegramApi(TOKEN, base_url=BASE, retry=RetryPolicy.never())
        self.channel = TelegramChannel(
            config,
            bridge,
            channel_config=ChannelConfig(name="telegram", max_workers=8),
            api=api,
            executor=rt.pool,
            scheduler=rt.scheduler,
        )
        self.route = self.channel.ingress_routes()[0]
        self.update_ids = itertools.count(1)
        self.cq_ids = itertools.count(1)

    def calls(self, method: str) -> list[dict[str, Any]]:
        return [
            r.json() for r in self.mock.request_history if r.path.endswith("/" + method.lower())
        ]

    def post(self, update: dict[str, Any], secret: str | None = SECRET) -> int:
        headers = {SECRET_HEADER: secret} if secret is not None else {}
        request = IngressRequest(
            method="POST",
            path=self.route.path,
            headers=Headers(headers),
            body=json.dumps(update).encode(),
        )
        return self.route.handler(request).status

    def message(
        self, text: str, *, user: int = OWNER, chat: int = CHAT, chat_type: str = "private"
    ) -> int:
        return self.post(
            {
                "update_id": next(self.update_ids),
                "message": {
                    "message_id": 500 + next(self.update_ids),
                    "date": 0,
                    "chat": {"id": chat, "type": chat_type},
                    "from": {"id": user, "is_bot": False, "first_name": f"u{user}"},
                    "text": text,
                },
            }
        )

    def tap(self, data: str, message_id: int, *, user: int = OWNER, chat: int = CHAT) -> int:
        return self.post(
            {
                "update_id": next(self.update_ids),
                "callback_query": {
                    "id": f"cq{next(self.cq_ids)}",
                    "chat_instance": "ci",
                    "data": data,
                    "from": {"id": user, "is_bot": False, "first_name": "x"},
                    "message": {
                        "message_id": message_id,
                        "date": 0,
                        "chat": {"id": chat, "type": "private"},
                    },
                },
            }
        )

    def settle(self) -> None:
        assert self.rt.pool.wait_idle(5)


@pytest.fixture
def mock() -> Iterator[rm.Mocker]:
    ids = itertools.count(100)
    with rm.Mocker() as m:
        m.post(
            url("sendMessage"),
            json=lambda r, c: {
                "ok": True,
                "result": {
                    "message_id": next(ids),
                    "date": 0,
                    "chat": {"id": CHAT, "type": "private"},
                },
            },
        )
        for method in ("editMessageText", "sendChatAction", "answerCallbackQuery"):
            m.post(url(method), json={"ok": True, "result": True})
        yield m


def blocking_script(gate: threading.Event, started: threading.Event | None = None):  # type: ignore[no-untyped-def]
    def script(turn: Turn) -> str:
        if started is not None:
            started.set()
        assert gate.wait(10)
        turn.say("done")
        return "done"

    return script


def test_started_starts_typing_and_terminal_stops(rt, mock) -> None:  # type: ignore[no-untyped-def]
    gate = threading.Event()
    env = Env(rt, mock, ScriptBridge(blocking_script(gate)))
    assert env.message("hello") == 200
    # The run is blocked in the agent; typing was sent once.
    rt.wait_for(lambda: len(env.calls("sendChatAction")) == 1)
    assert env.calls("sendChatAction") == [{"chat_id": str(CHAT), "action": "typing"}]
    for expected in (2, 3):
        rt.clock.advance(4)  # every 4 s of fake time
        rt.wait_for(lambda n=expected: len(env.calls("sendChatAction")) == n)
    gate.set()
    env.settle()
    assert env.calls("sendMessage")[-1]["text"] == "done"
    rt.advance(4)
    rt.advance(4)
    assert len(env.calls("sendChatAction")) == 3
    assert env.channel.typing.active_chats() == 0
    env.channel.close()


def test_two_runs_in_one_chat_keep_one_keepalive(rt, mock) -> None:  # type: ignore[no-untyped-def]
    gate = threading.Event()
    entered = threading.Semaphore(0)

    def script(turn: Turn) -> str:
        entered.release()
        assert gate.wait(10)
        return "ok"

    env = Env(rt, mock, ScriptBridge(script))
    # Two users in one group chat: two sessions, two concurrent runs.
    env.message("one", user=1, chat=-5, chat_type="group")
    env.message("two", user=2, chat=-5, chat_type="group")
    assert entered.acquire(timeout=5) and entered.acquire(timeout=5)
    typing = env.channel.typing
    rt.wait_for(lambda: sum(len(c.runs) for c in list(typing._chats.values())) == 2)
    assert typing.active_chats() == 1
    rt.wait_for(lambda: len(env.calls("sendChatAction")) == 1)
    for expected in (2, 3):
        rt.clock.advance(4)
        rt.wait_for(lambda n=expected: len(env.calls("sendChatAction")) == n)
    assert rt.scheduler.pending_count() == 1  # one interval for the chat, not two
    gate.set()
    env.settle()
    assert typing.active_chats() == 0
    rt.advance(4)
    rt.advance(4)
    assert len(env.calls("sendChatAction")) == 3
    env.channel.close()


def test_indicator_failures_never_fail_the_task(rt, mock) -> None:  # type: ignore[no-untyped-def]
    mock.post(
        url("sendChatAction"),
        status_code=500,
        json={"ok": False, "error_code": 500, "description": "boom"},
    )
    env = Env(rt, mock, ScriptBridge(lambda turn: "fine"))
    env.message("hi")
    env.settle()
    assert env.calls("sendMessage")[-1]["text"] == "fine"
    env.channel.close()


def test_native_questions_without_streaming_output(rt, mock) -> None:  # type: ignore[no-untyped-def]
    answers: list[Any] = []

    def script(turn: Turn) -> str:
        turn.say("Let me ask. ")
        response = turn.ask(
            [
                question("Env", ["Prod", "Staging"]),
                question("Signals", ["Logs", "Metrics", "Traces"], multi=True),
            ]
        )
        answers.append(response)
        turn.say("Deploying.")
        return "Let me ask. Deploying."

    env = Env(rt, mock, ScriptBridge(script))
    env.message("deploy")
    assert env.bridge.asked.wait(5)
    rt.wait_for(lambda: len([s for s in env.calls("sendMessage") if "reply_markup" in s]) == 2)
    sent = env.calls("sendMessage")
    # Output stays plain messages: nothing was streamed or edited before the question.
    assert env.calls("editMessageText") == []
    keyboards = [s for s in sent if "reply_markup" in s]
    assert len(keyboards) == 2
    for s in sent:
        if "reply_markup" in s:
            for row in s["reply_markup"]["inline_keyboard"]:
                for button in row:
                    assert len(button["callback_data"].encode()) <= 64
    ids = [r.json() for r in mock.request_history if r.path.endswith("/sendmessage")]
    assert len(ids) == len(sent)
    q0, q1 = keyboards
    m0 = 100 + sent.index(q0)
    m1 = 100 + sent.index(q1)
    kb0 = q0["reply_markup"]["inline_keyboard"]
    kb1 = q1["reply_markup"]["inline_keyboard"]
    # A foreign user taps: refused, nothing mutated.
    assert env.tap(kb0[1][0]["callback_data"], m0, user=7) == 200
    rt.wait_for(lambda: len(env.calls("answerCallbackQuery")) == 1)
    assert env.calls("answerCallbackQuery")[-1]["text"] == TEXT_NOT_OWNER
    assert env.calls("editMessageText") == []
    # Wrong secret on a tap: rejected before anything happens.
    assert env.post({"update_id": 99, "callback_query": {}}, secret="nope") == 401
    # The owner answers: Staging; Logs + Traces; Submit.
    env.tap(kb0[1][0]["callback_data"], m0)
    env.tap(kb1[0][0]["callback_data"], m1)
    env.tap(kb1[2][0]["callback_data"], m1)
    env.tap(kb1[-1][0]["callback_data"], m1)  # Submit
    assert parse_callback(kb1[-1][0]["callback_data"]).kind == "submit"  # type: ignore[union-attr]
    rt.wait_for(lambda: bool(answers))
    env.settle()
    assert answers == [
        {
            "outcome": {"outcome": "selected", "optionId": "proceed_once"},
            "answers": {"0": "Staging", "1": "Logs, Traces"},
        }
    ]
    assert len(env.calls("answerCallbackQuery")) == 5  # every tap answered
    edits = {e["message_id"]: e for e in env.calls("editMessageText") if "reply_markup" not in e}
    assert set(edits) == {m0, m1} and all("Submitted" in e["text"] for e in edits.values())
    final = env.calls("sendMessage")[-1]
    assert final["text"] == "Let me ask. Deploying." and "reply_markup" not in final
    # A late tap after the terminal state: answered, nothing changes.
    env.tap(kb0[0][0]["callback_data"], m0)
    env.settle()
    assert len(env.bridge.respond_calls) == 1
    assert len(env.calls("answerCallbackQuery")) == 6
    env.channel.close()


def test_native_questions_can_be_disabled(rt, mock) -> None:  # type: ignore[no-untyped-def]
    def script(turn: Turn) -> str:
        turn.ask([question("Env", ["Prod", "Staging"])])
        return "ok"

    env = Env(rt, mock, ScriptBridge(script), native_questions=False)
    env.message("deploy")
    assert env.bridge.asked.wait(5)
    rt.wait_for(lambda: len(env.calls("sendMessage")) == 1)
    text = env.calls("sendMessage")[-1]["text"]
    assert text.startswith("Permission required to run a tool") and "/deny" in text
    env.message("/deny")
    env.settle()
    assert [m["text"] for m in env.calls("sendMessage")][-2:] == ["Permission denied.", "ok"] or (
        "Permission denied." in [m["text"] for m in env.calls("sendMessage")]
    )
    env.channel.close()


def test_cancel_command_is_handled(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, ScriptBridge(lambda turn: "x"))
    env.message("/cancel@my_bot")
    env.settle()
    assert env.calls("sendMessage")[-1]["text"] == "No request is currently running."
    env.message("/help")
    env.settle()
    assert "/cancel" in env.calls("sendMessage")[-1]["text"]
    env.channel.close()


def test_foreign_callback_data_is_answered(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, ScriptBridge(lambda turn: "x"))
    env.tap("something-else", 1)
    env.tap("ck:malformed", 1)
    env.settle()
    assert len(env.calls("answerCallbackQuery")) == 2
    env.channel.close()
