"""The semantic presentation model: blocks, buttons, selects, reply payload, delivery.

Every type is a frozen dataclass validated on construction. ``from_dict`` normalizes
loose JSON (trims strings, lowercases block types/tones/styles, drops empty blocks,
fills option values, accepts a few legacy aliases) and raises
`PresentationError` naming the bad field, e.g.
``blocks[2].buttons[0].label``. ``to_dict`` gives the canonical JSON shape described by
the package's JSON Schema (``schema.json``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeAlias, cast

from channelkit.errors import PresentationError
from channelkit.presentation._fields import (
    check_bool as _check_bool,
)
from channelkit.presentation._fields import (
    check_encodable as _check_encodable,
)
from channelkit.presentation._fields import (
    check_fields as _check_fields,
)
from channelkit.presentation._fields import (
    optional_text as _optional_text,
)
from channelkit.presentation._fields import (
    present_text as _present_text,
)
from channelkit.presentation._fields import (
    require_text as _require_text,
)

__all__ = [
    "BLOCK_TYPES",
    "BUTTON_STYLES",
    "TONES",
    "Block",
    "Button",
    "ButtonStyle",
    "ButtonsBlock",
    "ContextBlock",
    "Delivery",
    "DividerBlock",
    "MessagePresentation",
    "PinRequest",
    "ReplyPayload",
    "SelectBlock",
    "SelectOption",
    "TextBlock",
    "Tone",
    "block_from_dict",
    "presentation_from_interactive",
    "presentation_to_interactive",
]

Tone = Literal["neutral", "info", "success", "warning", "danger"]
ButtonStyle = Literal["primary", "secondary", "success", "danger"]

TONES: tuple[Tone, ...] = ("neutral", "info", "success", "warning", "danger")
BUTTON_STYLES: tuple[ButtonStyle, ...] = ("primary", "secondary", "success", "danger")
BLOCK_TYPES: tuple[str, ...] = ("text", "context", "divider", "buttons", "select")


# --------------------------------------------------------------------------- helpers


def _check_choice(value: object, choices: Sequence[str], path: str) -> None:
    if value is not None and value not in choices:
        raise PresentationError(f"must be one of {', '.join(choices)}; got {value!r}", path)


def _lower_choice(value: object, choices: Sequence[str], path: str) -> str | None:
    text = _optional_text(value, path)
    if text is None:
        return None
    text = text.lower()
    _check_choice(text, choices, path)
    return text


def _as_mapping(value: object, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise PresentationError(f"must be an object, got {type(value).__name__}", path)
    return cast(Mapping[str, Any], value)


def _as_list(value: object, path: str) -> Sequence[Any]:
    if not isinstance(value, list | tuple):
        raise PresentationError(f"must be an array, got {type(value).__name__}", path)
    return value


_BUTTON_FIELDS = frozenset(
    {"label", "text", "value", "callback_data", "callbackData", "url", "command", "action"}
    | {"style", "priority", "disabled"}
)
_OPTION_FIELDS = frozenset({"label", "text", "value", "action"})
_BLOCK_FIELDS = {
    "text": frozenset({"type", "text", "continuation"}),
    "context": frozenset({"type", "text", "continuation"}),
    "divider": frozenset({"type"}),
    "buttons": frozenset({"type", "buttons"}),
    "select": frozenset({"type", "options", "placeholder"}),
}


def _first_present(data: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if data.get(key) is not None:
            return data[key]
    return None


# --------------------------------------------------------------------------- blocks


@dataclass(frozen=True)
class TextBlock:
    """A paragraph of body text (``{"type": "text", "text": ...}``).

    ``continuation`` is set by `adapt()` on the second and
    later fragments of a long text block or a generated fallback list that had to be
    split to fit a text limit; the text fallback joins such a fragment to the previous
    one directly.
    """

    text: str
    continuation: bool = False
    type: ClassVar[Literal["text"]] = "text"

    def __post_init__(self) -> None:
        _require_text(self.text, "text")
        _check_bool(self.continuation, "continuation")

    def to_dict(self) -> dict[str, Any]:
        """Canonical JSON form."""
        out: dict[str, Any] = {"type": "text", "text": self.text}
        if self.continuation:
            out["continuation"] = True
        return out


@dataclass(frozen=True)
class ContextBlock:
    """Secondary, muted text (``{"type": "context", "text": ...}``)."""

    text: str
    continuation: bool = False
    type: ClassVar[Literal["context"]] = "context"

    def __post_init__(self) -> None:
        _require_text(self.text, "text")
        _check_bool(self.continuation, "continuation")

    def to_dict(self) -> dict[str, Any]:
        """Canonical JSON form."""
        out: dict[str, Any] = {"type": "context", "text": self.text}
        if self.continuation:
            out["continuation"] = True
        return out


@dataclass(frozen=True)
class DividerBlock:
    """A visual separator (``{"type": "divider"}``)."""

    type: ClassVar[Literal["divider"]] = "divider"

    def to_dict(self) -> dict[str, Any]:
        """Canonical JSON form."""
        return {"type": "divider"}


@dataclass(frozen=True)
class Button:
    """A button: a ``label`` plus at least one target.

    Targets: ``value`` (an opaque callback value returned to the bot), ``url`` (a link
    button) or ``command`` (a slash command run through the channel's command path).
    ``priority`` (higher first) decides which buttons survive when a channel's action
    budget is short; ``disabled`` renders a greyed-out button where supported.
    The label is stored trimmed.
    """

    label: str
    value: str | None = None
    url: str | None = None
    command: str | None = None
    style: ButtonStyle | None = None
    priority: float | None = None
    disabled: bool = False

    def __post_init__(self) -> None:
        _require_text(self.label, "label")
        stripped = self.label.strip()
        if stripped != self.label:
            object.__setattr__(self, "label", stripped)
        for name in ("value", "url", "command"):
            target = getattr(self, name)
            if target is not None:
                _require_text(target, name)
        if self.value is None and self.url is None and self.command is None:
            raise PresentationError("a button needs a value, url or command", "value")
        _check_choice(self.style, BUTTON_STYLES, "style")
        if self.priority is not None and (
            isinstance(self.priority, bool)
            or not isinstance(self.priority, int | float)
            or not math.isfinite(self.priority)
        ):
            raise PresentationError("must be a finite number", "priority")
        _check_bool(self.disabled, "disabled")

    def to_dict(self) -> dict[str, Any]:
        """Canonical JSON form (absent fields omitted)."""
        out: dict[str, Any] = {"label": self.label}
        if self.value is not None:
            out["value"] = self.value
        if self.url is not None:
            out["url"] = self.url
        if self.command is not None:
            out["command"] = self.command
        if self.style is not None:
            out["style"] = self.style
        if self.priority is not None:
            out["priority"] = self.priority
        if self.disabled:
            out["disabled"] = True
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, strict: bool = True) -> Button:
        """Normalize a JSON button (aliases: ``text`` for label, ``callback_data``/
        ``callbackData`` for value, ``action: {type, command|value}``). ``strict``
        (default) rejects unknown and null fields and blank targets, as the JSON Schema
        does; the legacy ``interactive`` input is read with ``strict=False``."""
        data = _as_mapping(data, "")
        if strict:
            _check_fields(data, _BUTTON_FIELDS)
        label = _optional_text(_first_present(data, "label", "text"), "label")
        if label is None:
            raise PresentationError("a button needs a non-empty label", "label")
        if strict:
            value = _present_text(data, "value", "callback_data", "callbackData")
            command = _present_text(data, "command")
            url = _present_text(data, "url")
        else:
            value = _optional_text(
                _first_present(data, "value", "callback_data", "callbackData"), "value"
            )
            command = _optional_text(data.get("command"), "command")
            url = _optional_text(data.get("url"), "url")
        action = data.get("action")
        if action is not None:
            kind, action_value = _parse_action(action, "action")
            if kind == "command" and command is None:
                command = action_value
            elif kind == "callback" and value is None:
                value = action_value
        if value is None and url is None and command is None:
            raise PresentationError("a button needs a value, url or command", "value")
        style = _lower_choice(data.get("style"), BUTTON_STYLES, "style")
        priority = data.get("priority")
        disabled = data.get("disabled", False)
        if disabled is None:
            disabled = False
        return cls(
            label=label,
            value=value,
            url=url,
            command=command,
            style=cast("ButtonStyle | None", style),
            priority=priority,
            disabled=disabled,
        )


def _parse_action(data: object, path: str) -> tuple[str, str]:
    action = _as_mapping(data, path)
    kind = _lower_choice(action.get("type"), ("command", "callback"), f"{path}.type")
    if kind is None:
        raise PresentationError("must be 'command' or 'callback'", f"{path}.type")
    key = "command" if kind == "command" else "value"
    target = _optional_text(action.get(key), f"{path}.{key}")
    if target is None:
        raise PresentationError("must be a non-empty string", f"{path}.{key}")
    return kind, target


@dataclass(frozen=True)
class SelectOption:
    """One option of a select menu. ``value`` defaults to the label."""

    label: str
    value: str | None = None

    def __post_init__(self) -> None:
        _require_text(self.label, "label")
        stripped = self.label.strip()
        if stripped != self.label:
            object.__setattr__(self, "label", stripped)
        if self.value is None:
            object.__setattr__(self, "value", self.label)
        else:
            _require_text(self.value, "value")

    @property
    def option_value(self) -> str:
        """The (always filled) value."""
        return cast(str, self.value)

    def to_dict(self) -> dict[str, Any]:
        """Canonical JSON form."""
        return {"label": self.label, "value": self.value}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, strict: bool = True) -> SelectOption:
        """Normalize a JSON option (``text`` alias for label, ``action`` for value)."""
        data = _as_mapping(data, "")
        if strict:
            _check_fields(data, _OPTION_FIELDS)
        label = _optional_text(_first_present(data, "label", "text"), "label")
        if label is None:
            raise PresentationError("an option needs a non-empty label", "label")
        if strict:
            value = _present_text(data, "value")
        else:
            value = _optional_text(data.get("value"), "value")
        if value is None and data.get("action") is not None:
            value = _parse_action(data["action"], "action")[1]
        return cls(label=label, value=value)


@dataclass(frozen=True)
class ButtonsBlock:
    """A row (or group) of buttons; at least one."""

    buttons: tuple[Button, ...]
    type: ClassVar[Literal["buttons"]] = "buttons"

    def __post_init__(self) -> None:
        raw_buttons: object = self.buttons
        if isinstance(raw_buttons, list):
            object.__setattr__(self, "buttons", tuple(raw_buttons))
        if not isinstance(self.buttons, tuple) or not self.buttons:
            raise PresentationError("must hold at least one button", "buttons")
        for index, button in enumerate(self.buttons):
            if not isinstance(button, Button):
                raise PresentationError("must be a Button", f"buttons[{index}]")

    def to_dict(self) -> dict[str, Any]:
        """Canonical JSON form."""
        return {"type": "buttons", "buttons": [b.to_dict() for b in self.buttons]}


@dataclass(frozen=True)
class SelectBlock:
    """A single-choice select menu; at least one option."""

    options: tuple[SelectOption, ...]
    placeholder: str | None = None
    type: ClassVar[Literal["select"]] = "select"

    def __post_init__(self) -> None:
        raw_options: object = self.options
        if isinstance(raw_options, list):
            object.__setattr__(self, "options", tuple(raw_options))
        if not isinstance(self.options, tuple) or not self.options:
            raise PresentationError("must hold at least one option", "options")
        for index, option in enumerate(self.options):
            if not isinstance(option, SelectOption):
                raise PresentationError("must be a SelectOption", f"options[{index}]")
        if self.placeholder is not None:
            placeholder = _optional_text(self.placeholder, "placeholder")
            if placeholder != self.placeholder:
                object.__setattr__(self, "placeholder", placeholder)

    def to_dict(self) -> dict[str, Any]:
        """Canonical JSON form."""
        out: dict[str, Any] = {"type": "select"}
        if self.placeholder is not None:
            out["placeholder"] = self.placeholder
        out["options"] = [o.to_dict() for o in self.options]
        return out


Block: TypeAlias = TextBlock | ContextBlock | DividerBlock | ButtonsBlock | SelectBlock
_BLOCK_CLASSES = (TextBlock, ContextBlock, DividerBlock, ButtonsBlock, SelectBlock)


def block_from_dict(
    data: Mapping[str, Any], *, allowed: Sequence[str] = BLOCK_TYPES, strict: bool = True
) -> Block | None:
    """Normalize one JSON block. Returns None for an empty block (whitespace-only text,
    a buttons block with no buttons, a select with no options), which callers drop."""
    data = _as_mapping(data, "")
    raw_type = data.get("type")
    if not isinstance(raw_type, str) or not raw_type.strip():
        raise PresentationError(f"must be one of {', '.join(allowed)}", "type")
    kind = raw_type.strip().lower()
    if kind not in allowed:
        raise PresentationError(
            f"unknown block type {raw_type!r}; expected one of {', '.join(allowed)}", "type"
        )
    if strict:
        _check_fields(data, _BLOCK_FIELDS[kind])
        if kind in ("text", "context") and "text" not in data:
            raise PresentationError("is required", "text")
        if kind == "buttons" and "buttons" not in data:
            raise PresentationError("is required", "buttons")
        if kind == "select" and "options" not in data:
            raise PresentationError("is required", "options")
    if kind in ("text", "context"):
        if strict:
            _check_bool(data.get("continuation", False), "continuation")
        text = _optional_text(data.get("text"), "text")
        if text is None:
            return None
        continuation = data.get("continuation", False) is True
        if kind == "text":
            return TextBlock(text, continuation=continuation)
        return ContextBlock(text, continuation=continuation)
    if kind == "divider":
        return DividerBlock()
    if kind == "buttons":
        raw_buttons = data.get("buttons")
        buttons: list[Button] = []
        for index, raw in enumerate(
            _as_list(raw_buttons if raw_buttons is not None else [], "buttons")
        ):
            try:
                buttons.append(Button.from_dict(raw, strict=strict))
            except PresentationError as exc:
                raise exc.under(f"buttons[{index}]") from None
        return ButtonsBlock(tuple(buttons)) if buttons else None
    raw_options = data.get("options")
    options: list[SelectOption] = []
    for index, raw in enumerate(
        _as_list(raw_options if raw_options is not None else [], "options")
    ):
        try:
            options.append(SelectOption.from_dict(raw, strict=strict))
        except PresentationError as exc:
            raise exc.under(f"options[{index}]") from None
    if not options:
        return None
    return SelectBlock(
        tuple(options), placeholder=_optional_text(data.get("placeholder"), "placeholder")
    )


# --------------------------------------------------------------------------- presentation


@dataclass(frozen=True)
class MessagePresentation:
    """A semantic message: optional ``title`` and ``tone`` plus ordered ``blocks``.

    A title-only presentation is valid. ``tone`` is a hint (Feishu header colour, Teams
    title colour); the text fallback never shows it.
    """

    title: str | None = None
    tone: Tone | None = None
    blocks: tuple[Block, ...] = ()

    def __post_init__(self) -> None:
        if self.title is not None:
            title = _optional_text(self.title, "title")
            if title != self.title:
                object.__setattr__(self, "title", title)
        _check_choice(self.tone, TONES, "tone")
        raw_blocks: object = self.blocks
        if isinstance(raw_blocks, list):
            object.__setattr__(self, "blocks", tuple(raw_blocks))
        if not isinstance(self.blocks, tuple):
            raise PresentationError("must be a sequence of blocks", "blocks")
        for index, block in enumerate(self.blocks):
            if not isinstance(block, _BLOCK_CLASSES):
                raise PresentationError(
                    f"must be a presentation block, got {type(block).__name__}", f"blocks[{index}]"
                )

    @property
    def is_empty(self) -> bool:
        """True when there is neither a title nor a block."""
        return self.title is None and not self.blocks

    def to_dict(self) -> dict[str, Any]:
        """Canonical JSON form."""
        out: dict[str, Any] = {}
        if self.title is not None:
            out["title"] = self.title
        if self.tone is not None:
            out["tone"] = self.tone
        out["blocks"] = [b.to_dict() for b in self.blocks]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MessagePresentation:
        """Normalize JSON into a presentation; raises PresentationError naming the field.

        Empty blocks are dropped; a presentation left with no title and no block is
        rejected.
        """
        data = _as_mapping(data, "")
        _check_fields(data, frozenset({"title", "tone", "blocks"}))
        title = _optional_text(data.get("title"), "title")
        tone = _lower_choice(data.get("tone"), TONES, "tone")
        raw_blocks = data.get("blocks")
        blocks: list[Block] = []
        for index, raw in enumerate(
            _as_list(raw_blocks if raw_blocks is not None else [], "blocks")
        ):
            try:
                block = block_from_dict(raw)
            except PresentationError as exc:
                raise exc.under(f"blocks[{index}]") from None
            if block is not None:
                blocks.append(block)
        if title is None and not blocks:
            raise PresentationError("a presentation needs a title or at least one block", "blocks")
        return cls(title=title, tone=cast("Tone | None", tone), blocks=tuple(blocks))


# --------------------------------------------------------------------------- delivery


@dataclass(frozen=True)
class PinRequest:
    """Pin the first delivered message. ``notify`` asks the platform to notify members
    (default off); ``required`` turns an unsupported or failed pin into an error raised
    after the message was sent (default: a logged warning)."""

    enabled: bool = True
    notify: bool = False
    required: bool = False

    def __post_init__(self) -> None:
        _check_bool(self.enabled, "enabled")
        _check_bool(self.notify, "notify")
        _check_bool(self.required, "required")

    def to_dict(self) -> dict[str, Any]:
        """Canonical JSON form."""
        return {"enabled": self.enabled, "notify": self.notify, "required": self.required}


@dataclass(frozen=True)
class Delivery:
    """Delivery metadata, separate from presentation: ``pin`` is ``True``/``False`` or a
    `PinRequest`."""

    pin: bool | PinRequest = False

    def __post_init__(self) -> None:
        if not isinstance(self.pin, bool | PinRequest):
            raise PresentationError("must be a boolean or a PinRequest", "pin")

    @property
    def pin_request(self) -> PinRequest | None:
        """The effective pin request, or None when no pin is wanted."""
        if self.pin is True:
            return PinRequest()
        if isinstance(self.pin, PinRequest) and self.pin.enabled:
            return self.pin
        return None

    def to_dict(self) -> dict[str, Any]:
        """Canonical JSON form."""
        if isinstance(self.pin, PinRequest):
            return {"pin": self.pin.to_dict()}
        return {"pin": self.pin} if self.pin else {}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Delivery:
        """Parse ``{"pin": bool | {"enabled", "notify"?, "required"?}}``."""
        data = _as_mapping(data, "")
        _check_fields(data, frozenset({"pin"}))
        pin = data.get("pin", False)
        if isinstance(pin, bool):
            return cls(pin=pin)
        raw = _as_mapping(pin, "pin")
        try:
            _check_fields(raw, frozenset({"enabled", "notify", "required"}))
        except PresentationError as exc:
            raise exc.under("pin") from None
        values: dict[str, bool] = {}
        for key, default in (("enabled", None), ("notify", False), ("required", False)):
            value = raw.get(key, default)
            if value is None:
                raise PresentationError("is required", f"pin.{key}")
            _check_bool(value, f"pin.{key}")
            values[key] = value
        return cls(pin=PinRequest(**values))


# --------------------------------------------------------------------------- reply payload


@dataclass(frozen=True)
class ReplyPayload:
    """What a reply carries: plain ``text``, a semantic ``presentation`` and ``delivery``
    metadata. At least one of text and presentation is required.

    ``allow_mass_mentions`` (default False) lets this one message notify a whole
    channel or group: Slack ``<!channel>``/``<!here>``/``<!everyone>``/``<!subteam^…>``,
    Discord ``@everyone``/``@here`` and role mentions, Mattermost ``@channel``/``@all``/
    ``@here``. Without it, renderers neutralise those mentions (docs/presentation.md).
    """

    text: str | None = None
    presentation: MessagePresentation | None = None
    delivery: Delivery | None = None
    allow_mass_mentions: bool = False

    def __post_init__(self) -> None:
        if self.text is not None and not isinstance(self.text, str):
            raise PresentationError(f"must be a string, got {type(self.text).__name__}", "text")
        if self.text is not None:
            _check_encodable(self.text, "text")
        if self.presentation is not None and not isinstance(self.presentation, MessagePresentation):
            raise PresentationError("must be a MessagePresentation", "presentation")
        if self.delivery is not None and not isinstance(self.delivery, Delivery):
            raise PresentationError("must be a Delivery", "delivery")
        _check_bool(self.allow_mass_mentions, "allow_mass_mentions")
        has_text = bool(self.text and self.text.strip())
        if not has_text and (self.presentation is None or self.presentation.is_empty):
            raise PresentationError("a reply needs text or a presentation", "text")

    def to_dict(self) -> dict[str, Any]:
        """Canonical JSON form."""
        out: dict[str, Any] = {}
        if self.text is not None:
            out["text"] = self.text
        if self.presentation is not None:
            out["presentation"] = self.presentation.to_dict()
        if self.delivery is not None:
            out["delivery"] = self.delivery.to_dict()
        if self.allow_mass_mentions:
            out["allow_mass_mentions"] = True
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReplyPayload:
        """Parse a reply payload. A legacy ``interactive`` object maps into presentation
        (its blocks are appended after any ``presentation`` blocks) and warns once per
        process with a `DeprecationWarning`."""
        data = _as_mapping(data, "")
        _check_fields(
            data,
            frozenset({"text", "presentation", "delivery", "interactive", "allow_mass_mentions"}),
        )
        text = data.get("text")
        if text is not None and not isinstance(text, str):
            raise PresentationError(f"must be a string, got {type(text).__name__}", "text")
        presentation: MessagePresentation | None = None
        if data.get("presentation") is not None:
            try:
                presentation = MessagePresentation.from_dict(data["presentation"])
            except PresentationError as exc:
                raise exc.under("presentation") from None
        if data.get("interactive") is not None:
            _warn_interactive()
            legacy = presentation_from_interactive(data["interactive"])
            if legacy is not None:
                if presentation is None:
                    presentation = legacy
                else:
                    presentation = MessagePresentation(
                        title=presentation.title,
                        tone=presentation.tone,
                        blocks=presentation.blocks + legacy.blocks,
                    )
        delivery: Delivery | None = None
        if data.get("delivery") is not None:
            try:
                delivery = Delivery.from_dict(data["delivery"])
            except PresentationError as exc:
                raise exc.under("delivery") from None
        allow = data.get("allow_mass_mentions", False)
        _check_bool(allow, "allow_mass_mentions")
        return cls(
            text=text, presentation=presentation, delivery=delivery, allow_mass_mentions=allow
        )


_interactive_warned = False


def _warn_interactive() -> None:
    """Warn about the legacy ``interactive`` input once per process."""
    global _interactive_warned
    if _interactive_warned:
        return
    _interactive_warned = True
    warnings.warn(
        "the 'interactive' reply field is deprecated; send 'presentation' instead "
        "(docs/presentation.md)",
        DeprecationWarning,
        stacklevel=3,
    )


# --------------------------------------------------------------------------- legacy interactive

_INTERACTIVE_TYPES = ("text", "buttons", "select")


def presentation_from_interactive(data: Mapping[str, Any]) -> MessagePresentation | None:
    """Map the deprecated ``interactive`` shape (``{"blocks": [text|buttons|select]}``)
    into a presentation; None when it holds no block."""
    data = _as_mapping(data, "interactive")
    raw_blocks = data.get("blocks")
    blocks: list[Block] = []
    for index, raw in enumerate(
        _as_list(raw_blocks if raw_blocks is not None else [], "interactive.blocks")
    ):
        try:
            block = block_from_dict(raw, allowed=_INTERACTIVE_TYPES, strict=False)
        except PresentationError as exc:
            raise exc.under(f"interactive.blocks[{index}]") from None
        if block is not None:
            blocks.append(block)
    return MessagePresentation(blocks=tuple(blocks)) if blocks else None


def presentation_to_interactive(presentation: MessagePresentation) -> dict[str, Any] | None:
    """The legacy ``interactive`` view of a presentation, for old consumers: the title
    and context become text blocks, dividers are dropped, command buttons also carry
    the legacy typed ``action``. None when nothing remains.

    ``presentation_from_interactive(presentation_to_interactive(p))`` keeps every
    button's value, link and command."""
    blocks: list[dict[str, Any]] = []
    if presentation.title:
        blocks.append({"type": "text", "text": presentation.title})
    for block in presentation.blocks:
        if isinstance(block, TextBlock | ContextBlock):
            blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ButtonsBlock):
            blocks.append(
                {"type": "buttons", "buttons": [_legacy_button(b) for b in block.buttons]}
            )
        elif isinstance(block, SelectBlock):
            blocks.append(block.to_dict())
    return {"blocks": blocks} if blocks else None


def _legacy_button(button: Button) -> dict[str, Any]:
    """A button in the legacy view: the canonical fields plus, for a command button, the
    typed ``action: {"type": "command", "command": ...}`` that legacy consumers read (a
    consumer that only knows ``value``/``action`` still gets the command, not nothing)."""
    out = button.to_dict()
    if button.command is not None:
        out["action"] = {"type": "command", "command": button.command}
    return out
