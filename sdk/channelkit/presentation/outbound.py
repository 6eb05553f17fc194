"""Outbound pipeline: resolve the platform sender, adapt, render, send, pin.

A *sender* (`PresentationSender`) is a platform's outbound adapter: it declares
its capabilities, renders an adapted presentation to native message bodies, sends one
body to a target and, where supported, pins a delivered message. Senders are
registered per platform in a `SenderRegistry`; `deliver()` runs the flow::

    adapt(presentation, sender.presentation_capabilities)
    -> sender.render(adapted, text=payload.text)        # native bodies, in send order
    -> sender.send(target, body) for each body          # message ids
    -> sender.pin(target, first_message_id, notify=...)  # when delivery.pin asks

A channel without a renderer (capabilities ``None`` or ``supported=False``) gets the
plain-text fallback, and so does a presentation its renderer declines (``render``
returns None): the fallback text is split to the channel's declared text limit
(``limits.text.max_length`` in its encoding) and each piece rendered as text. A payload
with ``allow_mass_mentions`` is rendered with ``allow_mass_mentions=True`` (the keyword
is passed only then, so senders written before it keep working for other payloads).
Pinning never loses a message: an unsupported or failed pin is a
logged warning, or, with ``required=True``, a `DeliveryPinError` raised after the
message was sent, carrying its id.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from channelkit.errors import ConfigurationError, DeliveryPinError, DeserializationError
from channelkit.presentation.adapt import adapt
from channelkit.presentation.capabilities import DeliveryCapabilities, PresentationCapabilities
from channelkit.presentation.fallback import render_fallback_text
from channelkit.presentation.model import MessagePresentation, PinRequest, ReplyPayload
from channelkit.presentation.rendering import split_nonblank

__all__ = [
    "PIN_FAILED",
    "PIN_NO_MESSAGE_ID",
    "PIN_UNSUPPORTED",
    "DeliveryResult",
    "FunctionSender",
    "PresentationSender",
    "SenderBase",
    "SenderRegistry",
    "default_registry",
    "deliver",
    "mention_options",
    "register_sender",
    "response_message_id",
]

logger = logging.getLogger(__name__)

PIN_NO_MESSAGE_ID = "Delivery pin requested, but no delivered message id was returned."
PIN_UNSUPPORTED = "Delivery pin requested, but channel does not support pinning delivered messages."
PIN_FAILED = "Delivery pin requested, but channel failed to pin delivered message."


@runtime_checkable
class PresentationSender(Protocol):
    """A platform's outbound adapter, as the pipeline sees it."""

    @property
    def platform(self) -> str:
        """Platform name used as the registry key (``"slack"``)."""
        ...

    @property
    def presentation_capabilities(self) -> PresentationCapabilities | None:
        """What the platform renders; None means text fallback only."""
        ...

    @property
    def delivery_capabilities(self) -> DeliveryCapabilities:
        """What the platform can do after sending (pin)."""
        ...

    def render(
        self, presentation: MessagePresentation, *, text: str | None = None
    ) -> list[dict[str, Any]] | None:
        """Native message bodies for an adapted presentation, in send order; None asks
        for the text fallback instead.

        A sender whose ``render`` also takes ``allow_mass_mentions: bool = False`` gets
        ``allow_mass_mentions=True`` for a payload that opts in (it lets the text notify
        a whole channel; off, the renderer neutralises such mentions). A sender without
        that keyword is always rendered with mass mentions neutralised."""
        ...

    def send(self, target: str, message: dict[str, Any]) -> str | None:
        """Send one body to ``target``; return the platform message id if known."""
        ...

    def pin(self, target: str, message_id: str, *, notify: bool) -> None:
        """Pin a delivered message (only called when ``delivery_capabilities.pin``)."""
        ...


class SenderBase:
    """Shared base of the platform senders (``channelkit.platforms.<name>.sender``).

    Subclasses set ``platform`` and the two capability attributes and implement
    `render()` and ``send``; `pin()` refuses unless overridden (the pipeline only
    calls it when ``delivery_capabilities.pin`` is true).
    """

    platform = ""
    presentation_capabilities: PresentationCapabilities | None = None
    delivery_capabilities = DeliveryCapabilities()

    def render(
        self, presentation: MessagePresentation, *, text: str | None = None
    ) -> list[dict[str, Any]] | None:
        """Native message bodies for an adapted presentation, in send order (None: send
        the text fallback). Subclasses may add ``allow_mass_mentions: bool = False``."""
        raise NotImplementedError

    def pin(self, target: str, message_id: str, *, notify: bool) -> None:
        """Pin a delivered message; this platform cannot."""
        raise NotImplementedError(f"{self.platform} cannot pin delivered messages")


def response_message_id(value: object, path: str) -> str:
    """A message id read from a platform response, or a DeserializationError naming ``path``."""
    if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
        return str(value)
    raise DeserializationError(path, value, "no message id in the response")


@dataclass(frozen=True)
class DeliveryResult:
    """What `deliver()` did: the ids of the messages sent (in order), whether the
    first one was pinned, and the warning when a requested pin was skipped/failed."""

    platform: str
    target: str
    message_ids: tuple[str, ...]
    messages: tuple[dict[str, Any], ...]
    pinned: bool = False
    pin_warning: str | None = None

    @property
    def message_id(self) -> str | None:
        """The first delivered message id (the one a pin applies to)."""
        return self.message_ids[0] if self.message_ids else None


class SenderRegistry:
    """Thread-safe map platform name -> sender."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._senders: dict[str, PresentationSender] = {}

    def register(self, sender: PresentationSender, *, replace: bool = False) -> None:
        """Register ``sender`` under ``sender.platform``; refuses to shadow one silently."""
        name = sender.platform
        with self._lock:
            if name in self._senders and not replace:
                raise ConfigurationError(f"a sender for {name!r} is already registered", "platform")
            self._senders[name] = sender

    def unregister(self, platform: str) -> None:
        """Remove the sender for ``platform`` (no error if absent)."""
        with self._lock:
            self._senders.pop(platform, None)

    def get(self, platform: str) -> PresentationSender:
        """The sender for ``platform``; ConfigurationError when none is registered."""
        with self._lock:
            sender = self._senders.get(platform)
            known = sorted(self._senders)
        if sender is None:
            raise ConfigurationError(
                f"no sender registered for platform {platform!r} (registered: {known})",
                "platform",
            )
        return sender

    def platforms(self) -> list[str]:
        """Registered platform names, sorted."""
        with self._lock:
            return sorted(self._senders)


default_registry = SenderRegistry()


def register_sender(sender: PresentationSender, *, replace: bool = False) -> None:
    """Register ``sender`` in the default registry."""
    default_registry.register(sender, replace=replace)


def render_for(
    sender: PresentationSender, payload: ReplyPayload
) -> tuple[MessagePresentation, list[dict[str, Any]]]:
    """Adapt and render ``payload`` for ``sender`` without sending: (adapted, bodies)."""
    capabilities = sender.presentation_capabilities
    presentation = payload.presentation or MessagePresentation()
    options = mention_options(sender, payload)
    if capabilities is None or not capabilities.supported:
        text = render_fallback_text(presentation, payload.text)
        return presentation, _render_text(sender, text, capabilities, options)
    adapted = adapt(presentation, capabilities)
    bodies = sender.render(adapted, text=payload.text, **options)
    if bodies is None:  # the renderer asks for the text fallback
        text = render_fallback_text(adapted, payload.text)
        bodies = _render_text(sender, text, capabilities, options)
    return adapted, bodies


def _accepts_keyword(function: Callable[..., Any], name: str) -> bool:
    """Whether ``function`` takes the keyword argument ``name`` (or ``**kwargs``)."""
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):  # pragma: no cover - callables without a signature
        return False
    return name in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


def mention_options(sender: PresentationSender, payload: ReplyPayload) -> dict[str, Any]:
    """``{"allow_mass_mentions": True}`` when the payload opts in and the sender's
    ``render`` takes the keyword; otherwise ``{}`` (mentions stay neutralised)."""
    if not payload.allow_mass_mentions:
        return {}
    render = sender.render
    if isinstance(sender, FunctionSender):
        render = sender._render
    if _accepts_keyword(render, "allow_mass_mentions"):
        return {"allow_mass_mentions": True}
    logger.warning(
        "allow_mass_mentions requested, but the sender's render cannot take it; "
        "mass mentions stay neutralised",
        extra={"platform": sender.platform},
    )
    return {}


def _render_text(
    sender: PresentationSender,
    text: str,
    capabilities: PresentationCapabilities | None,
    options: dict[str, Any],
) -> list[dict[str, Any]]:
    """The text fallback as bodies: one text-only render per piece of the declared text
    limit (the whole text when no limit is declared)."""
    limits = capabilities.limits.text if capabilities is not None else None
    if limits is None:
        pieces = [text] if text.strip() else []
    else:
        pieces = split_nonblank(text, limits.max_length, limits.encoding)
    bodies: list[dict[str, Any]] = []
    for piece in pieces:
        rendered = sender.render(MessagePresentation(), text=piece, **options)
        if rendered is None:
            raise ConfigurationError(
                f"the {sender.platform} renderer returned None for plain text", "render"
            )
        bodies.extend(rendered)
    return bodies


def deliver(
    platform: str,
    target: str,
    payload: ReplyPayload | Mapping[str, Any],
    *,
    registry: SenderRegistry | None = None,
) -> DeliveryResult:
    """Send ``payload`` to ``target`` on ``platform`` and pin it when requested.

    ``payload`` may be a `ReplyPayload` or its JSON form (schema-validated).
    Send errors propagate (nothing was delivered past the failing body). Pin problems
    never lose the message: they are logged, or raised as `DeliveryPinError`
    after sending when the pin is ``required``.
    """
    if not isinstance(payload, ReplyPayload):
        from channelkit.presentation.schema import parse_reply_payload

        payload = parse_reply_payload(payload)
    sender = (registry or default_registry).get(platform)
    _, messages = render_for(sender, payload)
    if not messages:
        logger.warning("Nothing to send after rendering", extra={"platform": platform})
    message_ids: list[str] = []
    for message in messages:
        message_id = sender.send(target, message)
        if message_id is not None:
            message_ids.append(str(message_id))
    result = DeliveryResult(
        platform=platform,
        target=target,
        message_ids=tuple(message_ids),
        messages=tuple(messages),
    )
    pin = payload.delivery.pin_request if payload.delivery is not None else None
    if pin is None:
        return result
    return _pin(sender, result, pin)


def _pin(sender: PresentationSender, result: DeliveryResult, pin: PinRequest) -> DeliveryResult:
    message_id = result.message_id
    where = {"platform": result.platform, "target": result.target}

    def skip(message: str) -> DeliveryResult:
        if pin.required:
            raise DeliveryPinError(
                message,
                platform=result.platform,
                target=result.target,
                message_id=message_id,
                message_ids=result.message_ids,
            )
        logger.warning(message, extra={"pin": {**where, "message_id": message_id}})
        return _with(result, pinned=False, pin_warning=message)

    if message_id is None:
        return skip(PIN_NO_MESSAGE_ID)
    if not sender.delivery_capabilities.pin:
        if pin.required:
            return skip(f"Delivery pin is not supported by channel: {result.platform}")
        return skip(PIN_UNSUPPORTED)
    if pin.notify and not sender.delivery_capabilities.pin_notify:
        logger.debug(
            "Pin notify ignored: the channel's pin has no notify switch",
            extra={"pin": {**where, "message_id": message_id}},
        )
    try:
        sender.pin(result.target, message_id, notify=pin.notify)
    except Exception as exc:
        if pin.required:
            raise DeliveryPinError(
                f"{PIN_FAILED} {exc}",
                platform=result.platform,
                target=result.target,
                message_id=message_id,
                message_ids=result.message_ids,
            ) from exc
        logger.warning(
            PIN_FAILED,
            extra={"pin": {**where, "message_id": message_id, "error": type(exc).__name__}},
        )
        return _with(result, pinned=False, pin_warning=f"{PIN_FAILED} {exc}")
    return _with(result, pinned=True, pin_warning=None)


def _with(result: DeliveryResult, *, pinned: bool, pin_warning: str | None) -> DeliveryResult:
    return DeliveryResult(
        platform=result.platform,
        target=result.target,
        message_ids=result.message_ids,
        messages=result.messages,
        pinned=pinned,
        pin_warning=pin_warning,
    )


class FunctionSender:
    """A sender assembled from functions: a renderer module's ``render`` plus a ``send``
    callable (and optionally ``pin``). Handy for custom platforms and tests."""

    def __init__(
        self,
        platform: str,
        *,
        render: Callable[..., list[dict[str, Any]] | None],
        send: Callable[[str, dict[str, Any]], str | None],
        pin: Callable[[str, str, bool], None] | None = None,
        presentation_capabilities: PresentationCapabilities | None = None,
        delivery_capabilities: DeliveryCapabilities | None = None,
        render_options: Mapping[str, Any] | None = None,
    ) -> None:
        self._platform = platform
        self._render = render
        self._send = send
        self._pin = pin
        self._presentation_capabilities = presentation_capabilities
        self._delivery_capabilities = delivery_capabilities or DeliveryCapabilities(
            pin=pin is not None
        )
        self._render_options = dict(render_options or {})

    @property
    def platform(self) -> str:
        """Registry key."""
        return self._platform

    @property
    def presentation_capabilities(self) -> PresentationCapabilities | None:
        """Declared presentation capabilities."""
        return self._presentation_capabilities

    @property
    def delivery_capabilities(self) -> DeliveryCapabilities:
        """Declared delivery capabilities."""
        return self._delivery_capabilities

    def render(
        self,
        presentation: MessagePresentation,
        *,
        text: str | None = None,
        allow_mass_mentions: bool = False,
    ) -> list[dict[str, Any]] | None:
        """Call the render function with the configured options (``allow_mass_mentions``
        is passed on only when set)."""
        options = dict(self._render_options)
        if allow_mass_mentions:
            options["allow_mass_mentions"] = True
        return self._render(presentation, text=text, **options)

    def send(self, target: str, message: dict[str, Any]) -> str | None:
        """Call the send function."""
        return self._send(target, message)

    def pin(self, target: str, message_id: str, *, notify: bool) -> None:
        """Call the pin function."""
        if self._pin is None:
            raise ConfigurationError(f"{self._platform} sender has no pin function", "pin")
        self._pin(target, message_id, notify)
