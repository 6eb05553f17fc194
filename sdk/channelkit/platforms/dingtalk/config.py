"""DingTalk adapter configuration.

Only this adapter reads ``interactiveCards``; it is parsed and validated here::

    {"interactiveCards": {"enabled": true,
                          "statusCard": {"enabled": true},
                          "questionCard": {"enabled": true, "timeoutMs": 270000}}}

Omitting ``interactiveCards`` leaves cards off; an object (even ``{}``) turns them on
with both card types enabled. Invalid values raise
`ConfigurationError` whose ``path`` names the field.

``ingress`` picks how DingTalk reaches the bot: ``"stream"`` (the default: an outbound
Stream mode WebSocket, no public URL; cards ask for ``STREAM`` callbacks) or ``"http"``
(robot and card callbacks POSTed to the app's ``/dingtalk/robot`` and ``/dingtalk/card``;
cards ask for ``HTTP`` callbacks under ``cardCallbackRouteKey``, which is then required
whenever interactive cards are on).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from channelkit.errors import ConfigurationError
from channelkit.platforms.common.config import register_secrets, secret_repr

__all__ = [
    "DEFAULT_HOST_PERMISSION_TIMEOUT_MS",
    "DEFAULT_QUESTION_TIMEOUT_MS",
    "INGRESS_MODES",
    "MAX_TIMEOUT_MS",
    "DingtalkConfig",
    "InteractiveCardConfig",
    "QuestionCardConfig",
    "StatusCardConfig",
    "parse_interactive_cards",
]

#: Default question card lifetime.
DEFAULT_QUESTION_TIMEOUT_MS = 270_000
#: How long the host (agent bridge) keeps a permission request open by default.
DEFAULT_HOST_PERMISSION_TIMEOUT_MS = 300_000
#: Timeouts above this are clamped.
MAX_TIMEOUT_MS = 2_147_483_647
#: How DingTalk reaches the bot (``ingress``); the first is the default.
INGRESS_MODES = ("stream", "http")


@dataclass(frozen=True)
class StatusCardConfig:
    """``interactiveCards.statusCard``."""

    enabled: bool = True


@dataclass(frozen=True)
class QuestionCardConfig:
    """``interactiveCards.questionCard``; ``timeout_ms`` is the configured card lifetime."""

    enabled: bool = True
    timeout_ms: int = DEFAULT_QUESTION_TIMEOUT_MS

    @property
    def timeout_s(self) -> float:
        """The configured card lifetime in seconds (``timeoutMs`` in JSON)."""
        return self.timeout_ms / 1000.0


@dataclass(frozen=True)
class InteractiveCardConfig:
    """``interactiveCards``: the master switch and the two card types."""

    enabled: bool = False
    status_card: StatusCardConfig = field(default_factory=StatusCardConfig)
    question_card: QuestionCardConfig = field(default_factory=QuestionCardConfig)


def _fail(message: str, path: str) -> ConfigurationError:
    return ConfigurationError(message, path=path)


def _bool(section: Mapping[str, Any], key: str, path: str, default: bool) -> bool:
    if key not in section or section[key] is None:
        return default
    value = section[key]
    if not isinstance(value, bool):
        raise _fail(
            f"DingTalk interactiveCards.{path} must be a boolean.", f"interactiveCards.{path}"
        )
    return value


def _section(root: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    if key not in root or root[key] is None:
        return {}
    value = root[key]
    if not isinstance(value, Mapping):
        raise _fail(
            f"DingTalk interactiveCards.{key} must be an object.", f"interactiveCards.{key}"
        )
    return value


def parse_interactive_cards(value: Any) -> InteractiveCardConfig:
    """Parse and validate the ``interactiveCards`` object (None means omitted)."""
    if value is None:
        return InteractiveCardConfig()
    if isinstance(value, InteractiveCardConfig):
        return value
    if not isinstance(value, Mapping):
        raise _fail("DingTalk interactiveCards must be an object.", "interactiveCards")
    enabled = _bool(value, "enabled", "enabled", True)
    status = _section(value, "statusCard")
    question = _section(value, "questionCard")
    status_enabled = _bool(status, "enabled", "statusCard.enabled", True)
    question_enabled = _bool(question, "enabled", "questionCard.enabled", True)
    timeout: Any = question.get("timeoutMs", DEFAULT_QUESTION_TIMEOUT_MS)
    if timeout is None:
        timeout = DEFAULT_QUESTION_TIMEOUT_MS
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise _fail(
            "DingTalk interactiveCards.questionCard.timeoutMs must be a finite positive number.",
            "interactiveCards.questionCard.timeoutMs",
        )
    return InteractiveCardConfig(
        enabled=enabled,
        status_card=StatusCardConfig(enabled=status_enabled),
        question_card=QuestionCardConfig(
            enabled=question_enabled, timeout_ms=int(min(timeout, MAX_TIMEOUT_MS))
        ),
    )


@dataclass(frozen=True)
class DingtalkConfig:
    """Everything the DingTalk adapter needs.

    ``client_id``/``client_secret`` are the app's AppKey/AppSecret (the robot code is the
    client id). ``client_secret`` also verifies the robot callback ``sign``;
    ``card_callback_secret`` (the ``apiSecret`` given when the card callback URL was
    registered) verifies card callbacks - when it is None card callbacks are not
    signature-checked; ``card_callback_route_key`` is the ``callbackRouteKey`` registered
    for the ``/dingtalk/card`` URL. ``ingress`` is ``"stream"`` (default: a Stream mode
    connection; cards ask for ``STREAM`` callbacks and the route key is not used) or
    ``"http"`` (the web routes; cards ask for ``HTTP`` callbacks under the route key,
    required when interactive cards are on). ``model`` is shown on status cards.
    ``block_streaming`` True disables status cards only. ``host_permission_timeout_ms`` is
    how long the agent host keeps a permission request open; question cards live at
    most that long. ``run_journal``: without a state store, a file recording the people's
    runs in progress: after a crash (``kill -9``) the restarted process tells each person
    whose run was cut off that it was interrupted
    (`channelkit.platforms.common.run_journal`; with a store the cluster's leases do
    it). ``None`` (default): without a store nothing is recorded.
    """

    client_id: str
    client_secret: str
    name: str = "dingtalk"
    model: str | None = None
    block_streaming: bool = False
    interactive_cards: InteractiveCardConfig = field(default_factory=InteractiveCardConfig)
    card_callback_secret: str | None = None
    card_callback_route_key: str | None = None
    host_permission_timeout_ms: int = DEFAULT_HOST_PERMISSION_TIMEOUT_MS
    api_base_url: str = "https://api.dingtalk.com"
    robot_max_skew_seconds: float = 3600.0
    request_timeout: float = 10.0
    ingress: str = INGRESS_MODES[0]
    run_journal: str | None = None

    # Python speaks seconds, with an ``_s`` suffix; the constructor keeps the field
    # names above (the platform's own units) for compatibility.
    @property
    def request_timeout_s(self) -> float:
        """Overall deadline of one platform call, in seconds."""
        return float(self.request_timeout)

    @property
    def robot_max_skew_s(self) -> float:
        """Accepted age of a robot message signature, in seconds."""
        return float(self.robot_max_skew_seconds)

    @property
    def host_permission_timeout_s(self) -> float:
        """The host's permission lifetime, in seconds."""
        return self.host_permission_timeout_ms / 1000.0

    def __post_init__(self) -> None:
        register_secrets(self.client_secret, self.card_callback_secret)
        if not isinstance(self.client_id, str) or not self.client_id.strip():
            raise ConfigurationError("must be a non-empty string", path="clientId")
        if not isinstance(self.client_secret, str) or not self.client_secret:
            raise ConfigurationError("must be a non-empty string", path="clientSecret")
        if self.card_callback_secret is not None and (
            not isinstance(self.card_callback_secret, str) or not self.card_callback_secret.strip()
        ):
            # an empty secret would silently turn the card signature check off
            raise ConfigurationError(
                "must be a non-empty string (omit it to accept unsigned card callbacks)",
                path="cardCallbackSecret",
            )
        skew = self.robot_max_skew_seconds
        if isinstance(skew, bool) or not isinstance(skew, int | float) or not 0 < skew < 86_400:
            # NaN fails this too: with NaN every timestamp would pass the skew check
            raise ConfigurationError(
                "must be a number of seconds between 0 and 86400", path="robotMaxSkewSeconds"
            )
        cards: Any = self.interactive_cards
        if not isinstance(cards, InteractiveCardConfig):
            # a plain mapping was given: parse and validate it
            object.__setattr__(self, "interactive_cards", parse_interactive_cards(cards))
        if (
            isinstance(self.host_permission_timeout_ms, bool)
            or not isinstance(self.host_permission_timeout_ms, int)
            or self.host_permission_timeout_ms <= 0
        ):
            raise ConfigurationError("must be a positive integer", path="hostPermissionTimeoutMs")
        if self.ingress not in INGRESS_MODES:
            raise ConfigurationError(
                f'must be "stream" or "http" (got {self.ingress!r})', path="ingress"
            )
        journal = self.run_journal
        if journal is not None and (not isinstance(journal, str) or not journal.strip()):
            raise ConfigurationError("must be a non-empty string (a file path)", path="runJournal")
        route_key = self.card_callback_route_key
        if route_key is not None and (not isinstance(route_key, str) or not route_key.strip()):
            raise ConfigurationError("must be a non-empty string", path="cardCallbackRouteKey")
        if self.ingress == "http" and self.interactive_cards.enabled and not route_key:
            # HTTP card callbacks reach the app only under a registered route key
            raise ConfigurationError(
                'is required with "ingress": "http" when interactiveCards are on (the '
                "callbackRouteKey registered for the /dingtalk/card URL)",
                path="cardCallbackRouteKey",
            )

    # -- derived switches ---------------------------------------------------------------
    @property
    def stream(self) -> bool:
        """Stream mode: DingTalk reaches the bot over the outbound WebSocket."""
        return self.ingress == "stream"

    @property
    def card_callback_type(self) -> str:
        """The ``callbackType`` cards are created with: ``STREAM`` or ``HTTP``."""
        return "STREAM" if self.stream else "HTTP"

    @property
    def status_cards_enabled(self) -> bool:
        """Status cards are on: cards enabled, status card enabled, block streaming off."""
        cards = self.interactive_cards
        return cards.enabled and cards.status_card.enabled and not self.block_streaming

    @property
    def question_cards_enabled(self) -> bool:
        """Question cards are on (block streaming does not affect them)."""
        cards = self.interactive_cards
        return cards.enabled and cards.question_card.enabled

    @property
    def question_timeout_seconds(self) -> float:
        """Effective question lifetime: min(configured timeout, host permission lifetime)."""
        ms = min(self.interactive_cards.question_card.timeout_ms, self.host_permission_timeout_ms)
        return ms / 1000.0

    def __repr__(self) -> str:
        """The settings with every secret shown as ``***`` (or left out)."""
        return secret_repr(self, ("client_secret", "card_callback_secret"))

    __str__ = __repr__

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DingtalkConfig:
        """Build from a JSON-style mapping (camelCase keys as in the channel config)."""
        if not isinstance(data, Mapping):
            raise ConfigurationError("DingTalk configuration must be an object.", path="dingtalk")

        def pick(*names: str, default: Any = None) -> Any:
            for name in names:
                if name in data and data[name] is not None:
                    return data[name]
            return default

        block = pick("blockStreaming", "block_streaming", default=False)
        if isinstance(block, str):
            if block not in ("on", "off"):
                raise ConfigurationError('must be "on", "off" or a boolean', path="blockStreaming")
            block = block == "on"
        if not isinstance(block, bool):
            raise ConfigurationError('must be "on", "off" or a boolean', path="blockStreaming")
        model = pick("model")
        if model is not None and not isinstance(model, str):
            raise ConfigurationError("must be a string", path="model")
        secret = pick("cardCallbackSecret", "card_callback_secret")
        if secret is not None and not isinstance(secret, str):
            raise ConfigurationError("must be a string", path="cardCallbackSecret")
        return cls(
            client_id=pick("clientId", "client_id", default=""),
            client_secret=pick("clientSecret", "client_secret", default=""),
            name=pick("name", default="dingtalk"),
            model=model.strip() or None if isinstance(model, str) else None,
            block_streaming=block,
            interactive_cards=parse_interactive_cards(
                pick("interactiveCards", "interactive_cards")
            ),
            card_callback_secret=secret,
            card_callback_route_key=pick("cardCallbackRouteKey", "card_callback_route_key"),
            host_permission_timeout_ms=pick(
                "hostPermissionTimeoutMs",
                "host_permission_timeout_ms",
                default=DEFAULT_HOST_PERMISSION_TIMEOUT_MS,
            ),
            api_base_url=pick("apiBaseUrl", "api_base_url", default="https://api.dingtalk.com"),
            ingress=pick("ingress", default=INGRESS_MODES[0]),
            run_journal=pick("runJournal", "run_journal"),
        )
