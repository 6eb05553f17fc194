"""Agent text cannot notify a whole channel: Slack special mentions are escaped,
Discord payloads allow no mentions, Mattermost @channel/@all/@here are made inert,
unless the reply opts in with ``allow_mass_mentions``."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from channelkit.platforms.discord import renderer as discord
from channelkit.platforms.mattermost import renderer as mattermost
from channelkit.platforms.slack import renderer as slack
from channelkit.presentation import (
    ContextBlock,
    FunctionSender,
    MessagePresentation,
    PresentationError,
    ReplyPayload,
    SenderRegistry,
    TextBlock,
    deliver,
    parse_reply_payload,
)

SLACK_MASS = ["<!channel>", "<!here>", "<!everyone>", "<!here|here>", "<!subteam^S0123|@oncall>"]


def _slack_texts(messages: list[dict[str, Any]]) -> list[str]:
    texts = [m["text"] for m in messages]
    for message in messages:
        for block in message.get("blocks", []):
            if block["type"] == "section":
                texts.append(block["text"]["text"])
            elif block["type"] == "context":
                texts += [e["text"] for e in block["elements"]]
    return texts


@pytest.mark.parametrize("mention", SLACK_MASS)
def test_slack_escapes_special_mentions_everywhere(mention: str) -> None:
    presentation = MessagePresentation(
        title="t", blocks=(TextBlock(f"hey {mention} look"), ContextBlock(f"cc {mention}"))
    )
    messages = slack.render(presentation, text=f"lead {mention}")
    texts = _slack_texts(messages)
    assert len(texts) == 4
    for text in texts:
        assert "<!" not in text
        assert "&lt;" + mention[1:-1] + "&gt;" in text
    assert "<@U123>" in _slack_texts(slack.render(MessagePresentation(), text="<@U123> hi"))[0]


def test_slack_keeps_special_mentions_when_opted_in() -> None:
    messages = slack.render(MessagePresentation(), text="<!here> deploy", allow_mass_mentions=True)
    assert all("<!here>" in t for t in _slack_texts(messages))


def test_discord_allows_no_mentions_unless_opted_in() -> None:
    presentation = MessagePresentation(blocks=(TextBlock("@everyone @here <@&123> <@456>"),))
    for message in discord.render(presentation):
        assert message["allowed_mentions"] == {"parse": []}
    opted = discord.render(presentation, allow_mass_mentions=True)
    assert opted[0]["allowed_mentions"] == {"parse": ["everyone", "roles", "users"]}


@pytest.mark.parametrize("mention", ["@channel", "@all", "@here", "@HERE", "(@channel)", "@here."])
def test_mattermost_neutralises_channel_wide_mentions(mention: str) -> None:
    posts = mattermost.render(
        MessagePresentation(blocks=(TextBlock(f"ping {mention} now"),)), callback_url="https://cb"
    )
    message = posts[0]["message"]
    assert mention not in message
    assert message.replace("\u2060", "") == f"ping {mention} now"


def test_mattermost_leaves_usernames_and_addresses_alone_and_honours_opt_in() -> None:
    text = "ops@here.example @allison @here-team"
    posts = mattermost.render(MessagePresentation(), text=text, callback_url="https://cb")
    assert posts[0]["message"] == text
    opted = mattermost.render(
        MessagePresentation(),
        text="@channel go",
        callback_url="https://cb",
        allow_mass_mentions=True,
    )
    assert opted[0]["message"] == "@channel go"


def test_opt_in_is_a_reply_field_in_model_schema_and_json() -> None:
    payload = parse_reply_payload({"text": "<!here> go", "allow_mass_mentions": True})
    assert payload.allow_mass_mentions is True
    assert payload.to_dict() == {"text": "<!here> go", "allow_mass_mentions": True}
    assert ReplyPayload(text="x").allow_mass_mentions is False
    assert "allow_mass_mentions" not in ReplyPayload(text="x").to_dict()
    with pytest.raises(PresentationError) as info:
        parse_reply_payload({"text": "x", "allow_mass_mentions": "yes"})
    assert info.value.path == "allow_mass_mentions"
    with pytest.raises(PresentationError) as info:
        ReplyPayload.from_dict({"text": "x", "allow_mass_mentions": 1})
    assert info.value.path == "allow_mass_mentions"


def _registry(render: Any) -> tuple[SenderRegistry, list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []
    registry = SenderRegistry()
    registry.register(
        FunctionSender(
            "slack",
            render=render,
            send=lambda target, body: sent.append(body) or "1",
            presentation_capabilities=slack.CAPABILITIES,
        )
    )
    return registry, sent


def test_deliver_passes_the_opt_in_to_the_renderer() -> None:
    registry, sent = _registry(slack.render)
    deliver("slack", "C1", ReplyPayload(text="<!channel> a"), registry=registry)
    deliver(
        "slack",
        "C1",
        ReplyPayload(text="<!channel> b", allow_mass_mentions=True),
        registry=registry,
    )
    assert "&lt;!channel&gt; a" in json.dumps(sent[0])
    assert "<!channel> b" in json.dumps(sent[1])


def test_sender_without_the_keyword_stays_neutralised(caplog: pytest.LogCaptureFixture) -> None:
    def old_render(presentation: MessagePresentation, *, text: str | None = None) -> Any:
        return slack.render(presentation, text=text)

    registry, sent = _registry(old_render)
    with caplog.at_level(logging.WARNING):
        deliver(
            "slack",
            "C1",
            ReplyPayload(text="<!here> c", allow_mass_mentions=True),
            registry=registry,
        )
    assert "&lt;!here&gt; c" in json.dumps(sent[0])
    assert any("allow_mass_mentions requested" in r.getMessage() for r in caplog.records)
