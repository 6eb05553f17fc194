"""The HTTP transport under every generated client: one shared ``requests.Session``.

The session is created once, its adapters mounted once with a connection pool sized to the
worker count, and never mutated afterwards (headers and auth go on each request), which is
what makes sharing it between pool threads safe. Every request carries an explicit
``(connect, read)`` timeout; requests' exceptions become
:class:`~channelkit.errors.TransportError`. ``requests`` (and urllib3 under it) is imported
when the first session is made, not when this module is imported.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from channelkit.errors import ConfigurationError, ConnectTimeout, ReadTimeout, TransportError
from channelkit.http.redact import redact_url

if TYPE_CHECKING:
    import requests

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_POOL_SIZE",
    "DEFAULT_READ_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "Timeout",
    "Transport",
    "make_session",
    "normalize_timeout",
]

logger = logging.getLogger(__name__)

DEFAULT_CONNECT_TIMEOUT = 3.05
DEFAULT_READ_TIMEOUT = 10.0
DEFAULT_TIMEOUT: tuple[float, float] = (DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT)
DEFAULT_POOL_SIZE = 10

Timeout = float | tuple[float, float]
"""A single number (both phases) or a ``(connect, read)`` pair, in seconds."""


def normalize_timeout(timeout: Timeout | None, default: tuple[float, float]) -> tuple[float, float]:
    """Return an explicit ``(connect, read)`` pair; ``None`` means ``default``."""
    if timeout is None:
        return default
    if isinstance(timeout, bool):
        raise ConfigurationError("expected seconds or a (connect, read) pair", "timeout")
    if isinstance(timeout, int | float):
        pair = (float(timeout), float(timeout))
    elif isinstance(timeout, tuple) and len(timeout) == 2:
        pair = (float(timeout[0]), float(timeout[1]))
    else:
        raise ConfigurationError("expected seconds or a (connect, read) pair", "timeout")
    if pair[0] <= 0 or pair[1] <= 0:
        raise ConfigurationError("timeouts must be positive (never unbounded)", "timeout")
    return pair


def make_session(pool_size: int = DEFAULT_POOL_SIZE) -> requests.Session:
    """A ``requests.Session`` whose connection pool holds ``pool_size`` connections per host.

    urllib3 retries are disabled: retrying is the SDK's job (:mod:`channelkit.http.retry`).
    """
    if pool_size < 1:
        raise ConfigurationError("must be at least 1", "pool_size")
    import requests
    from requests.adapters import HTTPAdapter

    session = requests.Session()
    adapter = HTTPAdapter(pool_connections=pool_size, pool_maxsize=pool_size, max_retries=0)
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return session


#: Bytes read per chunk of an answer, and the largest answer accepted (a platform API
#: answer is a few KiB; anything near this is a fault).
_READ_CHUNK = 16_384
MAX_RESPONSE_BYTES = 16 * 1024 * 1024


def _pieces(response: requests.Response) -> Iterator[bytes]:
    """The body as it arrives: each piece is what one socket read brought (``read1``),
    so a deadline check runs between reads even when a peer trickles bytes."""
    raw = response.raw
    read1 = getattr(raw, "read1", None)
    if read1 is None:  # not a urllib3 response (test doubles): plain chunks
        yield from response.iter_content(_READ_CHUNK)
        return
    while True:
        piece = read1(_READ_CHUNK, decode_content=True)
        if not piece:
            return
        yield piece


class Transport:
    """Sends one HTTP request with an explicit timeout; never retries, never raises ``requests``.

    ``session`` may be shared between clients (pass the same object); when omitted one is
    made with a pool of ``pool_size`` connections.
    """

    def __init__(
        self, session: requests.Session | None = None, *, pool_size: int = DEFAULT_POOL_SIZE
    ) -> None:
        self._owns_session = session is None
        self.session = session if session is not None else make_session(pool_size)

    def request(
        self,
        method: str,
        url: str,
        *,
        timeout: tuple[float, float],
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        json_body: Any = None,
        has_body: bool = False,
        form_body: Mapping[str, str] | None = None,
    ) -> requests.Response:
        """Send the request and return the response, whatever its status.

        ``json_body`` is sent as JSON when ``has_body`` is true; ``form_body`` (used by the
        OAuth token endpoints) as ``application/x-www-form-urlencoded``. Raises
        :class:`TransportError` when no response arrived: :class:`ConnectTimeout` or
        :class:`ReadTimeout` (both ``timeout=True`` and builtin ``TimeoutError``) on a timeout.
        """
        import requests

        kwargs: dict[str, Any] = {
            "params": dict(params or {}),
            "headers": dict(headers or {}),
            "timeout": timeout,
            "allow_redirects": False,
            "stream": True,  # the body is read below, under the overall deadline
        }
        if has_body:
            kwargs["json"] = json_body
        elif form_body is not None:
            kwargs["data"] = dict(form_body)
        shown = redact_url(url)
        # One deadline for the whole call (connect + send + every byte of the answer):
        # the per-read timeout alone never trips against a peer that trickles bytes.
        deadline = time.monotonic() + timeout[0] + timeout[1]
        try:
            response = self.session.request(method, url, **kwargs)
            try:
                chunks: list[bytes] = []
                size = 0
                for piece in _pieces(response):
                    chunks.append(piece)
                    size += len(piece)
                    if time.monotonic() > deadline:
                        raise ReadTimeout(
                            f"{method} {shown}: no complete answer within the overall "
                            f"deadline of {timeout[0] + timeout[1]:g} s"
                        )
                    if size > MAX_RESPONSE_BYTES:
                        raise TransportError(
                            f"{method} {shown}: answer larger than {MAX_RESPONSE_BYTES} bytes"
                        )
                response._content = b"".join(chunks)
            finally:
                response.close()
            return response
        except requests.ConnectTimeout:
            message = f"{method} {shown}: connect timeout after {timeout[0]} s"
            raise ConnectTimeout(message) from None
        except requests.Timeout:
            raise ReadTimeout(f"{method} {shown}: read timeout after {timeout[1]} s") from None
        except requests.RequestException as exc:
            raise TransportError(f"{method} {shown}: {type(exc).__name__}") from None

    def close(self) -> None:
        """Close the session if this transport created it."""
        if self._owns_session:
            self.session.close()
