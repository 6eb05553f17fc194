"""WeixinChannel end to end: real ChannelBase, iLink API on requests-mock."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests_mock as rm
from channelkit.core import ChannelConfig, LifecycleEvent, LifecycleType
from channelkit.core.text import MSG_CANCELLED
from channelkit.http import RetryPolicy
from channelkit.platforms.weixin import WeixinChannel, WeixinConfig
from channelkit.platforms.weixin.adapter import flatten_markdown, parse_weixin_message
from channelkit.platforms.weixin.api import WeixinApi
from channelkit.testing import (
    ScriptedBridge,
    ask,
    chunk,
    fail,
    final,
    gate,
    permission_request,
    question_request,
    tool,
)

from tests.platforms._shared import LifecycleLog, question

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


class RecordingWeixin(LifecycleLog, WeixinChannel):
    """WeixinChannel that also records its lifecycle events."""


class Env:
    def __init__(self, rt: Any, mock: rm.Mocker, bridge: ScriptedBridge, **cfg: Any) -> None:
        self.rt = rt
        self.mock = mock
        self.bridge = bridge
        api = WeixinApi("tok", base_url=BASE, retry=RetryPolicy.never())
        self.channel = RecordingWeixin(
            WeixinConfig(bot_token="tok", base_url=BASE, **cfg),
            bridge,
            channel_config=ChannelConfig(name="weixin", max_workers=8),
            api=api,
            executor=rt.pool,
            run_executor=rt.run_pool,
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
    release = threading.Event()
    env = Env(rt, mock, ScriptedBridge([gate(release), final("**Done** with `x`")]))
    env.channel.handle_weixin_message(inbound("hi"))
    rt.wait_for(lambda: env.statuses() == [1])
    release.set()
    rt.settle()
    assert env.statuses() == [1, 2]
    assert env.channel.events[-1].type is LifecycleType.COMPLETED
    assert env.texts() == ["Done with x"]
    sent = env.calls("sendmessage")[0]
    assert sent["msg"]["to_user_id"] == USER and sent["msg"]["context_token"].startswith("ctx-")
    config = env.calls("getconfig")
    assert config[0]["ilink_user_id"] == USER and config[0]["context_token"].startswith("ctx-")
    env.channel.close()


def test_failed_run_turns_typing_off(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, ScriptedBridge([fail(RuntimeError("agent crashed"))]))
    env.channel.handle_weixin_message(inbound("hi"))
    rt.settle()
    assert env.channel.events[-1].type is LifecycleType.FAILED
    assert env.statuses() == [1, 2]
    env.channel.close()


def test_cancelled_run_turns_typing_off(rt, mock) -> None:  # type: ignore[no-untyped-def]
    never = threading.Event()  # the agent works until it is cancelled
    env = Env(rt, mock, ScriptedBridge([gate(never, timeout=10)]))
    env.channel.handle_weixin_message(inbound("long task"))
    rt.wait_for(lambda: env.statuses() == [1])
    env.channel.handle_weixin_message(inbound("/cancel"))
    rt.wait_for(lambda: any(e.type is LifecycleType.CANCELLED for e in env.channel.events))
    rt.settle()
    assert env.channel.events[-1].reason == "cancel_command"
    assert env.statuses() == [1, 2]
    assert env.texts() == [MSG_CANCELLED]
    assert not env.channel.typing.is_active(USER)
    env.channel.close()


def test_text_chunk_and_tool_call_add_no_ui(rt, mock) -> None:  # type: ignore[no-untyped-def]
    release = threading.Event()
    steps = [chunk("a"), tool("t1", kind="read", title="read file"), chunk("b"), gate(release)]
    env = Env(rt, mock, ScriptedBridge(steps))
    env.channel.handle_weixin_message(inbound("hi"))
    rt.wait_for(lambda: [e.type for e in env.channel.events].count(LifecycleType.TEXT_CHUNK) == 2)
    rt.wait_for(lambda: env.statuses() == [1])
    rt.pool.wait_idle(0.2)  # the run is blocked; let every queued hook finish
    kinds = [e.type for e in env.channel.events]
    assert LifecycleType.TOOL_CALL in kinds
    # typing stays on while the run streams and calls tools; nothing is sent yet
    assert env.statuses() == [1] and env.channel.typing.is_active(USER) and env.texts() == []
    for kind in (LifecycleType.TEXT_CHUNK, LifecycleType.TOOL_CALL):
        env.channel.on_task_lifecycle(
            LifecycleEvent(kind, "weixin", USER, "s", "run-x", None, None, chunk="x")
        )
    assert env.channel.typing.is_active(USER)
    release.set()
    rt.settle()
    # the text after the tool call starts a new paragraph
    assert env.statuses() == [1, 2] and env.texts() == ["a\n\nb"]
    env.channel.close()


def test_indicator_failures_never_fail_the_task(rt, mock) -> None:  # type: ignore[no-untyped-def]
    mock.post(f"{BASE}/ilink/bot/getconfig", status_code=500)
    env = Env(rt, mock, ScriptedBridge([final("still answered")]))
    handle = env.channel.handle_weixin_message(inbound("hi"))
    rt.settle()
    assert handle is not None
    assert handle.result(5).status == "completed"  # type: ignore[union-attr]
    assert env.texts() == ["still answered"]
    assert env.statuses() == []
    env.channel.close()


def test_typing_can_be_disabled(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, ScriptedBridge([final("ok")]), typing=False)
    env.channel.handle_weixin_message(inbound("hi"))
    rt.settle()
    assert env.statuses() == [] and env.texts() == ["ok"]
    env.channel.close()


def test_inherits_text_permission_prompt_and_approve(rt, mock) -> None:  # type: ignore[no-untyped-def]
    request = permission_request("req-1", "s", title="rm -rf build")
    steps = [ask(lambda s: permission_request("req-1", s, title="rm -rf build")), final("cleaned")]
    env = Env(rt, mock, ScriptedBridge(steps))
    env.channel.handle_weixin_message(inbound("clean up"))
    rt.wait_for(lambda: len(env.texts()) == 1)
    # exactly ChannelBase's text prompt (flattened for a client that shows Markdown raw)
    assert env.texts()[0] == flatten_markdown(env.channel.format_permission_request(request))
    assert "/approve" in env.texts()[0] and "/deny" in env.texts()[0]
    env.channel.handle_weixin_message(inbound("/approve"))
    rt.settle()
    assert env.bridge.responses == [
        ("req-1", {"outcome": {"outcome": "selected", "optionId": "proceed_once"}})
    ]
    # The command reply and the final answer go out on different lanes.
    assert sorted(env.texts()[1:]) == ["Permission approved.", "cleaned"]
    assert env.statuses() == [1, 2]
    env.channel.close()


def test_questions_use_the_text_prompt(rt, mock) -> None:  # type: ignore[no-untyped-def]
    questions = [question("Env", ["Prod", "Staging"])]
    request = question_request("req-1", "s", questions)
    steps = [ask(lambda s: question_request("req-1", s, questions)), final("asked")]
    env = Env(rt, mock, ScriptedBridge(steps))
    env.channel.handle_weixin_message(inbound("deploy"))
    rt.wait_for(lambda: len(env.texts()) == 1)
    assert env.texts()[0] == flatten_markdown(env.channel.format_permission_request(request))
    assert env.texts()[0].startswith("Permission required to run a tool")
    env.channel.handle_weixin_message(inbound("/deny"))
    rt.settle()
    assert env.bridge.responses == [
        ("req-1", {"outcome": {"outcome": "selected", "optionId": "cancel"}})
    ]
    assert "Permission denied." in env.texts()
    env.channel.close()


def test_ignores_bot_messages_and_messages_without_text_or_media(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, ScriptedBridge([final("x")]))
    assert env.channel.handle_weixin_message(inbound("echo", message_type=2)) is None
    # an item of no kind the channel knows (0: none); an image (2) is an attachment now
    assert (
        env.channel.handle_weixin_message({"from_user_id": USER, "item_list": [{"type": 0}]})
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
        flatten_markdown("# Title\n```py\ncode\n```\n[a](http://x)")
        == "Title\n\ncode\n\na (http://x)"
    )
