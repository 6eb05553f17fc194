from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests_mock as rm
from channelkit.core import ChannelConfig
from channelkit.http import RetryPolicy
from channelkit.platforms.weixin import WeixinChannel, WeixinConfig
from channelkit.platforms.weixin.adapter import flatten_markdown, parse_weixin_message
from channelkit.platforms.weixin.api import WeixinApi
from wx_bridge import ScriptBridge, Turn, question

BASE = "http://ilink.test"
USER = "wxid_user@im.wechat"
_seq = itertools.count(1)


def inbound(text: str, *, user: str = USER, message_type: int = 1) -> dict[str, Any]:
    n = next(_seq)
    return {
        "seq": n,
        "message_id": n,
        "from_user_id": user,
        "to_user_id": "bot",
        "message_type": message_type,
        "message_state": 2,
        "context_token": f"ctx-{n}",
        "item_list": [{"type": 1, "text_item": {"text": text}}],
    }


class Env:
    def __init__(self, rt: Any, mock: rm.Mocker, bridge: ScriptBridge, **cfg: Any) -> None:
        self.rt = rt
        self.mock = mock
        self.bridge = bridge
        api = WeixinApi("tok", base_url=BASE, retry=RetryPolicy.never())
        self.channel = WeixinChannel(
            WeixinConfig(bot_token="tok", base_url=BASE, **cfg),
            bridge,
            channel_config=ChannelConfig(name="weixin", max_workers=8),
            api=api,
            executor=rt.pool,
            scheduler=rt.scheduler,
        )

    def calls(self, endpoint: str) -> list[dict[str, Any]]:
        return [r.json() for r in self.mock.request_history if r.path.endswith("/" + endpoint)]

    def texts(self) -> list[str]:
        return [c["msg"]["item_list"][0]["text_item"]["text"] for c in self.calls("sendmessage")]

    def statuses(self) -> list[int]:
        return [c["status"] for c in self.calls("sendtyping")]


@pytest.fixture
def mock() -> Iterator[rm.Mocker]:
    with rm.Mocker() as m:
        m.post(f"{BASE}/ilink/bot/getconfig", json={"ret": 0, "typing_ticket": "ticket-1"})
        m.post(f"{BASE}/ilink/bot/sendtyping", json={"ret": 0})
        m.post(f"{BASE}/ilink/bot/sendmessage", json={"ret": 0})
        yield m


def test_started_typing_on_terminal_typing_off(rt, mock) -> None:  # type: ignore[no-untyped-def]
    gate = threading.Event()

    def script(turn: Turn) -> str:
        assert gate.wait(10)
        return "**Done** with `x`"

    env = Env(rt, mock, ScriptBridge(script))
    env.channel.handle_weixin_message(inbound("hi"))
    rt.wait_for(lambda: env.statuses() == [1])
    gate.set()
    rt.settle()
    assert env.statuses() == [1, 2]
    assert env.texts() == ["Done with x"]
    sent = env.calls("sendmessage")[0]
    assert sent["msg"]["to_user_id"] == USER and sent["msg"]["context_token"].startswith("ctx-")
    config = env.calls("getconfig")
    assert config[0]["ilink_user_id"] == USER and config[0]["context_token"].startswith("ctx-")
    env.channel.close()


def test_failed_run_and_cancel_also_turn_typing_off(rt, mock) -> None:  # type: ignore[no-untyped-def]
    def script(turn: Turn) -> str:
        raise RuntimeError("agent crashed")

    env = Env(rt, mock, ScriptBridge(script))
    env.channel.handle_weixin_message(inbound("hi"))
    rt.settle()
    assert env.statuses() == [1, 2]
    env.channel.close()


def test_indicator_failures_never_fail_the_task(rt, mock) -> None:  # type: ignore[no-untyped-def]
    mock.post(f"{BASE}/ilink/bot/getconfig", status_code=500)
    env = Env(rt, mock, ScriptBridge(lambda turn: "still answered"))
    handle = env.channel.handle_weixin_message(inbound("hi"))
    rt.settle()
    assert handle is not None
    assert handle.result(5).status == "completed"  # type: ignore[union-attr]
    assert env.texts() == ["still answered"]
    assert env.statuses() == []
    env.channel.close()


def test_typing_can_be_disabled(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, ScriptBridge(lambda turn: "ok"), typing=False)
    env.channel.handle_weixin_message(inbound("hi"))
    rt.settle()
    assert env.statuses() == [] and env.texts() == ["ok"]
    env.channel.close()


def test_inherits_text_permission_prompt_and_approve(rt, mock) -> None:  # type: ignore[no-untyped-def]
    results: list[Any] = []

    def script(turn: Turn) -> str:
        results.append(turn.permission("rm -rf build"))
        return "cleaned"

    env = Env(rt, mock, ScriptBridge(script))
    env.channel.handle_weixin_message(inbound("clean up"))
    assert env.bridge.asked.wait(5)
    rt.wait_for(lambda: len(env.texts()) == 1)
    prompt = env.texts()[0]
    assert prompt.startswith("Permission required to run a tool")
    assert "/approve" in prompt and "/deny" in prompt
    env.channel.handle_weixin_message(inbound("/approve"))
    rt.settle()
    assert results == [{"outcome": {"outcome": "selected", "optionId": "proceed_once"}}]
    # The command reply and the final answer go out on different lanes.
    assert sorted(env.texts()[1:]) == ["Permission approved.", "cleaned"]
    assert env.statuses() == [1, 2]
    env.channel.close()


def test_questions_use_the_text_prompt(rt, mock) -> None:  # type: ignore[no-untyped-def]
    results: list[Any] = []

    def script(turn: Turn) -> str:
        results.append(turn.ask([question("Env", ["Prod", "Staging"])]))
        return "asked"

    env = Env(rt, mock, ScriptBridge(script))
    env.channel.handle_weixin_message(inbound("deploy"))
    assert env.bridge.asked.wait(5)
    rt.wait_for(lambda: len(env.texts()) == 1)
    assert env.texts()[0].startswith("Permission required to run a tool")
    env.channel.handle_weixin_message(inbound("/deny"))
    rt.settle()
    assert results == [{"outcome": {"outcome": "selected", "optionId": "cancel"}}]
    assert "Permission denied." in env.texts()
    env.channel.close()


def test_ignores_bot_and_non_text_messages(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, ScriptBridge(lambda turn: "x"))
    assert env.channel.handle_weixin_message(inbound("echo", message_type=2)) is None
    assert (
        env.channel.handle_weixin_message({"from_user_id": USER, "item_list": [{"type": 2}]})
        is None
    )
    assert env.channel.handle_weixin_message({"item_list": []}) is None
    rt.settle()
    assert mock.request_history == []
    env.channel.close()


def test_parse_and_flatten() -> None:
    sender, text, mid, token = parse_weixin_message(inbound("a"))
    assert sender == USER and text == "a" and mid is not None and token is not None
    with pytest.raises(ValueError, match=r"item_list\[0\]\.text_item\.text"):
        parse_weixin_message({"from_user_id": "u", "item_list": [{"type": 1, "text_item": {}}]})
    assert (
        flatten_markdown("# Title\n```py\ncode\n```\n[a](http://x)") == "Title\ncode\na (http://x)"
    )
