"""``send_presentation`` hands ``allow_mass_mentions`` through the channel's
:class:`~channelkit.core.presenting.FieldsSender` to a platform sender that takes it: on
Slack an opted-in payload keeps ``<!here>`` (it notifies the channel), a default payload
is rendered with it neutralised (``&lt;!here&gt;``), and no "cannot take it" warning is
logged. A wrapped sender without the keyword still neutralises (and says so)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from channelkit.agents import FunctionAgent, Turn
from channelkit.core.presenting import FieldsSender
from channelkit.platforms.slack import renderer as slack_renderer
from channelkit.platforms.slack.sender import SlackSender
from channelkit.presentation.outbound import SenderBase
from channelkit.testing import RecordingChannel, make_channel

TEXT = "<!here> the deploy is done"
CARD = {"title": "Deploy", "blocks": [{"type": "text", "text": "<!here> all 3 services are up"}]}


class _SlackClient:
    """The two calls SlackSender makes, recorded (ts = the message's number)."""

    def __init__(self) -> None:
        self.posted: list[dict[str, Any]] = []

    def chat_post_message(self, *, body: dict[str, Any]) -> Any:
        self.posted.append(body)
        return SimpleNamespace(ts=f"1700000000.{len(self.posted):06d}")

    def pins_add(self, *, body: dict[str, Any]) -> None:  # pragma: no cover - not pinned here
        raise AssertionError("no pin was asked for")


def _idle(turn: Turn) -> str:  # pragma: no cover - no turn runs here
    return ""


@pytest.fixture
def slack() -> Iterator[tuple[RecordingChannel, _SlackClient]]:
    channel = make_channel(FunctionAgent(_idle))
    client = _SlackClient()
    channel.presentation_sender = (  # type: ignore[method-assign]
        lambda target, silent=False: FieldsSender(SlackSender(client), {"unfurl_links": False})
    )
    try:
        yield channel, client
    finally:
        channel.close()


def _wire(client: _SlackClient) -> str:
    return json.dumps(client.posted, ensure_ascii=False)


def test_an_opted_in_payload_keeps_here_on_slack(
    slack: tuple[RecordingChannel, _SlackClient], caplog: pytest.LogCaptureFixture
) -> None:
    channel, client = slack
    payload = {"text": TEXT, "presentation": CARD, "allow_mass_mentions": True}
    with caplog.at_level(logging.WARNING):
        message_id = channel.send_presentation("C123", payload)
    assert message_id == "1700000000.000001"
    wire = _wire(client)
    assert wire.count("<!here>") >= 2 and "&lt;!here&gt;" not in wire  # text and block
    assert client.posted[0]["unfurl_links"] is False  # the wrapper's fields still merged
    assert "cannot take it" not in caplog.text


def test_a_default_payload_neutralises_here(
    slack: tuple[RecordingChannel, _SlackClient],
) -> None:
    channel, client = slack
    channel.send_presentation("C123", {"text": TEXT, "presentation": CARD})
    wire = _wire(client)
    assert "<!here>" not in wire and "&lt;!here&gt;" in wire


def test_the_opt_in_matches_the_slack_renderer_itself(
    slack: tuple[RecordingChannel, _SlackClient],
) -> None:
    channel, client = slack
    channel.send_presentation("C123", {"text": TEXT, "allow_mass_mentions": True})
    from channelkit.presentation.model import MessagePresentation

    expected = slack_renderer.render(MessagePresentation(), text=TEXT, allow_mass_mentions=True)
    assert [{k: v for k, v in b.items() if k in expected[0]} for b in client.posted] == expected


class _NoKeywordSender(SenderBase):
    """A sender written before the opt-in: its render has no ``allow_mass_mentions``."""

    platform = "legacy"
    presentation_capabilities = slack_renderer.CAPABILITIES

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def render(self, presentation: Any, *, text: str | None = None) -> list[dict[str, Any]]:
        return slack_renderer.render(presentation, text=text)

    def send(self, target: str, message: dict[str, Any]) -> str | None:
        self.bodies.append(message)
        return "m1"


def test_a_wrapped_sender_without_the_keyword_still_neutralises(
    caplog: pytest.LogCaptureFixture,
) -> None:
    channel = make_channel(FunctionAgent(_idle))
    sender = _NoKeywordSender()
    channel.presentation_sender = (  # type: ignore[method-assign]
        lambda target, silent=False: FieldsSender(sender, {})
    )
    try:
        with caplog.at_level(logging.WARNING):
            channel.send_presentation("C1", {"text": TEXT, "allow_mass_mentions": True})
    finally:
        channel.close()
    wire = json.dumps(sender.bodies)
    assert "<!here>" not in wire and "&lt;!here&gt;" in wire
    assert "cannot take it" in caplog.text
