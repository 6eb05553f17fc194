"""The ``state`` section as the channels of ``load_config`` / ``channelkit serve`` use it.

With ``state.redis`` every DingTalk channel built from the configuration gets a
`RedisStore` (card callbacks routed to the instance that owns
the run, leases, recovery: `channelkit.platforms.dingtalk.cluster`). The lease
settings sit beside ``redis``::

    "state": {
      "redis": {"url": {"env": "REDIS_URL"}},
      "leaseRenewSeconds": 5,      # how often an instance renews its lease
      "leaseExpirySeconds": 30,    # silence after which the others take over its cards
      "instanceName": "bot-a"      # a stable name: a restart recovers its own cards
    }

``channelkit serve --workers N`` starts N processes of one configuration; worker ``i``
reads its index from `WORKER_ENV` and names itself ``<instanceName>-w<i>`` (when
an ``instanceName`` is set), so each restarted worker recovers what it left behind.
Which channels get the store, and how, is each platform's ``shared_store`` in the
registry (``channelkit.platforms.PLATFORMS``): ``"cluster"`` (DingTalk: the store and
the lease options), ``"dedup"`` (Feishu, Telegram, Weixin, Discord, Slack: an
``update_id`` / ``event_id`` / ``message_id`` reaching two instances starts one run,
`channelkit.platforms.common.shared_dedup`, and the outbound rate-limit buckets are
shared) or ``"none"``. Without ``state.redis``
nothing changes: one process, state in memory.

This module imports nothing from `channelkit.config` (which imports it).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping
from typing import Any

from channelkit.errors import ConfigurationError
from channelkit.platforms.registry import get_platform

__all__ = [
    "LEASE_SCHEMA",
    "WORKER_ENV",
    "build_state_store",
    "check_lease_options",
    "cluster_kwargs",
    "has_shared_store",
    "lease_options",
]

#: ``channelkit serve --workers N`` sets it to the worker's index (0..N-1) in each child.
WORKER_ENV = "CHANNELKIT_SERVE_WORKER"

#: The JSON Schema properties this module adds to the ``state`` section.
LEASE_SCHEMA: dict[str, Any] = {
    "leaseRenewSeconds": {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 3600,
        "description": "how often an instance renews its lease (default 5)",
    },
    "leaseExpirySeconds": {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 86400,
        "description": "an instance silent this long is presumed dead: the others "
        "finalize its cards (default 30; more than leaseRenewSeconds)",
    },
    "resetFailClosedSeconds": {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 86400,
        "description": "after the store comes back empty (restarted or flushed), how long "
        "a delivery sent before that is refused as a possible replay (default: each "
        "platform's redelivery window)",
    },
    "instanceName": {
        "type": "string",
        "pattern": "^[A-Za-z0-9_.-]{1,64}$",
        "description": "a stable name for this instance: at start-up it finalizes the "
        "cards its previous incarnation left",
    },
}

_DEFAULT_RENEW = 5.0
_DEFAULT_EXPIRY = 30.0


def _state(config: Any) -> Mapping[str, Any]:
    raw = getattr(config, "raw", None) or {}
    section = raw.get("state") if isinstance(raw, Mapping) else None
    return section if isinstance(section, Mapping) else {}


def has_shared_store(config: Any) -> bool:
    """True when the configuration names a store every process shares (``state.redis``)."""
    return "redis" in (getattr(config, "state", None) or {})


def check_lease_options(state: Mapping[str, Any]) -> None:
    """Reject lease settings the schema cannot: renewal must come before expiry."""
    renew = float(state.get("leaseRenewSeconds", _DEFAULT_RENEW))
    expiry = float(state.get("leaseExpirySeconds", _DEFAULT_EXPIRY))
    if renew >= expiry:
        path = (
            "state.leaseExpirySeconds"
            if "leaseExpirySeconds" in state
            else ("state.leaseRenewSeconds")
        )
        raise ConfigurationError(
            f"leaseExpirySeconds ({expiry:g}) must be more than leaseRenewSeconds ({renew:g})",
            path,
        )


def lease_options(config: Any, *, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ``cluster_options`` mapping of a DingTalk channel (``ClusterOptions`` keys)."""
    state = _state(config)
    check_lease_options(state)
    env = os.environ if environ is None else environ
    options: dict[str, Any] = {
        "leaseRenewS": float(state.get("leaseRenewSeconds", _DEFAULT_RENEW)),
        "leaseExpiryS": float(state.get("leaseExpirySeconds", _DEFAULT_EXPIRY)),
    }
    name = state.get("instanceName")
    worker = env.get(WORKER_ENV, "")
    if name:
        options["instanceName"] = f"{name}-w{worker}" if worker.isdigit() else str(name)
    return options


def build_state_store(config: Any, *, clock: Any = None) -> Any:
    """The `StateStore` of a `DeploymentConfig`'s ``state``
    section: a RedisStore when ``state.redis`` is set, else a MemoryStore. The namespace
    is ``state.redis.namespace``, else the first channel's name (the bot's name)."""
    from channelkit.platforms.common.store_watch import watch_of
    from channelkit.state import open_store

    store = open_store(config.state, namespace=config.channels[0].name, clock=clock)
    window = _state(config).get("resetFailClosedSeconds")
    if isinstance(window, int | float) and not isinstance(window, bool):
        watch_of(store, clock.time if clock is not None else None).fail_closed_s = float(window)
    return store


def cluster_kwargs(config: Any, platform: str) -> dict[str, Any]:
    """Extra keyword arguments of the ``platform`` channel when ``state.redis`` is set
    (else none), by the platform's ``shared_store`` in the registry: ``store`` and
    ``cluster_options`` for ``"cluster"``, ``store`` (update / event dedup across
    instances; with ``cluster_options`` too where the channel takes them: its run journal's
    lease) for ``"dedup"``, nothing for ``"none"``."""
    mode = get_platform(platform).shared_store
    if not has_shared_store(config) or mode == "none":
        return {}
    if mode == "dedup":
        kwargs: dict[str, Any] = {"store": build_state_store(config)}
        if _takes_cluster_options(platform):  # its run journal keeps a lease in the store
            kwargs["cluster_options"] = lease_options(config)
        return kwargs
    return {"store": build_state_store(config), "cluster_options": lease_options(config)}


def _takes_cluster_options(platform: str) -> bool:
    """Whether ``platform``'s channel class takes ``cluster_options`` (the lease settings)."""
    channel_class = get_platform(platform).channel_class
    if channel_class is None:
        return False
    try:
        parameters = inspect.signature(channel_class.load()).parameters
    except (TypeError, ValueError):
        return False
    return "cluster_options" in parameters


def close_store(channel: Any) -> None:
    """Close the store a channel built by `cluster_kwargs()` holds (idempotent)."""
    cluster = getattr(channel, "cluster", None)
    store = getattr(getattr(cluster, "cluster", None), "store", None)
    if store is None:
        store = getattr(channel, "state_store", None)
    close = getattr(store, "close", None)
    if callable(close):
        close()
