"""Feishu adapter configuration.

`FeishuConfig` is a frozen dataclass validated on construction; every
`ConfigurationError` names the offending field path
(``feishu.language``, ``feishu.forms.timeout_ms``). `FeishuConfig.from_dict()`
parses a plain mapping (JSON/YAML) with the same checks and rejects unknown keys.

``ingress`` picks how Feishu reaches the bot, and must match the app's subscription mode
in the Feishu console: ``"http"`` (the default: events and card actions POSTed to the
app's ``/feishu/events`` and ``/feishu/card``; ``verification_token`` required) or
``"websocket"`` (the long connection the bot opens, no public URL; needs the
``feishu-ws`` extra; no verification token or encrypt key is used).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Literal

from channelkit.errors import ConfigurationError
from channelkit.platforms.common.config import (
    check_http_url,
    check_positive_seconds,
    register_secrets,
    secret_repr,
    settings_kwargs,
)

__all__ = [
    "INGRESS_MODES",
    "LANGUAGES",
    "FeishuConfig",
    "FeishuFormsConfig",
    "Language",
    "card_language",
]

Language = Literal["zh", "en", "de"]
LANGUAGES: tuple[str, ...] = ("zh", "en", "de")
#: catalog locale -> the Feishu card language showing its texts
_CARD_LANGUAGES: dict[str, Language] = {"zh-CN": "zh", "en": "en", "de": "de"}


def card_language(language: Language, locale: str | None) -> Language:
    """The language of Feishu's cards: the channel's ``locale`` when it is set (``zh-CN``
    -> ``zh``), else ``feishu.language`` as configured (default ``zh``)."""
    if locale is None:
        return language
    return _CARD_LANGUAGES.get(locale, language)


#: How Feishu reaches the bot (``ingress``); the first is the default.
INGRESS_MODES: tuple[str, ...] = ("http", "websocket")

#: Default question-card lifetime (design: 270 s, below the host permission lifetime).
DEFAULT_QUESTION_TIMEOUT_MS = 270_000


@dataclass(frozen=True)
class FeishuFormsConfig:
    """Native question forms (``present_user_input_request``).

    ``enabled=False`` keeps streaming output but answers every structured question with
    the shared text permission prompt (the adapter returns UNSUPPORTED).
    """

    enabled: bool = True
    timeout_ms: int = DEFAULT_QUESTION_TIMEOUT_MS
    custom_text: bool = True

    @property
    def timeout_s(self) -> float:
        """The form's configured lifetime in seconds (``timeoutMs`` in JSON)."""
        return self.timeout_ms / 1000.0

    def __post_init__(self) -> None:
        _validate_forms(self, "feishu.forms")


@dataclass(frozen=True)
class FeishuConfig:
    """Everything the Feishu adapter needs.

    ``app_id``/``app_secret`` obtain the tenant access token. ``verification_token`` is
    compared with every callback's token (required with ``ingress="http"``);
    ``encrypt_key`` (optional) turns on body decryption and ``X-Lark-Signature``
    verification. ``language`` selects the card strings (``zh`` default, ``en``, ``de``).
    ``ingress``: ``"http"`` (default, callbacks) or ``"websocket"`` (the long connection).
    ``run_journal``: a file recording the people's runs in progress when no state store
    is shared (with ``state.redis`` the store holds them): after a crash (``kill -9``) the
    restarted process tells each person whose run was cut off that it was interrupted
    (`channelkit.platforms.common.run_journal`). ``None`` (default): without a store
    nothing is recorded.
    """

    app_id: str
    app_secret: str = field(repr=False)
    verification_token: str = field(default="", repr=False)
    encrypt_key: str | None = field(default=None, repr=False)
    language: Language = "zh"
    forms: FeishuFormsConfig = field(default_factory=FeishuFormsConfig)
    #: Stream through CardKit card entities; False (or CardKit failing) uses IM PATCH.
    cardkit: bool = True
    #: The reaction added to the user's message while a run is active; "" disables it.
    reaction: str = "OnIt"
    base_url: str = "https://open.feishu.cn"
    #: Accept callback timestamps at most this far from the local wall clock.
    max_clock_skew_s: float = 300.0
    #: Card header title (``None`` uses the language's default).
    title: str | None = None
    #: ``"http"`` (callbacks to the app's URLs) or ``"websocket"`` (the long connection).
    ingress: Literal["http", "websocket"] = "http"
    #: Without a state store: the file recording the runs in progress (see above).
    run_journal: str | None = None
    #: The bot's own ``open_id``: in groups only a structured mention of it addresses the
    #: bot. ``None``: any mention of a person or bot (never ``@_all``) does.
    bot_open_id: str | None = None

    def __post_init__(self) -> None:
        register_secrets(self.app_secret, self.verification_token, self.encrypt_key)
        _validate(self, "feishu")

    def __repr__(self) -> str:
        """The settings with every secret shown as ``***`` (or left out)."""
        return secret_repr(self, ("app_secret", "verification_token", "encrypt_key"))

    __str__ = __repr__

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str = "feishu") -> FeishuConfig:
        """Build a config from a plain mapping; errors name the field (``feishu.x``)."""
        values = settings_kwargs(
            cls,
            data,
            path,
            required=(
                ("app_id", "app_secret", "verification_token")
                if not isinstance(data, Mapping) or data.get("ingress", "http") == "http"
                else ("app_id", "app_secret")  # websocket (or a bad ingress, named below)
            ),
            camel=False,
        )
        forms = values.get("forms")
        if isinstance(forms, Mapping):
            forms = settings_kwargs(FeishuFormsConfig, forms, f"{path}.forms", camel=False)
            probe_forms = _probe(FeishuFormsConfig, forms)
            _validate_forms(probe_forms, f"{path}.forms")
            values["forms"] = FeishuFormsConfig(**dict(forms))
        elif forms is not None and not isinstance(forms, FeishuFormsConfig):
            raise ConfigurationError("must be an object", f"{path}.forms")
        _validate(_probe(cls, values), path)
        return cls(**values)


def _probe(cls: Any, values: Mapping[str, Any]) -> Any:
    """An instance of dataclass ``cls`` filled without running ``__post_init__``."""
    obj = cls.__new__(cls)
    for f in fields(cls):
        if f.name in values:
            value = values[f.name]
        elif f.default_factory is not MISSING:
            value = f.default_factory()
        else:
            value = f.default
        object.__setattr__(obj, f.name, value)
    return obj


def _require_str(value: Any, path: str, *, allow_empty: bool = False) -> None:
    if not isinstance(value, str):
        raise ConfigurationError("must be a string", path)
    if not allow_empty and not value.strip():
        raise ConfigurationError("must not be empty", path)


def _validate_forms(forms: FeishuFormsConfig, path: str) -> None:
    if not isinstance(forms.enabled, bool):
        raise ConfigurationError("must be a boolean", f"{path}.enabled")
    if not isinstance(forms.custom_text, bool):
        raise ConfigurationError("must be a boolean", f"{path}.custom_text")
    timeout = forms.timeout_ms
    if isinstance(timeout, bool) or not isinstance(timeout, int):
        raise ConfigurationError("must be an integer (milliseconds)", f"{path}.timeout_ms")
    if timeout < 1_000 or timeout > 3_600_000:
        raise ConfigurationError("must be between 1000 and 3600000", f"{path}.timeout_ms")


def _validate(cfg: FeishuConfig, path: str) -> None:
    _require_str(cfg.app_id, f"{path}.app_id")
    _require_str(cfg.app_secret, f"{path}.app_secret")
    if cfg.ingress not in INGRESS_MODES:
        raise ConfigurationError(
            f"must be one of {', '.join(INGRESS_MODES)} (got {cfg.ingress!r})", f"{path}.ingress"
        )
    if cfg.ingress == "http" or cfg.verification_token:
        _require_str(cfg.verification_token, f"{path}.verification_token")
    if cfg.encrypt_key is not None:
        _require_str(cfg.encrypt_key, f"{path}.encrypt_key")
    if cfg.run_journal is not None:
        _require_str(cfg.run_journal, f"{path}.run_journal")
    if cfg.bot_open_id is not None:
        _require_str(cfg.bot_open_id, f"{path}.bot_open_id")
    if cfg.language not in LANGUAGES:
        raise ConfigurationError(f"must be one of {', '.join(LANGUAGES)}", f"{path}.language")
    if not isinstance(cfg.forms, FeishuFormsConfig):
        raise ConfigurationError("must be a FeishuFormsConfig or an object", f"{path}.forms")
    if not isinstance(cfg.cardkit, bool):
        raise ConfigurationError("must be a boolean", f"{path}.cardkit")
    _require_str(cfg.reaction, f"{path}.reaction", allow_empty=True)
    _require_str(cfg.base_url, f"{path}.base_url")
    check_http_url(cfg.base_url, f"{path}.base_url")
    check_positive_seconds(cfg.max_clock_skew_s, f"{path}.max_clock_skew_s")
    if cfg.title is not None:
        _require_str(cfg.title, f"{path}.title")
