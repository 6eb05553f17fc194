"""Shared state for a bot served by several processes.

``open_store(spec)`` builds the store a deployment configures: ``None`` or ``{}`` gives a
`MemoryStore` (one process); ``{"redis": {"url": "redis://host:6379/0"}}`` gives a
`RedisStore` (every process of the bot shares it). `RedisStore` is
imported on first use: redis-py is the ``redis`` extra (``pip install
'channelkit[redis]'``).

This package sits below ``platforms`` and ``core``: it imports only
``channelkit.runtime`` and ``channelkit.errors``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from channelkit.errors import ConfigurationError
from channelkit.runtime.clock import Clock
from channelkit.state.base import DEFAULT_NAMESPACE, StateStore, check_namespace, redact_url
from channelkit.state.memory import MemoryStore
from channelkit.state.redis_options import check_redis_spec, parse_sentinels

if TYPE_CHECKING:
    from channelkit.state.redis import RedisStore

__all__ = [
    "DEFAULT_NAMESPACE",
    "MemoryStore",
    "RedisStore",
    "StateStore",
    "check_redis_spec",
    "open_store",
    "parse_sentinels",
    "redact_url",
]


def __getattr__(name: str) -> Any:
    if name == "RedisStore":
        from channelkit.state.redis import RedisStore

        return RedisStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_store(
    spec: Mapping[str, Any] | None = None,
    *,
    namespace: str | None = None,
    clock: Clock | None = None,
) -> StateStore:
    """The store ``spec`` (the configuration's ``state`` section) describes.

    The namespace is the spec's ``namespace`` (top level or under ``redis``), else
    ``namespace`` (pass the bot's name), else ``"channelkit"``. Bad specs raise
    `ConfigurationError` naming the path, e.g.
    ``state.redis.url``. Building a `RedisStore` does not contact Redis: call
    ``ping()`` to check it is reachable.
    """
    if not spec:
        return MemoryStore(
            namespace=_namespace(spec, None, namespace, "state.namespace"), clock=clock
        )
    if not isinstance(spec, Mapping):
        raise ConfigurationError("must be an object", "state")
    unknown = sorted(set(spec) - {"redis", "namespace"})
    if unknown:
        raise ConfigurationError(f"unknown key {unknown[0]!r} (known: namespace, redis)", "state")
    redis_spec = spec.get("redis")
    if redis_spec is None:
        return MemoryStore(
            namespace=_namespace(spec, None, namespace, "state.namespace"), clock=clock
        )
    if not isinstance(redis_spec, Mapping):
        raise ConfigurationError("must be an object", "state.redis")
    kwargs = check_redis_spec(redis_spec)
    ns = _namespace(spec, redis_spec, namespace, "state.redis.namespace")
    from channelkit.state.redis import RedisStore

    return RedisStore(namespace=ns, clock=clock, **kwargs)


def _namespace(
    spec: Mapping[str, Any] | None,
    redis_spec: Mapping[str, Any] | None,
    default: str | None,
    path: str,
) -> str:
    value: Any = None
    if redis_spec is not None and "namespace" in redis_spec:
        value = redis_spec["namespace"]
    elif spec and "namespace" in spec:
        value, path = spec["namespace"], "state.namespace"
    else:
        value, path = (default or DEFAULT_NAMESPACE), "namespace"
    try:
        return check_namespace(value)
    except ConfigurationError as exc:
        raise ConfigurationError(str(exc).split(": ", 1)[-1], path) from None
