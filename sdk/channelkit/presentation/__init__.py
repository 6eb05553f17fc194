"""channelkit.presentation: semantic message presentation.

Build a `MessagePresentation` (title, tone, blocks of text / context / divider /
buttons / select), put it in a `ReplyPayload` with optional `Delivery`
metadata (pin), and `deliver()` it: the platform's
declared `PresentationCapabilities` drive `adapt()` (unsupported parts
degrade to readable text, limits are applied), then the platform renderer produces the
native payload. `render_fallback_text()` is the plain-text form.

See docs/presentation.md.
"""

from __future__ import annotations

from channelkit.errors import DeliveryPinError, PresentationError
from channelkit.presentation.adapt import adapt, button_fallback_label
from channelkit.presentation.capabilities import (
    ActionLimits,
    DeliveryCapabilities,
    PresentationCapabilities,
    PresentationLimits,
    SelectLimits,
    TextLimits,
)
from channelkit.presentation.fallback import render_fallback_text
from channelkit.presentation.model import (
    Block,
    Button,
    ButtonsBlock,
    ContextBlock,
    Delivery,
    DividerBlock,
    MessagePresentation,
    PinRequest,
    ReplyPayload,
    SelectBlock,
    SelectOption,
    TextBlock,
    presentation_from_interactive,
    presentation_to_interactive,
)
from channelkit.presentation.outbound import (
    DeliveryResult,
    FunctionSender,
    PresentationSender,
    SenderRegistry,
    default_registry,
    deliver,
    register_sender,
)
from channelkit.presentation.schema import (
    load_schema,
    parse_delivery,
    parse_presentation,
    parse_reply_payload,
    validate_json,
)

__all__ = [
    "ActionLimits",
    "Block",
    "Button",
    "ButtonsBlock",
    "ContextBlock",
    "Delivery",
    "DeliveryCapabilities",
    "DeliveryPinError",
    "DeliveryResult",
    "DividerBlock",
    "FunctionSender",
    "MessagePresentation",
    "PinRequest",
    "PresentationCapabilities",
    "PresentationError",
    "PresentationLimits",
    "PresentationSender",
    "ReplyPayload",
    "SelectBlock",
    "SelectLimits",
    "SelectOption",
    "SenderRegistry",
    "TextBlock",
    "TextLimits",
    "adapt",
    "button_fallback_label",
    "default_registry",
    "deliver",
    "load_schema",
    "parse_delivery",
    "parse_presentation",
    "parse_reply_payload",
    "presentation_from_interactive",
    "presentation_to_interactive",
    "register_sender",
    "render_fallback_text",
    "validate_json",
]
