"""Channel configuration (validated; errors name the field)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from channelkit.core.access import AccessConfig
from channelkit.core.busy import BUSY_MODES, MAX_COLLECT_WINDOW, BusyMode
from channelkit.core.catalog import check_locale
from channelkit.core.types import SessionScope
from channelkit.errors import ConfigurationError

__all__ = ["DEFAULT_MAX_CONCURRENT_RUNS", "MAX_API_POOL_SIZE", "ChannelConfig"]

#: Agent runs executing at once by default: enough for a team; each costs one thread.
DEFAULT_MAX_CONCURRENT_RUNS = 64
#: The most connections per host a platform API client keeps (`ChannelConfig.api_pool_size`).
MAX_API_POOL_SIZE = 128


@dataclass
class ChannelConfig:
    """Settings shared by every channel adapter.

    * ``name`` - channel name (``SessionTarget.channel_name``), non-blank.
    * ``session_scope`` - ``"user"`` (one session per sender per chat), ``"chat"`` (one
      shared session per chat) or ``"thread"`` (one shared session per thread; a group
      message outside any thread is the group's own conversation). None (default): a
      direct message is ``"user"``; a group message is ``"thread"`` where the platform
      has threads (its registry entry lists the ``"threads"`` capability: Slack,
      Telegram forum topics, Feishu, Discord), else ``"user"``. A configured scope
      applies to every message. See `channelkit.core.sessions.SessionRouter`.
    * ``model`` - optional model name adapters may show (never inferred).
    * ``permission_timeout`` - seconds a pending permission/question stays answerable
      (the host permission lifetime); on expiry it is answered ``cancelled``.
    * ``authorized_senders`` - in shared sessions, who may answer permissions and
      /cancel (None = everyone in the chat).
    * ``max_workers`` - size of the hook pool (hooks, card writes, deferred ingress
      work, timer callbacks) when ChannelBase creates it; >= 1. Runs never use it.
    * ``max_concurrent_runs`` - agent runs executing at once (default 64). Runs have
      their own pool; a run waiting on a person (question, permission) does not count.
    * ``max_queued_runs`` - runs waiting for a slot, in all (default 1,000);
      ``max_queued_per_owner`` (default 5) and ``max_queued_per_chat`` (default 100)
      bound one person's and one chat's share. A person over a bound is told "busy".
    * ``cancel_timeout`` / ``delivery_timeout`` / ``respond_timeout`` - bounds (seconds)
      for the cancel RPC, final delivery and waiting for an in-flight respond.
    * ``last_answer_max_age`` - how long each conversation's last answer is kept for
      ``/last`` (seconds, default 24 h).
    * ``max_pending_permissions`` - live pending-request cap (oldest cancelled beyond).
    * ``busy`` - what a person's message does while their conversation's run is still
      going: ``"queue"`` (default: it waits, the person sees a queue notice at once),
      ``"interrupt"`` (the running run is cancelled, the new message starts),
      ``"collect"`` (messages within ``collect_window`` seconds, default 1.5, or while
      a run is busy are joined into the next turn) or ``"steer"`` (the text is handed
      to the running turn where the agent can take it, else queued). See
      `channelkit.core.busy`.
    * ``access`` - who may talk to the bot, and where (`AccessConfig`, or its
      camelCase mapping as in the configuration file); default: anyone, anywhere.
    * ``locale`` - the language of the texts the SDK shows people (``"en"``,
      ``"zh-CN"``, ``"de"``, or a tag of their language such as ``"zh"``/``"de-AT"``;
      stored resolved). None (default): English, except Feishu, which keeps its
      ``language`` setting. A person whose platform tells their language sees theirs
      (see `channelkit.core.catalog` and ``docs/language.md``).
    """

    name: str
    session_scope: SessionScope | str | None = None
    model: str | None = None
    permission_timeout: float = 300.0
    authorized_senders: frozenset[str] | None = None
    max_workers: int = 16
    max_concurrent_runs: int | None = None
    max_queued_runs: int = 1000
    max_queued_per_owner: int = 5
    max_queued_per_chat: int = 100
    cancel_timeout: float = 3.0
    delivery_timeout: float = 60.0
    respond_timeout: float = 30.0
    last_answer_max_age: float = 86400.0
    max_pending_permissions: int = 1000
    busy: BusyMode | str = BusyMode.QUEUE
    collect_window: float = 1.5
    access: AccessConfig | Mapping[str, Any] = field(default_factory=AccessConfig)
    locale: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigurationError("must be a non-blank string", path="name")
        try:
            if self.session_scope is not None:
                self.session_scope = SessionScope(self.session_scope)
        except ValueError:
            raise ConfigurationError(
                f"must be one of {[s.value for s in SessionScope]} or None (the default), "
                f"got {self.session_scope!r}",
                path="session_scope",
            ) from None
        if self.model is not None and (not isinstance(self.model, str) or not self.model.strip()):
            raise ConfigurationError("must be a non-blank string or None", path="model")
        for name in (
            "permission_timeout",
            "cancel_timeout",
            "delivery_timeout",
            "respond_timeout",
            "last_answer_max_age",
        ):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value <= 0
            ):
                raise ConfigurationError(
                    f"must be a positive finite number, got {value!r}", path=name
                )
        if isinstance(self.max_workers, bool) or not isinstance(self.max_workers, int):
            raise ConfigurationError("must be an integer", path="max_workers")
        if self.max_workers < 1:
            raise ConfigurationError("must be >= 1", path="max_workers")
        if self.max_concurrent_runs is None:
            self.max_concurrent_runs = DEFAULT_MAX_CONCURRENT_RUNS
        for name in (
            "max_concurrent_runs",
            "max_queued_runs",
            "max_queued_per_owner",
            "max_queued_per_chat",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"must be a positive integer, got {value!r}", path=name)
        if (
            isinstance(self.max_pending_permissions, bool)
            or not isinstance(self.max_pending_permissions, int)
            or self.max_pending_permissions < 1
        ):
            raise ConfigurationError("must be a positive integer", path="max_pending_permissions")
        try:
            self.busy = BusyMode(self.busy)
        except ValueError:
            raise ConfigurationError(
                f"must be one of {list(BUSY_MODES)}, got {self.busy!r}", path="busy"
            ) from None
        window = self.collect_window
        if (
            isinstance(window, bool)
            or not isinstance(window, int | float)
            or not math.isfinite(window)
            or not 0 < window <= MAX_COLLECT_WINDOW
        ):
            raise ConfigurationError(
                f"must be seconds in (0, {MAX_COLLECT_WINDOW:g}], got {window!r}",
                path="collect_window",
            )
        senders: object = self.authorized_senders
        if senders is not None:
            if isinstance(senders, str) or not isinstance(senders, Iterable):
                raise ConfigurationError("must be a collection of sender ids", "authorized_senders")
            self.authorized_senders = frozenset(str(s) for s in senders)
        self.access = AccessConfig.from_mapping(self.access)
        if self.locale is not None:
            self.locale = check_locale(self.locale, "locale")

    @property
    def access_policy(self) -> AccessConfig:
        """``access`` as an `AccessConfig` (it is one after construction)."""
        access = self.access
        return access if isinstance(access, AccessConfig) else AccessConfig.from_mapping(access)

    @property
    def api_pool_size(self) -> int:
        """Connections per host the channel's platform API client keeps open.

        Platform calls are made at once by up to ``max_workers`` hook workers and up to
        ``max_concurrent_runs`` run threads (a run's final card or message write goes
        out from its own thread), so the pool holds ``max_workers + max_concurrent_runs``
        connections, at most `MAX_API_POOL_SIZE` (128). A call made while every pooled
        connection is busy still goes out, on a connection opened for it and closed
        after it (one more TCP and TLS handshake). Each adapter passes this size to the
        platform API it builds."""
        runs = self.max_concurrent_runs or DEFAULT_MAX_CONCURRENT_RUNS
        return min(self.max_workers + runs, MAX_API_POOL_SIZE)

    @property
    def scope(self) -> SessionScope | None:
        """The configured ``session_scope`` (None: picked per message, see above)."""
        return None if self.session_scope is None else SessionScope(self.session_scope)

    @property
    def shared_sessions(self) -> bool:
        """True when the configured scope makes several senders share one session
        (``chat``/``thread``). With no scope configured it depends on the message: ask
        the channel's `SessionRouter.shared` (``channel.router.shared(target)``)."""
        scope = self.scope
        return scope is not None and scope is not SessionScope.USER
