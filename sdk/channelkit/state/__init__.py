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

if TYPE_CHECKING:
    from channelkit.state.redis import RedisStore

__all__ = [
    "DEFAULT_NAMESPACE",
    "MemoryStore",
    "RedisStore",
    "StateStore",
    "open_store",
    "redact_url",
]

_REDIS_KEYS = frozenset({"url", "namespace", "socketTimeoutSeconds"})


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
    extra = sorted(set(redis_spec) - _REDIS_KEYS)
    if extra:
        known = ", ".join(sorted(_REDIS_KEYS))
        raise ConfigurationError(f"unknown key {extra[0]!r} (known: {known})", "state.redis")
    url = redis_spec.get("url")
    if not isinstance(url, str) or not url.startswith(("redis://", "rediss://", "unix://")):
        raise ConfigurationError("must be a redis://, rediss:// or unix:// URL", "state.redis.url")
    timeout = redis_spec.get("socketTimeoutSeconds", 1.0)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 60:
        raise ConfigurationError("must be a number in (0, 60]", "state.redis.socketTimeoutSeconds")
    ns = _namespace(spec, redis_spec, namespace, "state.redis.namespace")
    from channelkit.state.redis import RedisStore

    return RedisStore(url, namespace=ns, socket_timeout_s=float(timeout), clock=clock)


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
