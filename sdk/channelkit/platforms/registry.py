"""The platform registry: one typed, frozen description per platform.

`PLATFORMS` maps a platform name (`"telegram"`) to its `PlatformSpec`. Everything that
lists platforms reads it: `channelkit serve`, `check-config` and `config-schema` (the
credentials schema and the options parsing of each chat platform), the playground and
`EmulatorServer` (emulators, ingress modes), `channelkit send`/`pin`/`pins`, the front
door (`channelkit.DingtalkChannel`), the token providers of the generated clients and
the shared-store wiring of `state.redis`.

A spec holds data and `Ref`s (`"module:attribute"` strings loaded on first use), so
importing the registry imports no platform package.

Adding a platform: its own folders (`platforms/<name>/`, `clients/<name>/`,
`openapi/<name>.json`, its emulator) plus one `PlatformSpec` in
`channelkit.platforms.BUILTIN_PLATFORMS`, or, from outside the package,
`register_platform(spec)` at start-up (it returns a handle whose `undo()` removes the
entry again; the handle is also a context manager, which is what tests use).
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from channelkit.errors import ConfigurationError

__all__ = [
    "CAPABILITIES",
    "CHAT",
    "KINDS",
    "PLATFORMS",
    "PRESENTATION_ONLY",
    "SECRET_SCHEMA",
    "SHARED_STORE_MODES",
    "PlatformSpec",
    "PlaygroundDefaults",
    "Ref",
    "Registration",
    "chat_platforms",
    "get_platform",
    "platform_offers",
    "register_platform",
    "secret_credentials",
]

#: A platform that runs agent conversations: a channel class, a config, ingress.
CHAT = "chat"
#: A platform reached only through the presentation layer (a renderer and a sender).
PRESENTATION_ONLY = "presentation-only"
KINDS = (CHAT, PRESENTATION_ONLY)

#: What a platform can show natively (`PlatformSpec.capabilities`).
CAPABILITIES: Mapping[str, str] = MappingProxyType(
    {
        "streaming": "the agent's output appears while it is produced",
        "cards": "output and questions are interactive cards",
        "stop_button": "a Stop button on the live output cancels exactly that run",
        "forms": "the agent's structured questions are native forms or keyboards",
        "approval_buttons": "tool permissions are answered with native buttons",
        "pins": "messages can be pinned",
        "typing": "a working indicator (typing action, reaction or status) while a run works",
        "presentation": "semantic message presentations are rendered natively",
        "threads": "a group's threads (or forum topics) are conversations of their own: "
        "with no session scope configured, a group shares one session per thread",
        "files_out": "the agent's files and images are uploaded natively "
        "(`Turn.send_file`); elsewhere the person gets a line naming the file",
    }
)

#: How `state.redis` wires a channel: not at all, update/event dedup across instances,
#: or dedup plus run ownership, callback routing, leases and recovery (`cluster`).
SHARED_STORE_MODES = ("none", "dedup", "cluster")

#: The JSON Schema of one secret: a string, or `{"env": "NAME"}` read from the environment.
SECRET_SCHEMA: Mapping[str, Any] = MappingProxyType(
    {
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
)

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_TARGET = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_MODE = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


def secret_credentials(*required: str, optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """The credentials JSON Schema of an object of secrets: `required` and `optional`
    keys (camelCase, as the deployment document spells them), nothing else."""
    return {
        "type": "object",
        "properties": {key: dict(SECRET_SCHEMA) for key in (*required, *optional)},
        "required": list(required),
        "additionalProperties": False,
    }


@dataclass(frozen=True)
class Ref:
    """A lazily loaded reference to a module attribute: `"package.module:Name"` (the
    attribute may be dotted: `"pkg.mod:Config.from_dict"`). `load()` imports it."""

    target: str

    def __post_init__(self) -> None:
        if not isinstance(self.target, str) or not _TARGET.match(self.target):
            raise ConfigurationError(
                f"must look like 'package.module:Name' (got {self.target!r})", "target"
            )

    @property
    def module(self) -> str:
        """The module part (`"channelkit.platforms.telegram"`)."""
        return self.target.partition(":")[0]

    @property
    def attribute(self) -> str:
        """The attribute part (`"TelegramChannel"`, or dotted)."""
        return self.target.partition(":")[2]

    @property
    def name(self) -> str:
        """The last name of the attribute (`"from_dict"` of `"Config.from_dict"`)."""
        return self.attribute.rpartition(".")[2]

    def load(self) -> Any:
        """Import the module and return the attribute. An error importing the module
        propagates as it is; a missing attribute is an `ImportError` naming the reference."""
        value: Any = importlib.import_module(self.module)
        for part in self.attribute.split("."):
            try:
                value = getattr(value, part)
            except AttributeError:
                raise ImportError(f"cannot load {self.target}: no attribute {part!r}") from None
        return value


def _ref(value: object, path: str, *, optional: bool = True) -> Ref | None:
    if value is None:
        if not optional:
            raise ConfigurationError("is required", path)
        return None
    if isinstance(value, Ref):
        return value
    if isinstance(value, str):
        try:
            return Ref(value)
        except ConfigurationError as exc:
            raise ConfigurationError(str(exc).partition(": ")[2], path) from None
    raise ConfigurationError("must be a Ref or a 'package.module:Name' string", path)


@dataclass(frozen=True)
class PlaygroundDefaults:
    """How the playground and the tests run a platform against its emulator.

    `emulator`: the `EmulatorBase` subclass. `credentials`: the `channels[i].credentials`
    of a deployment document that the emulator accepts with `emulator_kwargs()`
    (`emulator_credentials` maps an emulator keyword to a credentials key; `emulator_options`
    are further fixed keywords). `api_base_url_option`: the `channels[i].options` key that
    points the channel's API calls at the emulator (`"apiBaseUrl"`, `"baseUrl"`).
    """

    emulator: Ref
    credentials: Mapping[str, str] = field(default_factory=dict, repr=False, hash=False)
    emulator_credentials: Mapping[str, str] = field(default_factory=dict, hash=False)
    emulator_options: Mapping[str, Any] = field(default_factory=dict, hash=False)
    api_base_url_option: str = "apiBaseUrl"

    def __post_init__(self) -> None:
        object.__setattr__(self, "emulator", _ref(self.emulator, "emulator", optional=False))
        for name in ("credentials", "emulator_credentials", "emulator_options"):
            value = getattr(self, name)
            if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
                raise ConfigurationError("must be a mapping with string keys", name)
            object.__setattr__(self, name, MappingProxyType(dict(value)))
        for keyword, key in self.emulator_credentials.items():
            if key not in self.credentials:
                raise ConfigurationError(
                    f"names {key!r}, which credentials do not hold",
                    f"emulator_credentials.{keyword}",
                )
        if not isinstance(self.api_base_url_option, str) or not self.api_base_url_option:
            raise ConfigurationError("must be a non-empty string", "api_base_url_option")

    def emulator_kwargs(self, **overrides: Any) -> dict[str, Any]:
        """The emulator's keyword arguments that match `credentials`, then `overrides`."""
        kwargs: dict[str, Any] = dict(self.emulator_options)
        kwargs.update({kw: self.credentials[key] for kw, key in self.emulator_credentials.items()})
        kwargs.update(overrides)
        return kwargs


_CHAT_ONLY = ("config_class", "channel_class", "credentials_schema")


@dataclass(frozen=True)
class PlatformSpec:
    """The description of one platform (frozen; validated on construction, every error a
    `ConfigurationError` whose path names the field, e.g. `feishu.ingress`).

    `name`: the `platform` of a deployment document (`^[a-z][a-z0-9_]{0,31}$`).
    `display_name`: how people call it (`"Feishu / Lark"`). `kind`: `"chat"` or
    `"presentation-only"`. `docs`: its page under docs/ (`"platforms/feishu.md"`).

    Chat platforms only: `config_class`, `channel_class` (`Ref`s; every `Ref` field also
    accepts its `"module:Name"` string, converted on construction), `credentials_schema` (the JSON
    Schema of `channels[i].credentials`), `ingress` (the modes its config accepts, the
    default first) and the parsing of `channels[i]`: the credentials and options are
    merged into one mapping of settings; with `settings_case="snake"` its camelCase keys
    become snake_case first; `name_setting` (if set) receives the channel's name; then
    `parse_config` (a callable taking that mapping) builds the config, or, when None,
    the config dataclass is filled field by field (camelCase or snake_case keys; an
    unknown key or a missing required field is an error naming it). `shared_store`: how
    `state.redis` wires the channel (`SHARED_STORE_MODES`). `check_credentials` (optional):
    the start-up check `channelkit serve` and `check-config --online` make, a callable
    `check(config, *, timeout)` given the channel's built config that asks the platform
    whether the credentials work, in one call bounded by `timeout` seconds, and raises
    `channelkit.errors.CredentialCheckFailed` naming the credential when they do not
    (None: the platform has no cheap check and the channel starts unchecked).

    All platforms: `capabilities` (names from `CAPABILITIES`), `renderer` and `sender`
    (the presentation modules' references), `token_provider` (the refreshing token
    provider of its generated client, if it has one), `chat_id_help` (what a chat id
    looks like, for `channelkit send --to`) and `playground` (`PlaygroundDefaults`, None
    when it has no emulator).
    """

    name: str
    display_name: str
    kind: str
    docs: str
    config_class: Ref | None = None
    channel_class: Ref | None = None
    credentials_schema: Mapping[str, Any] | None = field(default=None, repr=False, hash=False)
    ingress: tuple[str, ...] = ()
    parse_config: Ref | None = None
    settings_case: str = "camel"
    name_setting: str | None = None
    shared_store: str = "none"
    check_credentials: Ref | None = None
    capabilities: frozenset[str] = frozenset()
    renderer: Ref | None = None
    sender: Ref | None = None
    token_provider: Ref | None = None
    chat_id_help: str = ""
    playground: PlaygroundDefaults | None = None

    def __post_init__(self) -> None:
        name = self.name
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigurationError(
                f"must match {_NAME.pattern} (got {name!r})", "PlatformSpec.name"
            )
        for key in ("display_name", "docs"):
            value = getattr(self, key)
            if not isinstance(value, str) or not value.strip():
                raise ConfigurationError("must be a non-empty string", f"{name}.{key}")
        if self.kind not in KINDS:
            raise ConfigurationError(f"must be one of {', '.join(KINDS)}", f"{name}.kind")
        chat = self.kind == CHAT
        for key in (
            "config_class",
            "channel_class",
            "parse_config",
            "check_credentials",
            "renderer",
            "sender",
        ):
            object.__setattr__(self, key, _ref(getattr(self, key), f"{name}.{key}"))
        object.__setattr__(
            self, "token_provider", _ref(self.token_provider, f"{name}.token_provider")
        )
        for key in _CHAT_ONLY:
            if chat and getattr(self, key) is None:
                raise ConfigurationError("is required for a chat platform", f"{name}.{key}")
            if not chat and getattr(self, key) is not None:
                raise ConfigurationError(
                    "belongs to chat platforms (this one is presentation-only)", f"{name}.{key}"
                )
        if not chat and self.check_credentials is not None:
            raise ConfigurationError(
                "belongs to chat platforms (this one is presentation-only)",
                f"{name}.check_credentials",
            )
        if self.credentials_schema is not None:
            object.__setattr__(
                self, "credentials_schema", _check_credentials(self.credentials_schema, name)
            )
        self._check_ingress(chat)
        if not chat and (self.renderer is None or self.sender is None):
            missing = "renderer" if self.renderer is None else "sender"
            raise ConfigurationError(
                "is required for a presentation-only platform", f"{name}.{missing}"
            )
        if (self.renderer is None) != (self.sender is None):
            raise ConfigurationError("a renderer needs its sender and back", f"{name}.sender")
        if self.settings_case not in ("camel", "snake"):
            raise ConfigurationError('must be "camel" or "snake"', f"{name}.settings_case")
        if self.name_setting is not None and not (
            isinstance(self.name_setting, str) and self.name_setting
        ):
            raise ConfigurationError("must be a non-empty string or None", f"{name}.name_setting")
        if self.shared_store not in SHARED_STORE_MODES:
            raise ConfigurationError(
                f"must be one of {', '.join(SHARED_STORE_MODES)}", f"{name}.shared_store"
            )
        if not chat and self.shared_store != "none":
            raise ConfigurationError(
                'must be "none" for a presentation-only platform', f"{name}.shared_store"
            )
        self._check_capabilities()
        if not isinstance(self.chat_id_help, str):
            raise ConfigurationError("must be a string", f"{name}.chat_id_help")
        if self.playground is not None and not isinstance(self.playground, PlaygroundDefaults):
            raise ConfigurationError("must be a PlaygroundDefaults or None", f"{name}.playground")

    def _check_ingress(self, chat: bool) -> None:
        modes = self.ingress
        path = f"{self.name}.ingress"
        if not isinstance(modes, tuple | list):
            raise ConfigurationError("must be a tuple of mode names, the default first", path)
        modes = tuple(modes)
        if chat and not modes:
            raise ConfigurationError("a chat platform needs at least one ingress mode", path)
        if not chat and modes:
            raise ConfigurationError("must be empty for a presentation-only platform", path)
        for index, mode in enumerate(modes):
            if not isinstance(mode, str) or not _MODE.match(mode):
                raise ConfigurationError(f"must match {_MODE.pattern}", f"{path}[{index}]")
        if len(set(modes)) != len(modes):
            raise ConfigurationError("lists a mode twice", path)
        object.__setattr__(self, "ingress", modes)

    def _check_capabilities(self) -> None:
        caps = self.capabilities
        path = f"{self.name}.capabilities"
        if not isinstance(caps, frozenset | set | tuple | list):
            raise ConfigurationError("must be a set of capability names", path)
        unknown = sorted(str(c) for c in caps if c not in CAPABILITIES)
        if unknown:
            raise ConfigurationError(
                f"unknown capability {unknown[0]!r} (known: {', '.join(CAPABILITIES)})", path
            )
        has_presentation = "presentation" in caps
        if has_presentation != (self.renderer is not None):
            raise ConfigurationError(
                '"presentation" is listed exactly when a renderer and sender are given', path
            )
        object.__setattr__(self, "capabilities", frozenset(caps))

    # -- reading ------------------------------------------------------------------------
    @property
    def is_chat(self) -> bool:
        """True for a chat platform (one `channelkit serve` runs)."""
        return self.kind == CHAT

    @property
    def default_ingress(self) -> str | None:
        """The first ingress mode (None for a presentation-only platform)."""
        return self.ingress[0] if self.ingress else None

    @property
    def credential_keys(self) -> tuple[str, ...]:
        """The keys `channels[i].credentials` may hold."""
        schema = self.credentials_schema or {}
        return tuple(schema.get("properties", {}))

    def named_settings(self, settings: Mapping[str, Any], name: str) -> dict[str, Any]:
        """`settings` with the channel's name under `name_setting` (if the platform has
        one): the mapping `build_config` takes."""
        data = dict(settings)
        if self.name_setting is not None:
            data[self.name_setting] = name
        return data

    def build_config(self, settings: Mapping[str, Any], *, name: str | None = None) -> Any:
        """The platform config of one `channels[i]` entry: `settings` are its credentials
        and options merged (keys as the document spells them), with `name` (if given)
        added as `named_settings` does. Errors are the config's own
        `ConfigurationError`s (their path names the platform field, e.g.
        `slack.bot_token`)."""
        if not self.is_chat:
            raise ConfigurationError(f"{self.name} is presentation-only", "platform")
        data: Mapping[str, Any] = settings if name is None else self.named_settings(settings, name)
        if self.settings_case == "snake":
            data = {_snake_key(key): value for key, value in data.items()}
        if self.parse_config is not None:
            return self.parse_config.load()(data)
        assert self.config_class is not None  # a chat platform has one
        cls = self.config_class.load()
        from channelkit.platforms.common.config import settings_kwargs

        required = [
            f.name
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        return cls(**settings_kwargs(cls, data, self.name, required=required))


_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def _snake_key(key: str) -> str:
    return _CAMEL.sub("_", key).lower()


def _check_credentials(schema: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    path = f"{name}.credentials_schema"
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        raise ConfigurationError('must be a JSON Schema with "type": "object"', path)
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        raise ConfigurationError("must list the credentials under properties", path)
    required = schema.get("required", [])
    missing = [key for key in required if key not in properties]
    if missing:
        raise ConfigurationError(f"requires {missing[0]!r}, which properties lack", path)
    return MappingProxyType(dict(schema))


# -- the registry ---------------------------------------------------------------------------
class _Registry(Mapping[str, PlatformSpec]):
    """The read-only mapping `PLATFORMS`: copy-on-write under a lock, so a reader always
    iterates one consistent snapshot (registration order)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._specs: dict[str, PlatformSpec] = {}

    def __getitem__(self, name: str) -> PlatformSpec:
        return self._specs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._specs))

    def __len__(self) -> int:
        return len(self._specs)

    def __repr__(self) -> str:
        return f"PLATFORMS({', '.join(self._specs)})"

    def _put(self, spec: PlatformSpec, *, replace: bool) -> PlatformSpec | None:
        with self._lock:
            previous = self._specs.get(spec.name)
            if previous is not None and not replace:
                raise ConfigurationError(
                    "is already registered (undo its registration first, or pass replace=True)",
                    f"platforms.{spec.name}",
                )
            specs = dict(self._specs)
            specs[spec.name] = spec
            self._specs = specs
            return previous

    def _restore(self, spec: PlatformSpec, previous: PlatformSpec | None) -> bool:
        with self._lock:
            if self._specs.get(spec.name) is not spec:
                return False  # replaced or removed since: leave the newer entry alone
            specs = dict(self._specs)
            if previous is None:
                del specs[spec.name]
            else:
                specs[spec.name] = previous
            self._specs = specs
            return True


#: Every registered platform by name, in registration order (read-only).
PLATFORMS: Mapping[str, PlatformSpec] = _Registry()


class Registration:
    """The handle `register_platform` returns: `undo()` removes the entry (or restores
    the one it replaced); as a context manager it undoes on exit."""

    def __init__(self, spec: PlatformSpec, previous: PlatformSpec | None) -> None:
        self.spec = spec
        self._previous = previous
        self._lock = threading.Lock()
        self._done = False

    def undo(self) -> bool:
        """Remove the registration (once; later calls do nothing). False when another
        registration replaced this one since (that one is kept)."""
        with self._lock:
            if self._done:
                return False
            self._done = True
        registry = PLATFORMS
        assert isinstance(registry, _Registry)
        return registry._restore(self.spec, self._previous)

    def __enter__(self) -> PlatformSpec:
        return self.spec

    def __exit__(self, *exc: object) -> None:
        self.undo()


def register_platform(spec: PlatformSpec, *, replace: bool = False) -> Registration:
    """Add `spec` to `PLATFORMS` (every entry point sees it from then on).

    A name already registered is a `ConfigurationError` (path `platforms.<name>`) unless
    `replace` is true. Returns a `Registration`: `undo()` takes the entry back out (or
    puts the replaced one back); `with register_platform(spec): ...` does so on exit.
    """
    if not isinstance(spec, PlatformSpec):
        raise ConfigurationError("must be a PlatformSpec", "spec")
    registry = PLATFORMS
    assert isinstance(registry, _Registry)
    return Registration(spec, registry._put(spec, replace=replace))


def get_platform(name: str) -> PlatformSpec:
    """The spec of `name`; a `ConfigurationError` (path `platform`) naming the known ones."""
    spec = PLATFORMS.get(name)
    if spec is None:
        raise ConfigurationError(
            f"unknown platform {name!r} (known: {', '.join(PLATFORMS)})", "platform"
        )
    return spec


def platform_offers(name: str, capability: str) -> bool:
    """True when the registered platform `name` lists `capability` (one of
    `CAPABILITIES`, else a `ConfigurationError` naming the known ones); a platform not
    registered offers none. A platform's channel reads what the core needs from it this
    way (e.g. `"threads"`), so the registry stays the one place that says it."""
    if capability not in CAPABILITIES:
        raise ConfigurationError(
            f"unknown capability {capability!r} (known: {', '.join(CAPABILITIES)})",
            "capability",
        )
    spec = PLATFORMS.get(name)
    return spec is not None and capability in spec.capabilities


def chat_platforms() -> tuple[PlatformSpec, ...]:
    """The registered chat platforms, in registration order."""
    return tuple(spec for spec in PLATFORMS.values() if spec.is_chat)
