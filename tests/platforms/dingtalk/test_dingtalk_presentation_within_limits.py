"""The DingTalk renderer: robot ``sampleMarkdown`` bodies within DingTalk's limits
(3,800 characters of text, 15,000 UTF-8 bytes of ``msgParam``), every word kept, links
only for http(s) buttons; the sender routes groups and 1:1 chats and returns the
``processQueryKey``."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from channelkit.platforms.dingtalk import renderer
from channelkit.platforms.dingtalk.sender import DingtalkSender
from channelkit.presentation import (
    Button,
    ButtonsBlock,
    ContextBlock,
    DividerBlock,
    MessagePresentation,
    ReplyPayload,
    SelectBlock,
    SelectOption,
    TextBlock,
    adapt,
)
from channelkit.presentation.outbound import SenderRegistry, deliver


def _params(bodies: list[dict[str, Any]]) -> list[dict[str, str]]:
    assert all(b["msgKey"] == "sampleMarkdown" for b in bodies)
    return [json.loads(b["msgParam"]) for b in bodies]


def _within_limits(bodies: list[dict[str, Any]]) -> None:
    for body in bodies:
        assert len(body["msgParam"].encode("utf-8")) <= renderer.MAX_PARAM_BYTES
        param = json.loads(body["msgParam"])
        assert len(param["text"]) <= renderer.MAX_MESSAGE_CHARS
        assert 0 < len(param["title"]) <= 64


@pytest.mark.parametrize("unit", ["word ", "部署完成 ", "🚀🎉 ", '"\\\n'])
def test_long_presentations_split_within_limits_and_keep_every_fragment(unit: str) -> None:
    blocks = tuple(TextBlock(f"block{i} " + unit * 900) for i in range(6))
    presentation = adapt(MessagePresentation(title="Report", blocks=blocks), renderer.CAPABILITIES)
    bodies = renderer.render(presentation)
    assert len(bodies) > 1
    _within_limits(bodies)
    text = "".join(p["text"] for p in _params(bodies))
    for i in range(6):
        assert f"block{i}" in text
    assert all(p["title"] == "Report" for p in _params(bodies))


def test_blocks_render_as_dingtalk_markdown() -> None:
    presentation = MessagePresentation(
        title="Deploy *done*",
        tone="success",
        blocks=(
            TextBlock("All **3** services are up."),
            ContextBlock("took 42 s\nregion eu"),
            DividerBlock(),
            ButtonsBlock(
                (
                    Button("Dashboard", url="https://ex.test/a(b)"),
                    Button("Script", url="javascript:alert(1)"),
                    Button("Roll back", command="/rollback"),
                    Button("Approve", value="secret-callback-value"),
                )
            ),
        ),
    )
    [param] = _params(renderer.render(adapt(presentation, renderer.CAPABILITIES)))
    text = param["text"]
    assert param["title"] == "Deploy *done*"
    assert text.startswith("### Deploy \\*done\\*")
    assert "All **3** services are up." in text
    assert "> took 42 s\n> region eu" in text and "\n---\n" in text
    assert "- [Dashboard](https://ex.test/a%28b%29)" in text
    assert "Script" in text and "](javascript" not in text  # never a clickable link
    assert "- Roll back: `/rollback`" in text
    assert "- Approve" in text and "secret-callback-value" not in text


def test_selects_degrade_to_a_readable_list_and_text_comes_first() -> None:
    presentation = MessagePresentation(
        blocks=(SelectBlock((SelectOption("Beijing"), SelectOption("Shanghai")), "Region"),)
    )
    adapted = adapt(presentation, renderer.CAPABILITIES)
    [param] = _params(renderer.render(adapted, text="Pick a region"))
    assert param["text"].startswith("Pick a region")
    assert "Beijing" in param["text"] and "Shanghai" in param["text"]
    assert param["title"] == "Pick a region"


class _Client:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def send_robot_group_message(self, *, body: dict[str, Any], timeout: Any) -> Any:
        self.calls.append(("group", body))
        return SimpleNamespace(process_query_key="pqk-group")

    def batch_send_robot_oto_messages(self, *, body: dict[str, Any], timeout: Any) -> Any:
        self.calls.append(("oto", body))
        return SimpleNamespace(process_query_key="pqk-oto")


def test_the_sender_routes_groups_and_users_and_returns_the_process_query_key() -> None:
    client = _Client()
    sender = DingtalkSender(client, "robot-1")  # type: ignore[arg-type]
    registry = SenderRegistry()
    registry.register(sender)
    payload = ReplyPayload(presentation=MessagePresentation(title="Hi"))
    group = deliver("dingtalk", "cidGroup1", payload, registry=registry)
    user = deliver("dingtalk", "user:staff-9", payload, registry=registry)
    assert (group.message_id, user.message_id) == ("pqk-group", "pqk-oto")
    (kind1, body1), (kind2, body2) = client.calls
    assert kind1 == "group" and body1["openConversationId"] == "cidGroup1"
    assert kind2 == "oto" and body2["userIds"] == ["staff-9"]
    assert body1["robotCode"] == body2["robotCode"] == "robot-1"
    assert not sender.delivery_capabilities.pin
