"""The Redis store's options: a ``state.redis`` section checked field by field (errors
name the option, never a secret's value) and turned into `RedisStore` keyword arguments.
Needs no redis-py and contacts no server."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from channelkit.errors import ConfigurationError

__all__ = ["check_redis_spec", "parse_sentinels"]

_REDIS_KEYS = frozenset(
    {
        "url",
        "namespace",
        "socketTimeoutSeconds",
        "sentinels",
        "sentinelService",
        "sentinelPassword",
        "username",
        "password",
        "tls",
        "tlsCaFile",
        "tlsCertFile",
        "tlsKeyFile",
    }
)
#: ``state.redis`` option -> `RedisStore` keyword (secrets among them: never logged)
_REDIS_KWARGS = {
    "sentinelService": "sentinel_service",
    "sentinelPassword": "sentinel_password",
    "username": "username",
    "password": "password",
    "tlsCaFile": "tls_ca_file",
    "tlsCertFile": "tls_cert_file",
    "tlsKeyFile": "tls_key_file",
}
_MAX_SENTINELS = 64


def check_redis_spec(redis_spec: Mapping[str, Any]) -> dict[str, Any]:
    """Validate a ``state.redis`` section (secrets resolved) and return the `RedisStore`
    keyword arguments it means. Errors name the option, e.g. ``state.redis.sentinels[1]``
    or ``state.redis.tlsCaFile``; a secret's value is never in a message. Contacts no
    server and needs no redis-py."""
    extra = sorted(set(redis_spec) - _REDIS_KEYS)
    if extra:
        known = ", ".join(sorted(_REDIS_KEYS))
        raise ConfigurationError(f"unknown key {extra[0]!r} (known: {known})", "state.redis")
    kwargs: dict[str, Any] = {}
    url = redis_spec.get("url")
    if url is not None or "sentinels" not in redis_spec:
        if not isinstance(url, str) or not url.startswith(("redis://", "rediss://", "unix://")):
            raise ConfigurationError(
                "must be a redis://, rediss:// or unix:// URL (or give sentinels)",
                "state.redis.url",
            )
        kwargs["url"] = url
    timeout = redis_spec.get("socketTimeoutSeconds", 1.0)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 60:
        raise ConfigurationError("must be a number in (0, 60]", "state.redis.socketTimeoutSeconds")
    kwargs["socket_timeout_s"] = float(timeout)
    if "sentinels" in redis_spec:
        addresses = parse_sentinels(
            redis_spec["sentinels"], redis_spec.get("sentinelService"), "state.redis."
        )
        kwargs["sentinels"] = [f"{h}:{p}" for h, p in addresses]
    elif "sentinelService" in redis_spec or "sentinelPassword" in redis_spec:
        name = "sentinelService" if "sentinelService" in redis_spec else "sentinelPassword"
        raise ConfigurationError("needs sentinels", f"state.redis.{name}")
    tls = redis_spec.get("tls", False)
    if not isinstance(tls, bool):
        raise ConfigurationError("must be true or false", "state.redis.tls")
    kwargs["tls"] = tls or (isinstance(url, str) and url.startswith("rediss://"))
    if tls and isinstance(url, str) and url.startswith("unix://"):
        raise ConfigurationError("TLS needs a TCP URL, not unix://", "state.redis.tls")
    for option, keyword in _REDIS_KWARGS.items():
        if option not in redis_spec:
            continue
        value = redis_spec[option]
        if not isinstance(value, str) or not value:
            raise ConfigurationError("must be a non-empty string", f"state.redis.{option}")
        if option.startswith("tls"):
            if not kwargs["tls"]:
                raise ConfigurationError(
                    "needs tls: true (or a rediss:// URL)", f"state.redis.{option}"
                )
            if not os.path.isfile(value):
                raise ConfigurationError(f"no such file: {value!r}", f"state.redis.{option}")
        kwargs[keyword] = value
    if ("tls_cert_file" in kwargs) != ("tls_key_file" in kwargs):
        missing = "tlsKeyFile" if "tls_cert_file" in kwargs else "tlsCertFile"
        raise ConfigurationError(
            "a client certificate needs both tlsCertFile and tlsKeyFile", f"state.redis.{missing}"
        )
    return kwargs


def parse_sentinels(sentinels: Any, service: Any, prefix: str = "") -> list[tuple[str, int]]:
    """``host:port`` strings as ``(host, port)`` pairs (an IPv6 host in brackets), with
    the service name they must come with; errors name ``<prefix>sentinels[i]`` or
    ``<prefix>sentinelService`` (``prefix`` ``""``: the keyword names)."""
    names = ("sentinels", "sentinelService") if prefix else ("sentinels", "sentinel_service")
    where, service_path = prefix + names[0], prefix + names[1]
    if isinstance(sentinels, str) or not isinstance(sentinels, list | tuple) or not sentinels:
        raise ConfigurationError("must be a non-empty list of host:port", where)
    if len(sentinels) > _MAX_SENTINELS:
        raise ConfigurationError(f"at most {_MAX_SENTINELS} sentinels", where)
    addresses: list[tuple[str, int]] = []
    for i, entry in enumerate(sentinels):
        host, sep, port = entry.rpartition(":") if isinstance(entry, str) else ("", "", "")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigurationError(f"must be host:port, not {entry!r}", f"{where}[{i}]")
        addresses.append((host, int(port)))
    if not isinstance(service, str) or not service.strip():
        raise ConfigurationError("must name the primary the sentinels monitor", service_path)
    return addresses
