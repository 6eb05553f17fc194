"""Typed reading of adapter settings (``from_dict``) with errors that name the path.

The adapter configs are frozen dataclasses validated in ``__post_init__``. These helpers
hold the parts they share: turning a plain mapping (JSON/YAML, camelCase or snake_case
keys) into constructor keyword arguments, the common value checks, and a ``repr`` that
never shows a secret. Every error is a
`ConfigurationError` whose ``path`` names the setting, e.g.
``telegram.question_timeout_s``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from channelkit.errors import ConfigurationError

__all__ = [
    "camel_case",
    "check_http_url",
    "check_non_empty",
    "check_positive_seconds",
    "register_secrets",
    "secret_repr",
    "settings_kwargs",
]


def camel_case(name: str) -> str:
    """``"typing_interval_s"`` -> ``"typingIntervalS"``."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def settings_kwargs(
    cls: type,
    data: object,
    path: str,
    *,
    required: Iterable[str] = (),
    camel: bool = True,
) -> dict[str, Any]:
    """The keyword arguments of dataclass ``cls`` that ``data`` sets.

    Keys are the field names, or (with ``camel``) their camelCase spelling. A non-mapping
    ``data`` (``path``), an unknown key (``path.<key>``) or a missing ``required`` field
    (``path.<field>``) raises `ConfigurationError`. Values are not checked here:
    the dataclass validates them on construction.
    """
    if not isinstance(data, Mapping):
        raise ConfigurationError("must be an object", path=path)
    names = [f.name for f in dataclasses.fields(cls)]
    aliases = {name: name for name in names}
    if camel:
        aliases.update({camel_case(name): name for name in names})
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        name = aliases.get(key) if isinstance(key, str) else None
        if name is None:
            raise ConfigurationError("unknown setting", path=f"{path}.{key}")
        kwargs[name] = value
    for name in required:
        if name not in kwargs:
            raise ConfigurationError("is required", path=f"{path}.{name}")
    return kwargs


def check_positive_seconds(value: object, path: str, *, maximum: float | None = None) -> None:
    """``value`` must be a positive number (not a bool), at most ``maximum``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigurationError("must be a positive number of seconds", path=path)
    if maximum is not None and value > maximum:
        raise ConfigurationError(f"must be at most {maximum:g} seconds", path=path)


def check_http_url(value: object, path: str) -> None:
    """``value`` must be an ``http://`` or ``https://`` URL string."""
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise ConfigurationError("must be an http(s) URL", path=path)


def check_non_empty(value: object, path: str) -> None:
    """``value`` must be a string with a non-blank character."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError("must be a non-empty string", path=path)


def secret_repr(config: Any, secrets: Collection[str]) -> str:
    """``Name(field=value, ...)`` of dataclass instance ``config``, for its ``__repr__``.

    A field named in ``secrets`` shows as ``***`` when set (an empty one shows as is, so
    a missing secret stays visible); a field declared ``repr=False`` is left out.
    """
    shown = []
    for item in dataclasses.fields(config):
        if not item.repr:
            continue
        value = getattr(config, item.name)
        text = "***" if item.name in secrets and value else repr(value)
        shown.append(f"{item.name}={text}")
    return f"{type(config).__name__}({', '.join(shown)})"


#: Shortest configured value `register_secrets()` registers.
MIN_REGISTERED_SECRET = 8


def register_secrets(*values: object) -> None:
    """Register configured secrets (tokens, app secrets, signing secrets) with the
    process-wide redactor, so that no log record and no exception text built from a
    platform's answer (an error body echoing one back) carries them. Non-strings and
    values shorter than 8 characters (no real credential is that short; scrubbing a
    short common word would garble unrelated text) are ignored."""
    from channelkit.http.redact import REDACTOR

    for value in values:
        if isinstance(value, str) and len(value.strip()) >= MIN_REGISTERED_SECRET:
            REDACTOR.add(value)
