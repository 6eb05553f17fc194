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

`load_config()` parses and validates (errors are `ConfigurationError` whose
``path`` is the JSON path, e.g. ``channels[0].credentials.clientSecret``), resolves
``{"env": "NAME"}`` secrets and returns a `DeploymentConfig`;
`build_channels()` turns it into running channels. docs/configuration.md documents
every field.
"""

from __future__ import annotations

import importlib
import json
import os
import shlex
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from channelkit.agents.base import AgentBridge
from channelkit.cluster_config import (
    LEASE_SCHEMA,
    build_state_store,
    check_lease_options,
    cluster_kwargs,
)
from channelkit.core.catalog import check_locale
from channelkit.errors import ConfigurationError
from channelkit.platforms.registry import SECRET_SCHEMA, chat_platforms, get_platform

if TYPE_CHECKING:
    import jsonschema

    #: The JSON Schema of the configuration document (`config_schema()`).
    CONFIG_SCHEMA: dict[str, Any]

__all__ = [
    "CONFIG_SCHEMA",
    "DEFAULT_SHUTDOWN_GRACE_S",
    "DeploymentConfig",
    "build_agent",
    "build_channels",
    "build_state_store",
    "check_agent",
    "check_state",
    "config_schema",
    "load_config",
    "parse_config",
    "validate_config_file",
]

#: Seconds ``channelkit serve`` gives its channels to close after SIGTERM/SIGINT.
DEFAULT_SHUTDOWN_GRACE_S = 10.0


def _plain(value: Any) -> Any:
    """A JSON-ready copy (mappings become dicts, tuples lists) of a registry value."""
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


_SECRET: dict[str, Any] = _plain(SECRET_SCHEMA)

#: ``channels[i].options`` keys the core reads into `ChannelConfig` (every platform
#: has them; the platform's own parser never sees them) -> the ChannelConfig field.
_CORE_CHANNEL_OPTIONS: dict[str, str] = {
    "busy": "busy",
    "collectWindowSeconds": "collect_window",
    "locale": "locale",
}


def _core_options_schema() -> dict[str, Any]:
    from channelkit.core.busy import BUSY_MODES, MAX_COLLECT_WINDOW

    return {
        "busy": {
            "enum": list(BUSY_MODES),
            "description": "what a message does while its conversation's run is going: "
            "queue (default), interrupt, collect or steer",
        },
        "collectWindowSeconds": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": MAX_COLLECT_WINDOW,
            "description": "busy=collect: how long the first message waits for more; "
            "default 1.5",
        },
        "locale": {
            "type": "string",
            "description": "language of the texts the SDK shows people: en (default), "
            "zh-CN or de (or a tag of their language, e.g. zh, de-AT); see docs/language.md",
        },
    }


def _credentials_schemas() -> dict[str, dict[str, Any]]:
    """Every registered chat platform's ``channels[i].credentials`` schema."""
    return {spec.name: _plain(spec.credentials_schema) for spec in chat_platforms()}


def config_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the configuration document, built from the
    platform registry (``channelkit.platforms.PLATFORMS``): the ``platform`` enum lists
    every registered chat platform, and each one's ``credentials`` get its schema.
    ``CONFIG_SCHEMA`` is the same document (built on each access)."""
    from channelkit.core.access import ACCESS_SCHEMA

    credentials = _credentials_schemas()
    access_schema = _plain(ACCESS_SCHEMA)
    return {
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
                        "platform": {"enum": sorted(credentials)},
                        "name": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"},
                        "credentials": {"type": "object"},
                        "access": access_schema,
                        "options": {"type": "object", "properties": _core_options_schema()},
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
                        for platform, schema in sorted(credentials.items())
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
                        "description": "hook pool threads (card writes, replies, timers); "
                        "default 16",
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
                    "shutdownGraceS": {
                        "type": "number",
                        "exclusiveMinimum": 0,
                        "maximum": 3600,
                        "description": "seconds serve gives live runs, cards and connections "
                        "to close after SIGTERM/SIGINT; default 10",
                    },
                },
                "additionalProperties": False,
            },
            "state": {
                "type": "object",
                "description": "shared state of the processes serving this bot; absent: in memory",
                "properties": {
                    "redis": {
                        "type": "object",
                        "properties": {
                            "url": _SECRET,
                            "namespace": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,128}$"},
                            "socketTimeoutSeconds": {
                                "type": "number",
                                "exclusiveMinimum": 0,
                                "maximum": 60,
                            },
                            "sentinels": {
                                "type": "array",
                                "items": {"type": "string", "minLength": 3},
                                "minItems": 1,
                                "maxItems": 64,
                                "description": "host:port of each Sentinel; the store "
                                "follows the primary they name for sentinelService",
                            },
                            "sentinelService": {"type": "string", "minLength": 1},
                            "sentinelPassword": _SECRET,
                            "username": _SECRET,
                            "password": _SECRET,
                            "tls": {"type": "boolean"},
                            "tlsCaFile": {"type": "string", "minLength": 1},
                            "tlsCertFile": {"type": "string", "minLength": 1},
                            "tlsKeyFile": {"type": "string", "minLength": 1},
                        },
                        "additionalProperties": False,
                    },
                    **LEASE_SCHEMA,
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
    #: the ``access`` section (who may talk to the bot, and where), as written
    access: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DeploymentConfig:
    """The validated document (secrets resolved)."""

    channels: tuple[ChannelSpec, ...]
    agent: Mapping[str, Any]
    options: Mapping[str, Any]
    server: Mapping[str, Any]
    raw: Mapping[str, Any] = field(repr=False, compare=False)
    #: the ``state`` section, secrets resolved (the Redis URL may hold a password)
    state: Mapping[str, Any] = field(default_factory=dict, repr=False)


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
    elif error.validator == "oneOf" and schema == _SECRET:
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
    """Validate a configuration document (already JSON-decoded) and resolve secrets.

    Beyond the schema, every channel's ``options`` go through its adapter's own parser
    (the values ``build_channels`` would reject are rejected here) and a key the adapter
    never reads is rejected as unknown, with its JSON path.
    """
    env = os.environ if environ is None else environ
    import jsonschema  # loaded on first use, so importing channelkit stays cheap

    validator = jsonschema.Draft202012Validator(config_schema())
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
        access = dict(entry.get("access") or {})
        _check_access(access, index)
        options = dict(entry.get("options", {}))
        if "locale" in options:
            check_locale(options["locale"], f"channels[{index}].options.locale")
        specs.append(ChannelSpec(index, platform, name, credentials, options, access))
    agent = dict(document.get("agent") or {"type": "demo"})
    if "env" in agent:
        agent["env"] = {
            key: _resolve_secret(value, f"agent.env.{key}", env)
            for key, value in agent["env"].items()
        }
    state = _resolve_state(document.get("state") or {}, env)
    check_lease_options(document.get("state") or {})
    config = DeploymentConfig(
        channels=tuple(specs),
        agent=agent,
        options=dict(document.get("options", {})),
        server=dict(document.get("server", {})),
        raw=document,
        state=state,
    )
    for spec in config.channels:
        _channel_config(config, spec)
        _check_platform_settings(spec)
    return config


def _check_access(access: Mapping[str, Any], index: int) -> None:
    """``channels[index].access`` as `ChannelConfig` reads it; errors name its path."""
    from channelkit.core.access import AccessConfig

    try:
        AccessConfig.from_mapping(access)
    except ConfigurationError as exc:
        message = str(exc)
        if exc.path and message.startswith(f"{exc.path}: "):
            message = message[len(exc.path) + 2 :]
        raise ConfigurationError(message, path=f"channels[{index}].{exc.path}") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def load_config(
    path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None
) -> DeploymentConfig:
    """Read, validate and resolve the JSON configuration file at ``path``.

    Every problem (an unreadable or non-UTF-8 file, invalid JSON, a schema error, an
    unknown or invalid adapter setting, an unset environment variable) is a
    `ConfigurationError` whose ``path`` names the JSON path (``$`` for the file).
    """
    file = Path(path)
    try:
        data = file.read_bytes()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigurationError(f"cannot read {file}: {reason}", path="$") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigurationError(
            f"{file} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
            path="$",
        ) from None
    try:
        document = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise ConfigurationError(f"{file} is not valid JSON: {exc}", path="$") from None
    if not isinstance(document, Mapping):
        raise ConfigurationError("the document must be a JSON object", path="$")
    return parse_config(document, environ=environ)


def validate_config_file(
    path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None
) -> DeploymentConfig:
    """The one validation ``channelkit check-config`` and ``channelkit serve`` share.

    `load_config()` (schema, secrets, every adapter setting, unknown keys) plus
    `check_agent()` (the agent's ``function``/``factory`` imports). A file this
    accepts is one ``serve`` starts with; anything it rejects, both commands reject with
    the same message.
    """
    config = load_config(path, environ=environ)
    check_agent(config)
    check_state(config)
    return config


def _resolve_state(section: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    if "redis" not in section:
        return {}
    redis = dict(section["redis"])
    if "url" not in redis and "sentinels" not in redis:
        raise ConfigurationError(
            "must be a redis://, rediss:// or unix:// URL (or give sentinels)", "state.redis.url"
        )
    if "url" in redis:
        redis["url"] = url = _resolve_secret(redis["url"], "state.redis.url", env)
        if not url.startswith(("redis://", "rediss://", "unix://")):
            raise ConfigurationError(
                "must be a redis://, rediss:// or unix:// URL", "state.redis.url"
            )
    for name in ("username", "password", "sentinelPassword"):
        if name in redis:
            redis[name] = _resolve_secret(redis[name], f"state.redis.{name}", env)
    from channelkit.state import check_redis_spec

    check_redis_spec(redis)
    return {"redis": redis}


def _unreachable_path(redis: Mapping[str, Any], exc: Exception) -> str:
    """The setting a failed start points at: the credentials when Redis refused them,
    the Sentinels or the URL otherwise."""
    if getattr(exc, "cause_class", "") == "AuthenticationError":
        if "password" in redis or "username" in redis:
            return "state.redis.password" if "password" in redis else "state.redis.username"
        return "state.redis.url"
    return "state.redis.sentinels" if "sentinels" in redis else "state.redis.url"


def check_state(config: DeploymentConfig) -> None:
    """With ``state.redis``, reach Redis once (PING): an unreachable Redis is one
    `ConfigurationError` at ``state.redis.url`` (``state.redis.sentinels`` with
    Sentinels; ``state.redis.password`` when Redis refuses the credentials), no
    password ever shown."""
    if "redis" not in config.state:
        return
    try:
        store = build_state_store(config)
    except ImportError as exc:
        raise ConfigurationError(str(exc), "state.redis") from None
    from channelkit.errors import StateStoreUnavailable

    try:
        store.ping()
    except StateStoreUnavailable as exc:
        raise ConfigurationError(
            f"the process refuses to start: {exc}", _unreachable_path(config.state["redis"], exc)
        ) from None
    finally:
        store.close()


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


def check_agent(config: DeploymentConfig) -> None:
    """Raise `ConfigurationError` (``agent.*``) when the agent section cannot work:
    a ``function``/``factory`` that does not import or is not callable, an ``acp``
    command that does not split. Nothing is started or called."""
    spec = config.agent
    kind = spec.get("type", "demo")
    if kind in ("function", "factory"):
        target = _import(str(spec[kind]), f"agent.{kind}")
        if not callable(target):
            raise ConfigurationError("must name a callable", path=f"agent.{kind}")
    elif kind == "acp":
        _acp_argv(spec["command"])


def _acp_argv(command: Any) -> list[str]:
    try:
        argv = shlex.split(command) if isinstance(command, str) else list(command)
    except ValueError as exc:
        raise ConfigurationError(f"cannot split the command: {exc}", path="agent.command") from None
    if not argv:
        raise ConfigurationError("must name a command", path="agent.command")
    return argv


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

    argv = _acp_argv(spec["command"])
    env = None
    if "env" in spec:
        env = {**os.environ, **spec["env"]}
    kwargs: dict[str, Any] = {"cwd": spec.get("cwd"), "env": env}
    if "requestTimeoutSeconds" in spec:
        kwargs["request_timeout"] = float(spec["requestTimeoutSeconds"])
    return AcpBridge(argv, **kwargs)


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
    if spec.access:
        kwargs["access"] = spec.access
    for key, name in _CORE_CHANNEL_OPTIONS.items():
        if key in spec.options:
            kwargs[name] = spec.options[key]
    try:
        return ChannelConfig(**kwargs)
    except ConfigurationError as exc:
        raise ConfigurationError(str(exc), path="options") from None


def _user_key(key: str, spec: ChannelSpec) -> tuple[str, str]:
    """The section (``credentials``/``options``) and the spelling the user wrote of an
    adapter field an error names (``typing_interval_s`` -> ``typingIntervalS``)."""
    from channelkit.platforms.common.config import camel_case

    for candidate in (key, camel_case(key)):
        if candidate in spec.credentials:
            return "credentials", candidate
        if candidate in spec.options:
            return "options", candidate
    credential_keys = get_platform(spec.platform).credential_keys
    for candidate in (key, camel_case(key)):
        if candidate in credential_keys:
            return "credentials", candidate
    return "options", key


def _platform_error(exc: ConfigurationError, spec: ChannelSpec) -> ConfigurationError:
    inner = exc.path or ""
    leaf = inner.split(".", 1)[1] if inner.startswith(f"{spec.platform}.") else inner
    if leaf == spec.platform:
        leaf = ""
    message = str(exc)
    if exc.path and message.startswith(f"{exc.path}: "):
        message = message[len(exc.path) + 2 :]
    head, dot, rest = leaf.partition(".")
    section, head = _user_key(head, spec) if head else ("options", "")
    path = f"channels[{spec.index}].{section}" + (f".{head}{dot}{rest}" if head else "")
    return ConfigurationError(message, path=path)


class _ReadKeys(Mapping[str, Any]):
    """A read-only view of a settings object that records every key a parser reads.

    Nested objects are returned as views too. Iterating an object counts as reading all
    of its keys (a parser that copies it takes everything).
    """

    def __init__(self, data: Mapping[str, Any], path: str, seen: set[str]) -> None:
        self._data = data
        self._path = path
        self._seen = seen

    def _child(self, key: object) -> str:
        return f"{self._path}.{key}" if self._path else str(key)

    def __getitem__(self, key: str) -> Any:
        value = self._data[key]
        child = self._child(key)
        self._seen.add(child)
        if isinstance(value, Mapping):
            return _ReadKeys(value, child, self._seen)
        return value

    def __contains__(self, key: object) -> bool:
        self._seen.add(self._child(key))
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        self._seen.add(self._child("*"))
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def _unread(data: Mapping[str, Any], path: str, seen: set[str]) -> str | None:
    """The first key of ``data`` (at ``path``) no parser read, else None."""
    if (f"{path}.*" if path else "*") in seen:
        return None
    for key, value in data.items():
        child = f"{path}.{key}" if path else str(key)
        if child not in seen:
            return child
        if isinstance(value, Mapping) and any(p.startswith(child + ".") for p in seen):
            deeper = _unread(value, child, seen)
            if deeper is not None:
                return deeper
    return None


def _platform_config(spec: ChannelSpec, seen: set[str] | None = None) -> Any:
    """The adapter's config object for ``spec``; errors name the channel's JSON path.

    With ``seen``, the adapter parses a recording view and every key it read is added.
    """
    options = {k: v for k, v in spec.options.items() if k not in _CORE_CHANNEL_OPTIONS}
    data: dict[str, Any] = {**options, **spec.credentials}

    def view(mapping: dict[str, Any]) -> Mapping[str, Any]:
        return mapping if seen is None else _ReadKeys(mapping, "", seen)

    try:
        platform = get_platform(spec.platform)
        return platform.build_config(view(platform.named_settings(data, spec.name)))
    except ConfigurationError as exc:
        raise _platform_error(exc, spec) from None


def _check_platform_settings(spec: ChannelSpec) -> None:
    """Parse the channel's options as its adapter does; reject a key it never reads."""
    seen: set[str] = {key for key in _CORE_CHANNEL_OPTIONS if key in spec.options}
    _platform_config(spec, seen)
    unknown = _unread(spec.options, "", seen)
    if unknown is not None:
        raise ConfigurationError(
            "unknown setting",
            path=f"channels[{spec.index}].options.{unknown}",
        )


def _build_channel(
    config: DeploymentConfig,
    spec: ChannelSpec,
    bridge: AgentBridge,
    executor_factory: Callable[[], Any] | None,
) -> Any:
    channel_config = _channel_config(config, spec)
    platform_config = _platform_config(spec)
    executor = executor_factory() if executor_factory is not None else None
    channel_class = get_platform(spec.platform).channel_class
    assert channel_class is not None  # the schema admits chat platforms only
    try:
        return channel_class.load()(
            platform_config,
            bridge,
            channel_config=channel_config,
            executor=executor,
            **cluster_kwargs(config, spec.platform),  # state.redis: the shared store
        )
    except ConfigurationError as exc:
        raise _platform_error(exc, spec) from None


def build_channels(
    config: DeploymentConfig,
    bridge: AgentBridge | None = None,
    *,
    executor_factory: Callable[[], Any] | None = None,
) -> list[Any]:
    """Construct every configured channel around one agent bridge.

    ``bridge`` defaults to `build_agent()`. ``executor_factory`` supplies each
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
    return json.dumps(config_schema(), indent=2)


def __getattr__(name: str) -> Any:
    """``CONFIG_SCHEMA``: the schema of the platforms registered now (`config_schema()`)."""
    if name == "CONFIG_SCHEMA":
        return config_schema()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
