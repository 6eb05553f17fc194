"""``channelkit playground --set KEY=VALUE``: the emulated channel's settings by path.

Each ``KEY`` is a dotted path into the channel's entry of the configuration file
(``access.dm``, ``access.allowUsers``, ``access.groupRules.<chat>.requireMention``,
``options.busy``, ``options.collectWindowSeconds``, ``options.locale``; ``locale`` is
short for ``options.locale``); ``VALUE`` is read as JSON when it
parses as JSON, else as a string (``--set access.dm=allowlist --set
'access.allowUsers=["alice"]'``). `parse_settings()` builds the nested settings;
`channel_options()` validates them with the same schema and parsers ``check-config`` uses
and returns the `ChannelConfig` fields they set. Every problem is one
`ConfigurationError` whose path starts with ``--set`` and names the key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from channelkit.errors import ConfigurationError

__all__ = ["SETTABLE", "channel_options", "parse_settings"]

#: ``options`` keys of a channel entry the playground can set -> the ChannelConfig field
_OPTION_FIELDS = {"busy": "busy", "collectWindowSeconds": "collect_window", "locale": "locale"}
#: What ``--set`` can reach (named in its errors).
SETTABLE = ("access.*", *(f"options.{key}" for key in _OPTION_FIELDS), "locale")


def _value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def parse_settings(items: Sequence[str]) -> dict[str, Any]:
    """``["access.dm=allowlist", ...]`` -> ``{"access": {"dm": "allowlist"}}`` (later
    settings of the same key win)."""
    tree: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigurationError(f"must be KEY=VALUE, got {item!r}", path="--set")
        parts = key.split(".")
        if any(not part for part in parts):
            raise ConfigurationError("is not a dotted path", path=f"--set {key}")
        node = tree
        for depth, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                where = ".".join(parts[: depth + 1])
                raise ConfigurationError(f"{where} is set to a value already", f"--set {key}")
            node = child
        node[parts[-1]] = _value(raw)
    return tree


def _schema() -> dict[str, Any]:
    from channelkit.config import config_schema

    channel = config_schema()["properties"]["channels"]["items"]["properties"]
    options = channel["options"].get("properties", {})
    return {
        "type": "object",
        "properties": {
            "access": channel["access"],
            "options": {
                "type": "object",
                "properties": {key: options[key] for key in _OPTION_FIELDS if key in options},
                "additionalProperties": False,
            },
        },
        "additionalProperties": False,
    }


def channel_options(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The `ChannelConfig` fields ``settings`` (from `parse_settings()`) set, validated
    like ``check-config`` validates a channel entry."""
    import jsonschema

    from channelkit.core.access import AccessConfig
    from channelkit.core.catalog import check_locale

    if "locale" in settings:  # ``--set locale=zh-CN``: short for ``options.locale``
        settings = dict(settings)
        locale = settings.pop("locale")
        options = settings.get("options")
        settings["options"] = {
            **(options if isinstance(options, Mapping) else {}),
            "locale": locale,
        }
    for key in settings:
        if key not in ("access", "options"):
            raise ConfigurationError(
                f"is not a setting the playground can change (it can: {', '.join(SETTABLE)})",
                path=f"--set {key}",
            )
    errors = list(jsonschema.Draft202012Validator(_schema()).iter_errors(dict(settings)))
    if errors:
        error = jsonschema.exceptions.best_match(errors)
        parts = [str(p) for p in error.absolute_path]
        message = error.message
        if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
            schema = error.schema
            allowed = schema.get("properties", {}) if isinstance(schema, Mapping) else {}
            extra = [str(k) for k in error.instance if k not in allowed]
            if extra:
                parts.append(extra[0])
                message = "is not a known field"
        raise ConfigurationError(message, path="--set " + ".".join(parts))
    out: dict[str, Any] = {}
    if "access" in settings:
        try:
            out["access"] = AccessConfig.from_mapping(settings["access"])
        except ConfigurationError as exc:
            message = str(exc)
            if exc.path and message.startswith(f"{exc.path}: "):
                message = message[len(exc.path) + 2 :]
            raise ConfigurationError(message, path=f"--set {exc.path}") from None
    for key, value in (settings.get("options") or {}).items():
        if key == "locale":
            value = check_locale(value, "--set locale")
        out[_OPTION_FIELDS[key]] = value
    return out
