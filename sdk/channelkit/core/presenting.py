"""Presentations from a channel: send, pin, unpin, list pins.

`ChannelPresentations` is a base of `ChannelBase`:

* `send_presentation()` sends a
  `ReplyPayload` (or its JSON form) to a conversation:
  adapt to the channel's capabilities, render, send, pin (``delivery.pin``); it returns
  the platform message id. The channel's sender comes from
  `presentation_sender()` (adapters with a renderer override
  it); without one, the plain-text fallback goes through ``send_message``.
* A run's own presentations (``Turn.present``) are ordered with its text by
  `RunEvents`, which then calls
  ``send_presentation`` with the run's conversation as ``origin``: a presentation a run
  sends to a conversation other than its own carries a context block naming where it
  came from (presentation content, never a native parameter).

Pins: `pin_message()`,
`unpin_message()` and
`pinned_messages()` ask the channel's sender, which declares
what it can do in ``delivery_capabilities`` (``pin``, ``unpin``, ``list_pins``); where
it cannot they raise ``NotImplementedError`` naming the platform.

Mass mentions: a payload with ``allow_mass_mentions`` is rendered with the keyword by a
platform sender that takes it, through the channel's `FieldsSender` too.

``send_presentation`` waits on the network: call it from a pool thread or a script,
never from a web handler.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from channelkit.core.types import SessionTarget
from channelkit.errors import ConfigurationError
from channelkit.presentation.model import (
    ContextBlock,
    MessagePresentation,
    ReplyPayload,
)

if TYPE_CHECKING:
    from channelkit.presentation.outbound import DeliveryResult, PresentationSender

__all__ = [
    "ChannelPresentations",
    "FieldsSender",
    "TextSender",
    "origin_marker",
    "with_origin",
]


def origin_marker(origin: SessionTarget) -> ContextBlock:
    """The context line a presentation sent to another conversation carries."""
    where = f"chat {origin.chat_id}"
    if origin.thread_id:
        where += f", thread {origin.thread_id}"
    return ContextBlock(f"Sent by the agent from another conversation ({where})")


def _same_conversation(a: SessionTarget, b: SessionTarget) -> bool:
    return a.chat_id == b.chat_id and (a.thread_id or None) == (b.thread_id or None)


def with_origin(
    payload: ReplyPayload, target: SessionTarget, origin: SessionTarget
) -> ReplyPayload:
    """``payload`` with `origin_marker()` appended to its presentation when
    ``target`` is another conversation than ``origin`` (unchanged otherwise)."""
    if _same_conversation(target, origin):
        return payload
    marker = origin_marker(origin)
    base = payload.presentation or MessagePresentation()
    presentation = MessagePresentation(
        title=base.title, tone=base.tone, blocks=(*base.blocks, marker)
    )
    return ReplyPayload(text=payload.text, presentation=presentation, delivery=payload.delivery)


class TextSender:
    """The plain-text fallback sender: the presentation's text form through the
    channel's ``send_message`` (no message id, so no pin)."""

    def __init__(self, channel: ChannelPresentations, target: SessionTarget) -> None:
        from channelkit.presentation.capabilities import DeliveryCapabilities

        self._channel = channel
        self._target = target
        self.delivery_capabilities = DeliveryCapabilities(pin=False)

    @property
    def platform(self) -> str:
        """The channel's name."""
        return self._channel.name

    @property
    def presentation_capabilities(self) -> None:
        """None: the pipeline sends the text fallback."""
        return None

    def render(
        self, presentation: MessagePresentation, *, text: str | None = None
    ) -> list[dict[str, Any]]:
        """One plain-text body (the pipeline already made the fallback text)."""
        return [{"text": text}] if text else []

    def send(self, target: str, message: dict[str, Any]) -> str | None:
        """``send_message`` to the chat (and thread)."""
        self._channel.send_message(target, str(message["text"]), thread_id=self._target.thread_id)
        return None

    def pin(self, target: str, message_id: str, *, notify: bool) -> None:
        """Text fallbacks cannot be pinned."""
        raise NotImplementedError(f"{self.platform} cannot pin messages")


class FieldsSender:
    """A platform sender whose every body gets ``fields`` merged in (a thread id, a
    silent flag); everything else is the wrapped sender's."""

    def __init__(self, sender: PresentationSender, fields: Mapping[str, Any]) -> None:
        self._sender = sender
        self._fields = dict(fields)

    @property
    def sender(self) -> PresentationSender:
        """The wrapped sender."""
        return self._sender

    @property
    def platform(self) -> str:
        return self._sender.platform

    @property
    def presentation_capabilities(self) -> Any:
        return self._sender.presentation_capabilities

    @property
    def delivery_capabilities(self) -> Any:
        return self._sender.delivery_capabilities

    def render(
        self,
        presentation: MessagePresentation,
        *,
        text: str | None = None,
        allow_mass_mentions: bool = False,
    ) -> list[dict[str, Any]] | None:
        """The wrapped sender's render; ``allow_mass_mentions`` is passed on (only when
        set, and only to a render that takes it: otherwise mentions stay neutralised)."""
        if allow_mass_mentions:
            from channelkit.presentation.outbound import mention_options

            opted_in = ReplyPayload(text="-", allow_mass_mentions=True)  # the flag only
            options = mention_options(self._sender, opted_in)
            return self._sender.render(presentation, text=text, **options)
        return self._sender.render(presentation, text=text)

    def send(self, target: str, message: dict[str, Any]) -> str | None:
        return self._sender.send(target, {**message, **self._fields})

    def pin(self, target: str, message_id: str, *, notify: bool) -> None:
        self._sender.pin(target, message_id, notify=notify)

    def unpin(self, target: str, message_id: str) -> None:
        """The wrapped sender's ``unpin`` (NotImplementedError where it has none)."""
        _capable(self._sender, "unpin", "unpin messages")(target, message_id)

    def pins(self, target: str) -> list[str]:
        """The wrapped sender's ``pins`` (NotImplementedError where it has none)."""
        return list(_capable(self._sender, "pins", "list pinned messages")(target))


def _capable(sender: Any, method: str, what: str) -> Any:
    """``sender.<method>`` when the sender declares it (``delivery_capabilities.unpin`` /
    ``list_pins``) and has it; else NotImplementedError naming the platform."""
    flag = {"unpin": "unpin", "pins": "list_pins"}[method]
    declared = getattr(getattr(sender, "delivery_capabilities", None), flag, False) is True
    function = getattr(sender, method, None)
    if isinstance(sender, FieldsSender):
        declared = True  # the wrapped sender decides
    if not declared or not callable(function):
        raise NotImplementedError(f"{sender.platform} cannot {what}")
    return function


class ChannelPresentations:
    """``send_presentation`` and the pins (a ChannelBase base)."""

    # provided by ChannelBase
    name: str

    def send_message(self, chat_id: str, text: str, *, thread_id: str | None = None) -> None:
        raise NotImplementedError  # pragma: no cover - ChannelBase defines it

    # -- hooks ----------------------------------------------------------------------------

    def presentation_sender(
        self, target: SessionTarget, *, silent: bool = False
    ) -> PresentationSender | None:
        """The platform sender for ``target`` (None: plain text through
        ``send_message``). Adapters with a renderer override it; ``silent`` asks for
        messages that do not notify, where the platform can."""
        return None

    def await_run_output(self, run_id: str, timeout: float) -> None:
        """Hook: wait (bounded by ``timeout`` seconds) until the output the run produced so
        far is on the platform, so a presentation the run sends next shows after it.
        Adapters that write output asynchronously (card projection queues) override it;
        the default has nothing to wait for."""

    # -- sending --------------------------------------------------------------------------

    def _as_target(self, target: SessionTarget | str, thread_id: str | None) -> SessionTarget:
        if isinstance(target, SessionTarget):
            return target
        if not isinstance(target, str) or not target:
            raise ConfigurationError("must be a SessionTarget or a non-empty chat id", "target")
        return SessionTarget(self.name, "", target, thread_id)

    def _sender(self, target: SessionTarget, silent: bool) -> PresentationSender:
        sender = self.presentation_sender(target, silent=silent)
        return sender if sender is not None else TextSender(self, target)

    def deliver_presentation(
        self,
        target: SessionTarget | str,
        payload: ReplyPayload | MessagePresentation | Mapping[str, Any],
        *,
        thread_id: str | None = None,
        origin: SessionTarget | None = None,
        silent: bool = False,
    ) -> DeliveryResult:
        """Like `send_presentation()`, returning the whole
        `DeliveryResult` (every message id, whether the
        pin happened, the pin warning)."""
        from channelkit.agents.function import as_reply_payload
        from channelkit.presentation.outbound import SenderRegistry, deliver

        where = self._as_target(target, thread_id)
        reply = as_reply_payload(payload)
        if origin is not None:
            reply = with_origin(reply, where, origin)
        sender = self._sender(where, silent)
        registry = SenderRegistry()
        registry.register(sender)
        return deliver(sender.platform, where.chat_id, reply, registry=registry)

    def send_presentation(
        self,
        target: SessionTarget | str,
        payload: ReplyPayload | MessagePresentation | Mapping[str, Any],
        *,
        thread_id: str | None = None,
        origin: SessionTarget | None = None,
        silent: bool = False,
    ) -> str | None:
        """Send ``payload`` to ``target`` and return the platform message id (None when
        the platform reports none, e.g. the text fallback).

        ``target``: a `SessionTarget` or a chat id (with ``thread_id``).
        ``payload``: a `ReplyPayload` or its JSON form
        (a bare presentation, ``MessagePresentation`` or ``{"title", "blocks"}``, is
        accepted too), validated against the published schema (a
        `PresentationError` names the field, e.g.
        ``presentation.blocks[1].buttons[0].label``). The presentation is adapted to
        what the channel renders, sent, and pinned when ``delivery.pin`` asks; a
        required pin that fails raises `DeliveryPinError`
        after the message was sent (its ``message_id`` is the delivered message).
        ``origin``: the conversation it is sent from; when it differs from ``target``, a
        context block naming it is attached. Platform refusals propagate as
        `ApiError` subclasses. Blocks on the network: never
        call it on a web thread.
        """
        return self.deliver_presentation(
            target, payload, thread_id=thread_id, origin=origin, silent=silent
        ).message_id

    def pin_message(
        self,
        target: SessionTarget | str,
        message_id: str,
        *,
        thread_id: str | None = None,
        notify: bool = False,
    ) -> None:
        """Pin an existing message; NotImplementedError where the channel cannot."""
        where = self._as_target(target, thread_id)
        sender = self._sender(where, False)
        if not sender.delivery_capabilities.pin:
            raise NotImplementedError(f"{sender.platform} cannot pin messages")
        sender.pin(where.chat_id, message_id, notify=notify)

    def unpin_message(
        self, target: SessionTarget | str, message_id: str, *, thread_id: str | None = None
    ) -> None:
        """Unpin a message; NotImplementedError where the channel cannot (its sender
        does not declare ``delivery_capabilities.unpin``)."""
        where = self._as_target(target, thread_id)
        sender = self._sender(where, False)
        _capable(sender, "unpin", "unpin messages")(where.chat_id, message_id)

    def pinned_messages(
        self, target: SessionTarget | str, *, thread_id: str | None = None
    ) -> list[str]:
        """Ids of the pinned messages of a conversation; NotImplementedError where the
        channel cannot list them (its sender does not declare
        ``delivery_capabilities.list_pins``). Telegram lists only the most recent pin."""
        where = self._as_target(target, thread_id)
        sender = self._sender(where, False)
        pins = _capable(sender, "pins", "list pinned messages")
        return [str(message_id) for message_id in pins(where.chat_id)]
