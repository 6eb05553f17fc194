"""The framework-neutral ingress contract between platform adapters and web frameworks.

A platform adapter exposes its callbacks (robot messages, card actions, webhooks) as
:class:`IngressRoute` objects whose handlers take an :class:`IngressRequest` (raw body
read once, headers, query) and return an :class:`IngressResponse` (the platform's ACK).
Handlers parse, verify, correlate, authorize and claim synchronously, return at once,
and hand slow work to the pool; they never raise into the web framework.

``channelkit.web`` (WSGI), ``channelkit.web.flask`` and ``channelkit.web.django`` are thin
wrappers that turn their framework's request into an :class:`IngressRequest`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "MAX_BODY_BYTES",
    "Headers",
    "IngressHandler",
    "IngressRequest",
    "IngressResponse",
    "IngressRoute",
    "SupportsIngress",
]

#: Bodies larger than this are rejected with 413 before any handler runs.
MAX_BODY_BYTES = 1024 * 1024


class Headers(Mapping[str, str]):
    """A read-only, case-insensitive header mapping."""

    def __init__(self, items: Iterable[tuple[str, str]] | Mapping[str, str] = ()) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        self._data: dict[str, tuple[str, str]] = {k.lower(): (k, v) for k, v in pairs}

    def __getitem__(self, key: str) -> str:
        return self._data[key.lower()][1]

    def __iter__(self) -> Any:
        return (original for original, _ in self._data.values())

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._data

    def __repr__(self) -> str:
        return f"Headers({dict(self.items())!r})"


@dataclass(frozen=True)
class IngressRequest:
    """One HTTP request as the platform sent it."""

    method: str
    path: str
    headers: Headers
    body: bytes = b""
    query: Mapping[str, str] = field(default_factory=dict)
    remote_addr: str | None = None

    def json(self) -> Any:
        """Decode the body as JSON (raises ``ValueError`` on malformed input)."""
        return json.loads(self.body.decode("utf-8"))


@dataclass(frozen=True)
class IngressResponse:
    """The ACK (or rejection) to send back to the platform."""

    status: int
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "application/json"),)

    @classmethod
    def json(cls, status: int, payload: Any) -> IngressResponse:
        """A JSON response."""
        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        return cls(status=status, body=data)

    @classmethod
    def text(cls, status: int, text: str) -> IngressResponse:
        """A plain-text response."""
        return cls(
            status=status,
            body=text.encode("utf-8"),
            headers=(("Content-Type", "text/plain; charset=utf-8"),),
        )


IngressHandler = Callable[[IngressRequest], IngressResponse]


@dataclass(frozen=True)
class IngressRoute:
    """A path an adapter wants mounted, e.g. ``/dingtalk/card`` with ``POST``."""

    path: str
    handler: IngressHandler
    methods: tuple[str, ...] = ("POST",)
    name: str = ""


class SupportsIngress(Protocol):
    """An adapter with callbacks to mount."""

    def ingress_routes(self) -> list[IngressRoute]: ...
