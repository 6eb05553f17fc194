"""The deployment configuration: one JSON document validated by a JSON Schema.

::

    {
      "channels": [
        {"platform": "dingtalk",
         "credentials": {"clientId": "ding123", "clientSecret": {"env": "DINGTALK_SECRET"}},
         "options": {"interactiveCards": {"enabled": true}}}
      ],
      "agent": {"type": "acp", "command": ["qwen", "--acp"]},
      "options": {"maxWorkers": 16},
      "server": {"host": "0.0.0.0", "port": 8000}
    }

:func:`load_config` parses and validates (errors are :class:`ConfigurationError` whose
``path`` is the JSON path, e.g. ``channels[0].credentials.clientSecret``), resolves
``{"env": "NAME"}`` secrets and returns a :class:`DeploymentConfig`;
:func:`build_channels` turns it into running channels. docs/configuration.md documents
every field.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from channelkit.agents.base import AgentBridge
from channelkit.errors import ConfigurationError

if TYPE_CHECKING:
    import jsonschema

__all__ = [
    "CONFIG_SCHEMA",
    "DeploymentConfig",
    "build_agent",
    "build_channels",
    "load_config",
    "parse_config",
]

_SECRET: dict[str, Any] = {
    "oneOf": [
        {"type": "string", "minLength": 1},
        {
            "type": "object",
            "properties": {"env": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}},
            "required": ["env"],
            "additionalProperties": False,
        },
    ]
}

_CREDENTIALS: dict[str, dict[str, Any]] = {
    "dingtalk": {
        "type": "object",
        "properties": {
            "clientId": _SECRET,
            "clientSecret": _SECRET,
            "cardCallbackSecret": _SECRET,
        },
        "required": ["clientId", "clientSecret"],
        "additionalProperties": False,
    },
    "feishu": {
        "type": "object",
        "properties": {
            "appId": _SECRET,
            "appSecret": _SECRET,
            "verificationToken": _SECRET,
            "encryptKey": _SECRET,
        },
        "required": ["appId", "appSecret", "verificationToken"],
        "additionalProperties": False,
    },
    "telegram": {
        "type": "object",
        "properties": {"botToken": _SECRET, "webhookSecret": _SECRET},
        "required": ["botToken"],
        "additionalProperties": False,
    },
}

#: The JSON Schema (draft 2020-12) of the configuration document.
CONFIG_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "channelkit configuration",
    "type": "object",
    "properties": {
        "$schema": {"type": "string"},
        "channels": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "platform": {"enum": sorted(_CREDENTIALS)},
                    "name": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"},
                    "credentials": {"type": "object"},
                    "options": {"type": "object"},
                },
                "required": ["platform", "credentials"],
                "additionalProperties": False,
                "allOf": [
                    {
                        "if": {
                            "properties": {"platform": {"const": platform}},
                            "required": ["platform"],
                        },
                        "then": {"properties": {"credentials": schema}},
                    }
                    for platform, schema in sorted(_CREDENTIALS.items())
                ],
            },
        },
        "agent": {
            "type": "object",
            "properties": {
                "type": {"enum": ["demo", "function", "factory", "acp"]},
                "function": {"type": "string", "pattern": r"^[\w.]+:[\w.]+$"},
                "factory": {"type": "string", "pattern": r"^[\w.]+:[\w.]+$"},
                "command": {
                    "oneOf": [
                        {"type": "string", "minLength": 1},
                        {"type": "array", "items": {"type": "string"}, "minItems": 1},
                    ]
                },
                "cwd": {"type": "string"},
                "env": {"type": "object", "additionalProperties": _SECRET},
                "questionTimeoutSeconds": {"type": "number", "exclusiveMinimum": 0},
                "requestTimeoutSeconds": {"type": "number", "exclusiveMinimum": 0},
            },
            "required": ["type"],
            "additionalProperties": False,
            "allOf": [
                {
                    "if": {"properties": {"type": {"const": "function"}}, "required": ["type"]},
                    "then": {"required": ["function"]},
                },
                {
                    "if": {"properties": {"type": {"const": "factory"}}, "required": ["type"]},
                    "then": {"required": ["factory"]},
                },
                {
                    "if": {"properties": {"type": {"const": "acp"}}, "required": ["type"]},
                    "then": {"required": ["command"]},
                },
            ],
        },
        "options": {
            "type": "object",
            "properties": {
                "maxWorkers": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 256,
                    "description": "hook pool threads (card writes, replies, timers); default 16",
                },
                "maxConcurrentRuns": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 4096,
                    "description": "agent runs executing at once; runs waiting on a person "
                    "do not count; default 64",
                },
                "maxQueuedRuns": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 100000,
                    "description": "runs waiting for a slot before people are told busy; "
                    "default 1000",
                },
                "maxQueuedPerOwner": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "queued runs of one person; default 5",
                },
                "maxQueuedPerChat": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "queued runs of one chat; default 100",
                },
                "permissionTimeoutSeconds": {"type": "number", "exclusiveMinimum": 0},
                "sessionScope": {"enum": ["user", "chat", "thread"]},
                "logLevel": {"enum": ["DEBUG", "INFO", "WARNING", "ERROR"]},
                "maxBodyBytes": {"type": "integer", "minimum": 1024, "maximum": 1048576},
            },
            "additionalProperties": False,
        },
        "server": {
            "type": "object",
            "properties": {
                "host": {"type": "string", "minLength": 1},
                "port": {"type": "integer", "minimum": 0, "maximum": 65535},
                "engine": {"enum": ["auto", "waitress", "gunicorn"]},
                "threads": {"type": "integer", "minimum": 1, "maximum": 256},
            },
            "additionalProperties": False,
        },
    },
    "required": ["channels"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class ChannelSpec:
    """One validated ``channels[i]`` entry with its secrets resolved."""

    index: int
    platform: str
    name: str
    credentials: Mapping[str, str] = field(repr=False)
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DeploymentConfig:
    """The validated document (secrets resolved)."""

    channels: tuple[ChannelSpec, ...]
    agent: Mapping[str, Any]
    options: Mapping[str, Any]
    server: Mapping[str, Any]
    raw: Mapping[str, Any] = field(repr=False, compare=False)


def _json_path(parts: Iterable[Any]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "$"


def _best_error(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    # For oneOf/anyOf, descend into the most relevant sub-error.
    import jsonschema

    best: jsonschema.ValidationError = jsonschema.exceptions.best_match([error])
    while best.context:
        deeper: jsonschema.ValidationError = jsonschema.exceptions.best_match(best.context)
        if deeper is best:
            break
        best = deeper
    return best


def _format_error(error: jsonschema.ValidationError) -> ConfigurationError:
    error = _best_error(error)
    parts = list(error.absolute_path)
    message = error.message
    validator_value: Any = error.validator_value
    schema: Any = error.schema
    if error.validator == "required" and isinstance(error.instance, Mapping):
        missing = [p for p in validator_value if p not in error.instance]
        if missing:
            parts.append(missing[0])
            message = "is required"
    elif error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
        allowed = set(schema.get("properties", {})) if isinstance(schema, Mapping) else set()
        extra = [k for k in error.instance if k not in allowed]
        if extra:
            parts.append(extra[0])
            message = "is not a known field"
    elif error.validator == "oneOf" and schema is _SECRET:
        message = 'must be a string or {"env": "NAME"}'
    return ConfigurationError(message, path=_json_path(parts))


def _resolve_secret(value: Any, path: str, environ: Mapping[str, str]) -> str:
    if isinstance(value, Mapping):
        name = str(value["env"])
        resolved = environ.get(name)
        if resolved is None or resolved == "":
            raise ConfigurationError(f"environment variable {name} is not set", path=path)
        return resolved
    return str(value)


def parse_config(
    document: Mapping[str, Any], *, environ: Mapping[str, str] | None = None
) -> DeploymentConfig:
    """Validate a configuration document (already JSON-decoded) and resolve secrets."""
    env = os.environ if environ is None else environ
    import jsonschema  # loaded on first use, so importing channelkit stays cheap

    validator = jsonschema.Draft202012Validator(CONFIG_SCHEMA)
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    if errors:
        raise _format_error(errors[0])
    specs: list[ChannelSpec] = []
    names: set[str] = set()
    for index, entry in enumerate(document["channels"]):
        platform = str(entry["platform"])
        name = str(entry.get("name") or platform)
        if name in names:
            raise ConfigurationError(f"duplicate channel name {name!r}", f"channels[{index}].name")
        names.add(name)
        credentials = {
            key: _resolve_secret(value, f"channels[{index}].credentials.{key}", env)
            for key, value in entry["credentials"].items()
        }
        specs.append(
            ChannelSpec(index, platform, name, credentials, dict(entry.get("options", {})))
        )
    agent = dict(document.get("agent") or {"type": "demo"})
    if "env" in agent:
        agent["env"] = {
            key: _resolve_secret(value, f"agent.env.{key}", env)
            for key, value in agent["env"].items()
        }
    return DeploymentConfig(
        channels=tuple(specs),
        agent=agent,
        options=dict(document.get("options", {})),
        server=dict(document.get("server", {})),
        raw=document,
    )


def load_config(
    path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None
) -> DeploymentConfig:
    """Read, validate and resolve the JSON configuration file at ``path``."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"cannot read {file}: {exc.strerror}", path="$") from None
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f"{file} is not valid JSON: {exc}", path="$") from None
    if not isinstance(document, Mapping):
        raise ConfigurationError("the document must be a JSON object", path="$")
    return parse_config(document, environ=environ)


# -- building -------------------------------------------------------------------------------
def _import(target: str, path: str) -> Any:
    module_name, _, attr = target.partition(":")
    try:
        value: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"cannot import {target}: {exc}", path=path) from None
    return value


def build_agent(config: DeploymentConfig) -> AgentBridge:
    """The agent bridge the ``agent`` section describes (``demo`` when omitted)."""
    spec = config.agent
    kind = spec.get("type", "demo")
    if kind == "demo":
        from channelkit.playground.demo import demo_agent

        return demo_agent()
    if kind == "function":
        from channelkit.agents.function import FunctionAgent

        fn = _import(str(spec["function"]), "agent.function")
        if not callable(fn):
            raise ConfigurationError("must name a callable", path="agent.function")
        return FunctionAgent(fn, question_timeout=float(spec.get("questionTimeoutSeconds", 300.0)))
    if kind == "factory":
        factory = _import(str(spec["factory"]), "agent.factory")
        bridge = factory() if callable(factory) else None
        if not isinstance(bridge, AgentBridge):
            raise ConfigurationError("must return an AgentBridge", path="agent.factory")
        return bridge
    from channelkit.agents.acp import AcpBridge

    command = spec["command"]
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    if not argv:
        raise ConfigurationError("must name a command", path="agent.command")
    env = None
    if "env" in spec:
        env = {**os.environ, **spec["env"]}
    kwargs: dict[str, Any] = {"cwd": spec.get("cwd"), "env": env}
    if "requestTimeoutSeconds" in spec:
        kwargs["request_timeout"] = float(spec["requestTimeoutSeconds"])
    return AcpBridge(argv, **kwargs)


_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def _snake(mapping: Mapping[str, Any]) -> dict[str, Any]:
    return {_CAMEL.sub("_", key).lower(): value for key, value in mapping.items()}


def _channel_config(config: DeploymentConfig, spec: ChannelSpec) -> Any:
    from channelkit.core import ChannelConfig

    options = config.options
    kwargs: dict[str, Any] = {"name": spec.name}
    if "maxWorkers" in options:
        kwargs["max_workers"] = options["maxWorkers"]
    if "maxConcurrentRuns" in options:
        kwargs["max_concurrent_runs"] = options["maxConcurrentRuns"]
    for key, name in (
        ("maxQueuedRuns", "max_queued_runs"),
        ("maxQueuedPerOwner", "max_queued_per_owner"),
        ("maxQueuedPerChat", "max_queued_per_chat"),
    ):
        if key in options:
            kwargs[name] = options[key]
    if "permissionTimeoutSeconds" in options:
        kwargs["permission_timeout"] = float(options["permissionTimeoutSeconds"])
    if "sessionScope" in options:
        kwargs["session_scope"] = options["sessionScope"]
    if isinstance(spec.options.get("model"), str):
        kwargs["model"] = spec.options["model"]
    try:
        return ChannelConfig(**kwargs)
    except ConfigurationError as exc:
        raise ConfigurationError(str(exc), path="options") from None


def _platform_error(exc: ConfigurationError, spec: ChannelSpec) -> ConfigurationError:
    inner = exc.path or ""
    leaf = inner.split(".", 1)[1] if inner.startswith(f"{spec.platform}.") else inner
    message = str(exc)
    if exc.path and message.startswith(f"{exc.path}: "):
        message = message[len(exc.path) + 2 :]
    credential_keys = set(spec.credentials) | {"clientId", "clientSecret", "appId", "appSecret"}
    section = "credentials" if leaf.split(".")[0] in credential_keys else "options"
    path = f"channels[{spec.index}].{section}" + (f".{leaf}" if leaf else "")
    return ConfigurationError(message, path=path)


def _build_channel(
    config: DeploymentConfig,
    spec: ChannelSpec,
    bridge: AgentBridge,
    executor_factory: Callable[[], Any] | None,
) -> Any:
    channel_config = _channel_config(config, spec)
    executor = executor_factory() if executor_factory is not None else None
    data: dict[str, Any] = {**spec.options, **spec.credentials}
    try:
        if spec.platform == "dingtalk":
            from channelkit.platforms.dingtalk import DingtalkChannel, DingtalkConfig

            dingtalk = DingtalkConfig.from_dict({**data, "name": spec.name})
            return DingtalkChannel(
                dingtalk, bridge, channel_config=channel_config, executor=executor
            )
        if spec.platform == "feishu":
            from channelkit.platforms.feishu import FeishuChannel, FeishuConfig

            feishu = FeishuConfig.from_dict(_snake(data))
            return FeishuChannel(feishu, bridge, channel_config=channel_config, executor=executor)
        from channelkit.platforms.telegram import TelegramChannel, TelegramConfig

        telegram = TelegramConfig.from_dict({**data, "channelName": spec.name})
        return TelegramChannel(telegram, bridge, channel_config=channel_config, executor=executor)
    except ConfigurationError as exc:
        raise _platform_error(exc, spec) from None


def build_channels(
    config: DeploymentConfig,
    bridge: AgentBridge | None = None,
    *,
    executor_factory: Callable[[], Any] | None = None,
) -> list[Any]:
    """Construct every configured channel around one agent bridge.

    ``bridge`` defaults to :func:`build_agent`. ``executor_factory`` supplies each
    channel's pool (e.g. ``channelkit.web.django.django_executor``). Platform-level
    errors are re-raised with the JSON path of the offending field.
    """
    agent = bridge if bridge is not None else build_agent(config)
    channels: list[Any] = []
    try:
        for spec in config.channels:
            channels.append(_build_channel(config, spec, agent, executor_factory))
    except BaseException:
        for channel in channels:
            channel.close()
        raise
    return channels


def schema_json() -> str:
    """The schema as JSON text (``channelkit config-schema`` prints it)."""
    return json.dumps(CONFIG_SCHEMA, indent=2)
