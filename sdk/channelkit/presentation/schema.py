"""JSON Schema validation for presentation, delivery and reply payload input.

The schema ships as ``channelkit/presentation/schema.json`` (Draft 2020-12). Input from
agents and the CLI is validated against it first (strict: unknown keys and block types
are rejected), then normalized into the dataclasses. jsonschema is imported on the first
validation, not with this module.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from importlib import resources
from typing import TYPE_CHECKING, Any

from channelkit.errors import PresentationError
from channelkit.presentation.model import Delivery, MessagePresentation, ReplyPayload

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

__all__ = [
    "load_schema",
    "parse_delivery",
    "parse_presentation",
    "parse_reply_payload",
    "validate_json",
]

_lock = threading.Lock()
_schema: dict[str, Any] | None = None
_validators: dict[str, Any] = {}


def load_schema() -> dict[str, Any]:
    """The shipped JSON Schema document (a fresh copy)."""
    global _schema
    with _lock:
        if _schema is None:
            text = (
                resources.files("channelkit.presentation")
                .joinpath("schema.json")
                .read_text(encoding="utf-8")
            )
            _schema = json.loads(text)
        copy: dict[str, Any] = json.loads(json.dumps(_schema))
        return copy


def _validator(definition: str) -> Any:
    with _lock:
        cached = _validators.get(definition)
    if cached is not None:
        return cached
    schema = load_schema()
    schema["$ref"] = f"#/$defs/{definition}"
    import jsonschema

    cls = jsonschema.validators.validator_for(schema)
    validator = cls(schema, format_checker=None)
    with _lock:
        _validators[definition] = validator
    return validator


def _path(parts: Iterable[Any]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _emptiness(error: ValidationError) -> str | None:
    """For the "needs some content" rule of a presentation or reply payload (its
    top-level ``if``/``then``), the field ``from_dict`` names (``blocks`` or ``text``);
    None for any other error (block-level rules sit under ``allOf``)."""
    schema_path = list(error.relative_schema_path)
    if "then" not in schema_path:
        return None
    index = len(schema_path) - 1 - schema_path[::-1].index("then")
    if index > 0 and schema_path[index - 1] != "presentation":
        return None
    rest = schema_path[index + 1 :]
    if rest[:1] == ["required"]:
        missing: Any = error.validator_value
        field = missing[0] if missing else None
    elif rest[:1] == ["properties"] and len(rest) > 1:
        field = rest[1]
    else:
        return None
    return field if field in ("blocks", "text") else None


def _message(error: ValidationError) -> tuple[str, str]:
    """A readable message and the path of the field it is about."""
    path = list(error.absolute_path)
    empty = _emptiness(error)
    if empty is not None:
        where = _path(path if path[-1:] == [empty] else [*path, empty])
        if empty == "blocks":
            return "a presentation needs a title or at least one block", where
        return "a reply needs text or a presentation", where
    validator: Any = error.validator
    instance: Any = error.instance
    expected: Any = error.validator_value
    schema: Any = error.schema
    if validator == "additionalProperties":
        extra = [k for k in instance if k not in (schema.get("properties") or {})]
        if extra:
            return f"unknown field {extra[0]!r}", _path([*path, extra[0]])
    if validator == "enum" and path and path[-1] == "type":
        choices = ", ".join(expected)
        return f"unknown block type {instance!r}; expected one of {choices}", _path(path)
    if validator == "enum":
        return (
            f"must be one of {', '.join(map(str, expected))}; got {instance!r}",
            _path(path),
        )
    if validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else ""
        return "is required", _path([*path, missing] if missing else path)
    if validator == "anyOf" and isinstance(instance, dict) and "label" in instance:
        return "a button needs a value, url or command", _path([*path, "value"])
    if validator in ("pattern", "minLength"):
        return "must not be empty or whitespace-only", _path(path)
    if validator == "type":
        return f"must be of type {expected}", _path(path)
    return error.message, _path(path)


def validate_json(data: Any, definition: str = "replyPayload") -> None:
    """Validate ``data`` against ``#/$defs/<definition>``; raise PresentationError on the
    first (deepest) problem, naming its path."""
    validator = _validator(definition)
    errors = list(validator.iter_errors(data))
    if not errors:
        return
    # A missing-content error is reported only when nothing more specific is wrong.
    errors = [e for e in errors if _emptiness(e) is None] or errors
    import jsonschema

    error = jsonschema.exceptions.best_match(errors)
    # Prefer the most specific cause inside allOf/if-then branches.
    while error.context and error.validator != "anyOf":
        error = jsonschema.exceptions.best_match(error.context)
    message, path = _message(error)
    raise PresentationError(message, path or None)


def parse_presentation(data: Any) -> MessagePresentation:
    """Schema-validate then normalize a presentation from agent/CLI JSON."""
    validate_json(data, "presentation")
    return MessagePresentation.from_dict(data)


def parse_delivery(data: Any) -> Delivery:
    """Schema-validate then parse delivery metadata."""
    validate_json(data, "delivery")
    return Delivery.from_dict(data)


def parse_reply_payload(data: Any) -> ReplyPayload:
    """Schema-validate then parse a reply payload (text, presentation, delivery)."""
    validate_json(data, "replyPayload")
    return ReplyPayload.from_dict(data)
