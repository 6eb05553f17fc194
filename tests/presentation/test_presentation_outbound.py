"""The outbound pipeline with fake senders: adapt, render, send, pin."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from channelkit.errors import ConfigurationError
from channelkit.platforms.slack import renderer as slack
from channelkit.platforms.telegram import renderer as telegram
from channelkit.presentation import (
    Button,
    ButtonsBlock,
    Delivery,
    DeliveryCapabilities,
    DeliveryPinError,
    MessagePresentation,
    PinRequest,
    PresentationCapabilities,
    ReplyPayload,
    TextBlock,
)
from channelkit.presentation.outbound import (
    PIN_FAILED,
    PIN_NO_MESSAGE_ID,
    PIN_UNSUPPORTED,
    FunctionSender,
    PresentationSender,
    SenderRegistry,
    deliver,
)


class FakeSender:
    """Records sends and pins; message ids m-1, m-2, ..."""

    def __init__(
        self,
        platform: str = "fake",
        *,
        pin: bool = True,
        capabilities: PresentationCapabilities | None = None,
        render: Any = None,
        pin_error: Exception | None = None,
        return_ids: bool = True,
    ) -> None:
        self.platform = platform
        self.presentation_capabilities = capabilities or telegram.CAPABILITIES
        self.delivery_capabilities = DeliveryCapabilities(pin=pin)
        self._render = render or telegram.render
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.pins: list[tuple[str, str, bool]] = []
        self.pin_error = pin_error
        self.return_ids = return_ids

    def render(
        self, presentation: MessagePresentation, *, text: str | None = None
    ) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._render(presentation, text=text)
        return result

    def send(self, target: str, message: dict[str, Any]) -> str | None:
        self.sent.append((target, message))
        return f"m-{len(self.sent)}" if self.return_ids else None

    def pin(self, target: str, message_id: str, *, notify: bool) -> None:
        if self.pin_error is not None:
            raise self.pin_error
        self.pins.append((target, message_id, notify))


PRESENTATION = MessagePresentation(
    title="Deploy",
    blocks=(TextBlock("Ready?"), ButtonsBlock((Button("Go", value="go"),))),
)


def setup(sender: FakeSender) -> SenderRegistry:
    registry = SenderRegistry()
    registry.register(sender)
    return registry


def test_fake_satisfies_protocol() -> None:
    assert isinstance(FakeSender(), PresentationSender)


def test_adapts_renders_and_sends() -> None:
    sender = FakeSender()
    result = deliver(
        "fake", "chat-1", ReplyPayload(presentation=PRESENTATION), registry=setup(sender)
    )
    assert result.message_ids == ("m-1",)
    assert not result.pinned
    [(target, body)] = sender.sent
    assert target == "chat-1"
    assert body["reply_markup"] == {"inline_keyboard": [[{"text": "Go", "callback_data": "go"}]]}


def test_pinned_on_success_with_notify_forwarded() -> None:
    sender = FakeSender()
    payload = ReplyPayload(
        presentation=PRESENTATION, delivery=Delivery(pin=PinRequest(notify=True))
    )
    result = deliver("fake", "chat-1", payload, registry=setup(sender))
    assert result.pinned and result.pin_warning is None
    assert sender.pins == [("chat-1", "m-1", True)]
    sender2 = FakeSender()
    deliver(
        "fake", "c", ReplyPayload(text="hi", delivery=Delivery(pin=True)), registry=setup(sender2)
    )
    assert sender2.pins == [("c", "m-1", False)]  # notify defaults to False


def test_pins_the_first_of_several_messages() -> None:
    sender = FakeSender()
    payload = ReplyPayload(text="x" * 9000, delivery=Delivery(pin=True))
    result = deliver("fake", "chat", payload, registry=setup(sender))
    assert len(sender.sent) == 3
    assert sender.pins == [("chat", "m-1", False)]
    assert result.message_ids == ("m-1", "m-2", "m-3")


def test_unsupported_pin_warns_and_delivers(caplog: pytest.LogCaptureFixture) -> None:
    sender = FakeSender(pin=False)
    with caplog.at_level(logging.WARNING, logger="channelkit.presentation.outbound"):
        result = deliver(
            "fake",
            "chat",
            ReplyPayload(text="hi", delivery=Delivery(pin=True)),
            registry=setup(sender),
        )
    assert len(sender.sent) == 1 and not sender.pins
    assert result.pin_warning == PIN_UNSUPPORTED
    assert PIN_UNSUPPORTED in caplog.text


def test_unsupported_pin_required_raises_after_sending() -> None:
    sender = FakeSender(pin=False)
    payload = ReplyPayload(text="hi", delivery=Delivery(pin=PinRequest(required=True)))
    with pytest.raises(DeliveryPinError, match="not supported by channel: fake") as info:
        deliver("fake", "chat", payload, registry=setup(sender))
    assert len(sender.sent) == 1
    assert info.value.message_id == "m-1"


def test_pin_failure_warns_unless_required(caplog: pytest.LogCaptureFixture) -> None:
    sender = FakeSender(pin_error=RuntimeError("pin denied"))
    with caplog.at_level(logging.WARNING):
        result = deliver(
            "fake",
            "chat",
            ReplyPayload(text="hi", delivery=Delivery(pin=True)),
            registry=setup(sender),
        )
    assert result.message_ids == ("m-1",)
    assert result.pin_warning is not None and result.pin_warning.startswith(PIN_FAILED)
    assert PIN_FAILED in caplog.text

    sender = FakeSender(pin_error=RuntimeError("pin denied"))
    payload = ReplyPayload(text="hi", delivery=Delivery(pin=PinRequest(required=True)))
    with pytest.raises(DeliveryPinError, match="pin denied") as info:
        deliver("fake", "chat", payload, registry=setup(sender))
    assert len(sender.sent) == 1  # the message was delivered before the error
    assert info.value.message_id == "m-1"
    assert info.value.message_ids == ("m-1",)
    assert isinstance(info.value.__cause__, RuntimeError)


def test_no_message_id_pin() -> None:
    sender = FakeSender(return_ids=False)
    result = deliver(
        "fake", "c", ReplyPayload(text="hi", delivery=Delivery(pin=True)), registry=setup(sender)
    )
    assert result.pin_warning == PIN_NO_MESSAGE_ID
    payload = ReplyPayload(text="hi", delivery=Delivery(pin=PinRequest(required=True)))
    with pytest.raises(DeliveryPinError, match="no delivered message id"):
        deliver("fake", "c", payload, registry=setup(FakeSender(return_ids=False)))


def test_pin_disabled_request_does_nothing() -> None:
    sender = FakeSender()
    deliver(
        "fake",
        "c",
        ReplyPayload(text="hi", delivery=Delivery(pin=PinRequest(enabled=False, required=True))),
        registry=setup(sender),
    )
    assert sender.pins == []


def test_channel_without_renderer_gets_text_fallback() -> None:
    sender = FakeSender(capabilities=PresentationCapabilities(supported=False))
    deliver(
        "fake", "c", ReplyPayload(text="Intro", presentation=PRESENTATION), registry=setup(sender)
    )
    [(_, body)] = sender.sent
    assert body == {"text": "Intro\n\nDeploy\n\nReady?\n\n- Go"}


def test_json_payload_is_schema_validated() -> None:
    sender = FakeSender()
    result = deliver("fake", "c", {"text": "hi", "delivery": {"pin": True}}, registry=setup(sender))
    assert result.pinned
    from channelkit.presentation import PresentationError

    with pytest.raises(PresentationError, match="unknown field 'blocks'"):
        deliver("fake", "c", {"blocks": []}, registry=setup(FakeSender()))


def test_registry_errors() -> None:
    registry = SenderRegistry()
    with pytest.raises(ConfigurationError, match="no sender registered for platform 'nope'"):
        deliver("nope", "c", ReplyPayload(text="x"), registry=registry)
    registry.register(FakeSender())
    with pytest.raises(ConfigurationError, match="already registered"):
        registry.register(FakeSender())
    registry.register(FakeSender(), replace=True)
    assert registry.platforms() == ["fake"]
    registry.unregister("fake")
    assert registry.platforms() == []


def test_function_sender_with_slack_renderer() -> None:
    sent: list[dict[str, Any]] = []
    pins: list[tuple[str, str, bool]] = []
    sender = FunctionSender(
        "slack",
        render=slack.render,
        send=lambda target, body: sent.append(body) or "1700000000.0001",
        pin=lambda target, ts, notify: pins.append((target, ts, notify)),
        presentation_capabilities=slack.CAPABILITIES,
    )
    registry = SenderRegistry()
    registry.register(sender)
    result = deliver(
        "slack",
        "C1",
        ReplyPayload(presentation=PRESENTATION, delivery=Delivery(pin=True)),
        registry=registry,
    )
    assert result.pinned and pins == [("C1", "1700000000.0001", False)]
    assert sent[0]["blocks"][0]["type"] == "header"
