"""The framework-neutral ingress contract between platform adapters and their transports.

A platform adapter exposes its callbacks (robot messages, card actions, webhooks) as
`IngressRoute` objects whose handlers take an `IngressRequest` (raw body
read once, headers, query) and return an `IngressResponse` (the platform's ACK).
Handlers parse, verify, correlate, authorize and claim synchronously, return at once,
and hand slow work to the pool; they never raise into the web framework.

This module sits below both the platforms and the web layer: platforms import it, and
``channelkit.web`` (WSGI), ``channelkit.web.flask`` and ``channelkit.web.django`` are thin
wrappers that turn their framework's request into an `IngressRequest`
(``channelkit.web`` re-exports these names).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

logger = logging.getLogger(__name__)

__all__ = [
    "MAX_BODY_BYTES",
    "Headers",
    "IngressHandler",
    "IngressRequest",
    "IngressResponse",
    "IngressRoute",
    "SupportsIngress",
    "loads_json",
]

#: Bodies larger than this are rejected with 413 before any handler runs.
MAX_BODY_BYTES = 1024 * 1024


def loads_json(data: bytes | str) -> Any:
    """Decode untrusted JSON; every failure is a ``ValueError``.

    Non-UTF-8 bytes, malformed JSON and nesting too deep for the decoder (which raises
    ``RecursionError``, not ``ValueError``) all raise ``ValueError``, so callback handlers
    can answer 400 instead of letting the error reach the web framework.
    """
    try:
        text = data.decode("utf-8") if isinstance(data, bytes | bytearray) else data
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


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
        """Decode the body as JSON (raises ``ValueError`` on any malformed input)."""
        return loads_json(self.body)


@dataclass(frozen=True)
class IngressResponse:
    """The ACK (or rejection) to send back to the platform.

    ``after`` holds the work a handler deferred until its ACK is on its way: quick
    callables that hand responders and card writes to the pool. The web layer calls
    `run_after()` once the response has been written (WSGI: when the server closes
    the body iterable), so no responder or platform API call can start before the ACK.
    Callers that invoke a handler directly must call `run_after()` themselves.
    Chat platforms decide an interaction as a ``Decision``
    (``channelkit.platforms.common.contract``) and answer its ``to_response()``.
    """

    status: int
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "application/json"),)
    after: tuple[Callable[[], None], ...] = ()
    _ran: list[bool] = field(default_factory=list, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @classmethod
    def json(
        cls, status: int, payload: Any, *, after: Iterable[Callable[[], None]] = ()
    ) -> IngressResponse:
        """A JSON response, optionally with deferred work."""
        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        return cls(status=status, body=data, after=tuple(after))

    @classmethod
    def text(cls, status: int, text: str) -> IngressResponse:
        """A plain-text response."""
        return cls(
            status=status,
            body=text.encode("utf-8"),
            headers=(("Content-Type", "text/plain; charset=utf-8"),),
        )

    def with_after(self, *work: Callable[[], None]) -> IngressResponse:
        """A copy of this response with ``work`` appended to its deferred work."""
        return IngressResponse(self.status, self.body, self.headers, self.after + work)

    def run_after(self) -> None:
        """Run the deferred work once (later calls do nothing); failures are logged."""
        with self._lock:
            if self._ran:
                return
            self._ran.append(True)
        for work in self.after:
            try:
                work()
            except Exception:
                logger.exception("deferred ingress work failed")


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
