"""What a channel can render (`PresentationCapabilities`) and do after sending
(`DeliveryCapabilities`).

Flags default to "supported"; every limit defaults to ``None`` (no limit). A limit, when
given, must be a positive integer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from channelkit.errors import ConfigurationError
from channelkit.presentation.model import TONES, Tone

__all__ = [
    "ActionLimits",
    "DeliveryCapabilities",
    "MarkdownDialect",
    "PresentationCapabilities",
    "PresentationLimits",
    "SelectLimits",
    "TextEncoding",
    "TextLimits",
]

TextEncoding = Literal["characters", "utf8-bytes", "utf16-units"]
MarkdownDialect = Literal["plain", "markdown", "html", "slack-mrkdwn", "discord-markdown"]
TEXT_ENCODINGS: tuple[TextEncoding, ...] = ("characters", "utf8-bytes", "utf16-units")
MARKDOWN_DIALECTS: tuple[MarkdownDialect, ...] = (
    "plain",
    "markdown",
    "html",
    "slack-mrkdwn",
    "discord-markdown",
)


def _check_limits(obj: object, prefix: str, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(obj, name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(
                f"must be a positive integer or None, got {value!r}", f"{prefix}.{name}"
            )


def _check_flags(obj: object, prefix: str, names: tuple[str, ...]) -> None:
    for name in names:
        if not isinstance(getattr(obj, name), bool):
            raise ConfigurationError("must be a boolean", f"{prefix}.{name}" if prefix else name)


@dataclass(frozen=True)
class ActionLimits:
    """Limits for buttons (and, for the shared budget, selects).

    ``max_actions`` and ``max_rows`` form one budget shared by every buttons and select
    block (a select takes one action and one row). ``max_value_bytes`` counts UTF-8
    bytes of a callback value or command; ``max_command_bytes``, when given, is the
    tighter budget of a command (a platform that prefixes commands on the wire, like
    Telegram's ``tgcmd:``, declares its callback limit minus the prefix). Styles are kept
    unless ``supports_styles`` is False; disabled buttons are kept only if
    ``supports_disabled`` is True. ``link_schemes`` lists the URL schemes a link button
    may use (lowercase, without ``:``); ``http`` and ``https`` always, plus a platform's
    own documented schemes (Telegram ``tg``). Any other link (``javascript:``,
    ``data:``, relative, ``mailto:``...) never becomes a link: see
    `is_safe_link()`.
    """

    max_actions: int | None = None
    max_actions_per_row: int | None = None
    max_rows: int | None = None
    max_label_length: int | None = None
    max_value_bytes: int | None = None
    supports_styles: bool = True
    supports_disabled: bool = False
    supports_layout_hints: bool = False
    max_command_bytes: int | None = None
    link_schemes: tuple[str, ...] = ("https", "http")

    def __post_init__(self) -> None:
        _check_limits(
            self,
            "limits.actions",
            (
                "max_actions",
                "max_actions_per_row",
                "max_rows",
                "max_label_length",
                "max_value_bytes",
                "max_command_bytes",
            ),
        )
        raw_schemes: object = self.link_schemes
        if isinstance(raw_schemes, list):
            object.__setattr__(self, "link_schemes", tuple(raw_schemes))
        if not isinstance(self.link_schemes, tuple) or not all(
            isinstance(s, str) and s and s == s.lower() and ":" not in s for s in self.link_schemes
        ):
            raise ConfigurationError(
                "must be lowercase scheme names without ':'", "limits.actions.link_schemes"
            )
        _check_flags(
            self,
            "limits.actions",
            ("supports_styles", "supports_disabled", "supports_layout_hints"),
        )


@dataclass(frozen=True)
class SelectLimits:
    """Limits for select menus: options kept, label (and placeholder) length in code
    points, option value size in UTF-8 bytes."""

    max_options: int | None = None
    max_label_length: int | None = None
    max_value_bytes: int | None = None

    def __post_init__(self) -> None:
        _check_limits(
            self, "limits.selects", ("max_options", "max_label_length", "max_value_bytes")
        )


@dataclass(frozen=True)
class TextLimits:
    """Limit for the title and each text/context block, measured in ``encoding``:
    ``characters`` (code points), ``utf8-bytes`` or ``utf16-units``.

    ``max_message_length`` is how much text one text/context block may carry in all:
    a longer block is split into several blocks of at most ``max_length`` (rendered as
    several sections/elements) instead of being cut at ``max_length``; only text past
    ``max_message_length`` is cut. None means ``max_length`` (cut at one block's limit).
    ``markdown_dialect`` and ``supports_edit`` are advisory."""

    max_length: int | None = None
    encoding: TextEncoding = "characters"
    markdown_dialect: MarkdownDialect = "plain"
    supports_edit: bool = False
    max_message_length: int | None = None

    def __post_init__(self) -> None:
        _check_limits(self, "limits.text", ("max_length", "max_message_length"))
        if self.encoding not in TEXT_ENCODINGS:
            raise ConfigurationError(
                f"must be one of {', '.join(TEXT_ENCODINGS)}", "limits.text.encoding"
            )
        if self.markdown_dialect not in MARKDOWN_DIALECTS:
            raise ConfigurationError(
                f"must be one of {', '.join(MARKDOWN_DIALECTS)}", "limits.text.markdown_dialect"
            )
        _check_flags(self, "limits.text", ("supports_edit",))


@dataclass(frozen=True)
class PresentationLimits:
    """Grouped limits: ``actions``, ``selects`` and ``text`` (None means no limits)."""

    actions: ActionLimits = field(default_factory=ActionLimits)
    selects: SelectLimits = field(default_factory=SelectLimits)
    text: TextLimits = field(default_factory=TextLimits)

    def __post_init__(self) -> None:
        for name, cls in (
            ("actions", ActionLimits),
            ("selects", SelectLimits),
            ("text", TextLimits),
        ):
            value: object = getattr(self, name)
            if value is None:
                object.__setattr__(self, name, cls())
            elif not isinstance(value, cls):
                raise ConfigurationError(f"must be a {cls.__name__} or None", f"limits.{name}")


@dataclass(frozen=True, init=False)
class PresentationCapabilities:
    """What a channel renders natively.

    ``supported=False`` means the channel has no renderer: the pipeline sends the text
    fallback. A flag set to False degrades that block kind (buttons/selects become
    readable lists right after their block, context becomes text, dividers are
    dropped). ``tones``, when given, lists the tones the channel shows; any other tone is
    dropped. ``limits=None`` means no limits (the same as ``PresentationLimits()``).
    """

    supported: bool = True
    buttons: bool = True
    selects: bool = True
    context: bool = True
    divider: bool = True
    tones: tuple[Tone, ...] | None = None
    limits: PresentationLimits = field(default_factory=PresentationLimits)

    def __init__(
        self,
        supported: bool = True,
        buttons: bool = True,
        selects: bool = True,
        context: bool = True,
        divider: bool = True,
        tones: tuple[Tone, ...] | None = None,
        limits: PresentationLimits | None = None,
    ) -> None:
        set_field = object.__setattr__
        set_field(self, "supported", supported)
        set_field(self, "buttons", buttons)
        set_field(self, "selects", selects)
        set_field(self, "context", context)
        set_field(self, "divider", divider)
        set_field(self, "tones", tones)
        set_field(self, "limits", PresentationLimits() if limits is None else limits)
        self.__post_init__()

    def __post_init__(self) -> None:
        _check_flags(self, "", ("supported", "buttons", "selects", "context", "divider"))
        raw_limits: object = self.limits
        if not isinstance(raw_limits, PresentationLimits):
            raise ConfigurationError("must be a PresentationLimits or None", "limits")
        if self.tones is not None:
            raw_tones: object = self.tones
            if isinstance(raw_tones, list):
                object.__setattr__(self, "tones", tuple(raw_tones))
            for tone in self.tones or ():
                if tone not in TONES:
                    raise ConfigurationError(f"unknown tone {tone!r}", "tones")


@dataclass(frozen=True)
class DeliveryCapabilities:
    """What a channel can do with a delivered message: ``pin`` it, and whether its pin
    call can notify members (``pin_notify``: Telegram's ``disable_notification``). Where
    ``pin_notify`` is False a `PinRequest`'s
    ``notify`` is ignored (logged at debug level): the platform has no such switch.
    ``unpin`` and ``list_pins``: the sender also has ``unpin(target, message_id)`` and
    ``pins(target)`` (the ids of the chat's pinned messages)."""

    pin: bool = False
    pin_notify: bool = False
    unpin: bool = False
    list_pins: bool = False

    def __post_init__(self) -> None:
        _check_flags(self, "", ("pin", "pin_notify", "unpin", "list_pins"))
