"""Pipeline contracts: ``limits=None`` means no limits; a renderer may return None to
ask for the text fallback, and declared text limits apply to that fallback; ``notify``
on pins is honoured where the platform has it; legacy ``interactive`` input warns once
and its reverse mapping keeps commands."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from channelkit.platforms.discord import renderer as discord
from channelkit.platforms.feishu import renderer as feishu
from channelkit.platforms.mattermost import renderer as mattermost
from channelkit.platforms.slack import renderer as slack
from channelkit.platforms.telegram import renderer as telegram
from channelkit.presentation import (
    Button,
    ButtonsBlock,
    DeliveryCapabilities,
    FunctionSender,
    MessagePresentation,
    PresentationCapabilities,
    PresentationLimits,
    ReplyPayload,
    SenderRegistry,
    TextBlock,
    TextLimits,
    adapt,
    deliver,
    model,
    presentation_from_interactive,
    presentation_to_interactive,
)


def test_capabilities_without_limits_mean_no_limits() -> None:
    capabilities = PresentationCapabilities(limits=None)
    assert capabilities == PresentationCapabilities()
    assert capabilities.limits == PresentationLimits()
    presentation = MessagePresentation(
        title="t", blocks=(ButtonsBlock(tuple(Button(f"b{n}", value="v") for n in range(30))),)
    )
    assert adapt(presentation, capabilities) is presentation
    assert PresentationLimits(actions=None, selects=None, text=None) == PresentationLimits()  # type: ignore[arg-type]


def _fallback_registry(
    capabilities: PresentationCapabilities,
) -> tuple[SenderRegistry, list[dict[str, Any]], list[Any]]:
    sent: list[dict[str, Any]] = []
    calls: list[Any] = []

    def render(presentation: MessagePresentation, *, text: str | None = None) -> Any:
        calls.append((presentation, text))
        if presentation.blocks:
            return None  # "I cannot render this natively: send the text fallback"
        return [{"text": text}]

    registry = SenderRegistry()
    registry.register(
        FunctionSender(
            "plain",
            render=render,
            send=lambda target, body: sent.append(body) or str(len(sent)),
            presentation_capabilities=capabilities,
        )
    )
    return registry, sent, calls


def test_renderer_returning_none_gets_the_text_fallback_within_declared_limits() -> None:
    capabilities = PresentationCapabilities(
        limits=PresentationLimits(text=TextLimits(max_length=20, encoding="utf16-units"))
    )
    registry, sent, _ = _fallback_registry(capabilities)
    payload = ReplyPayload(
        presentation=MessagePresentation(
            title="Report",
            blocks=(TextBlock("first paragraph"), ButtonsBlock((Button("Open", value="o"),))),
        )
    )
    result = deliver("plain", "t", payload, registry=registry)
    assert len(result.message_ids) == len(sent) > 1
    assert all(len(body["text"]) <= 20 for body in sent)
    assert "".join(body["text"] for body in sent).replace("\n", "") == (
        "Reportfirst paragraph- Open"
    )


def test_unsupported_channel_fallback_respects_declared_text_limits() -> None:
    capabilities = PresentationCapabilities(
        supported=False, limits=PresentationLimits(text=TextLimits(max_length=8))
    )
    registry, sent, _ = _fallback_registry(capabilities)
    deliver("plain", "t", ReplyPayload(text="0123456789 abcdefgh"), registry=registry)
    assert [body["text"] for body in sent] == ["01234567", "89 abcde", "fgh"]


def test_pin_notify_is_declared_where_the_platform_has_it() -> None:
    assert DeliveryCapabilities(pin=True, pin_notify=True) == telegram.DELIVERY_CAPABILITIES
    for module in (slack, discord, mattermost, feishu):
        assert module.DELIVERY_CAPABILITIES.pin and not module.DELIVERY_CAPABILITIES.pin_notify


def test_legacy_interactive_warns_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model, "_interactive_warned", False)
    data = {"interactive": {"blocks": [{"type": "text", "text": "hi"}]}}
    with pytest.warns(DeprecationWarning, match="interactive"):
        ReplyPayload.from_dict(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ReplyPayload.from_dict(data)  # no second warning


def test_reverse_interactive_mapping_keeps_commands() -> None:
    legacy = {
        "blocks": [
            {
                "type": "buttons",
                "buttons": [
                    {"label": "Go", "action": {"type": "command", "command": "/go"}},
                    {"label": "V", "value": "v1"},
                ],
            }
        ]
    }
    presentation = presentation_from_interactive(legacy)
    assert presentation is not None
    back = presentation_to_interactive(presentation)
    assert back is not None
    go = back["blocks"][0]["buttons"][0]
    assert go["action"] == {"type": "command", "command": "/go"}  # what legacy readers use
    assert presentation_from_interactive(back) == presentation
