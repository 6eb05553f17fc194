"""Field checks shared by the presentation model's constructors and ``from_dict``.

Each raises `PresentationError` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from channelkit.errors import PresentationError

__all__ = [
    "check_bool",
    "check_encodable",
    "check_fields",
    "optional_text",
    "present_text",
    "require_text",
]


def check_encodable(value: str, path: str) -> None:
    """Reject a lone UTF-16 surrogate (``"\\ud83d"`` in JSON decodes to one): no platform
    can encode it, and it would fail later as a UnicodeEncodeError deep in a renderer."""
    if value.isascii():
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise PresentationError(
            f"contains a lone surrogate (U+{ord(value[exc.start]):04X}) at index {exc.start}; "
            "send text as valid Unicode",
            path,
        ) from None


def require_text(value: object, path: str) -> None:
    if not isinstance(value, str):
        raise PresentationError(f"must be a string, got {type(value).__name__}", path)
    if not value.strip():
        raise PresentationError("must not be empty or whitespace-only", path)
    check_encodable(value, path)


def optional_text(value: object, path: str) -> str | None:
    """Trim an optional string; empty becomes None; a non-string is an error."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise PresentationError(f"must be a string, got {type(value).__name__}", path)
    check_encodable(value, path)
    value = value.strip()
    return value or None


def check_bool(value: object, path: str) -> None:
    if not isinstance(value, bool):
        raise PresentationError(f"must be a boolean, got {type(value).__name__}", path)


def check_fields(data: Mapping[str, Any], allowed: frozenset[str]) -> None:
    """Reject unknown and null fields, as the JSON Schema does."""
    for key, value in data.items():
        if key not in allowed:
            raise PresentationError(f"unknown field {key!r}", str(key))
        if value is None:
            raise PresentationError("must not be null", key)


def present_text(data: Mapping[str, Any], *keys: str) -> str | None:
    """The first of ``keys`` present, trimmed; a present value must be non-blank text."""
    for key in keys:
        if key in data and data[key] is not None:
            require_text(data[key], key)
            return cast(str, data[key]).strip()
    return None
