"""The HTTP transport under every generated client: one shared ``requests.Session``.

The session is created once, its adapters mounted once with a connection pool sized to the
worker count, and never mutated afterwards (headers and auth go on each request), which is
what makes sharing it between pool threads safe. requests' exceptions become
`TransportError`. ``requests`` (and urllib3 under it) is imported
when the first session is made, not when this module is imported.

Every request carries an explicit ``(connect, total)`` timeout: ``connect`` bounds
establishing the connection, ``total`` is the overall deadline of the whole exchange -
connect, send, the status line, the headers and every byte of the body. A peer that
trickles its answer (even its status line, one byte a second) fails at that deadline:
the sessions made here read every answer through a socket reader whose timeout is the
time left (`_DeadlineResponse`); the body is also checked against the deadline
between reads, which is all a ``requests.Session`` passed in from outside gets. A single
number ``t`` means ``(min(3.05, t), t)``. The default is ``(3.05, 10.0)``: 10 s overall.

The environment's settings that ``requests`` honours (``HTTPS_PROXY``, ``HTTP_PROXY``,
``NO_PROXY``, ``REQUESTS_CA_BUNDLE``, ``CURL_CA_BUNDLE``) are read once per host, at the
session's first request to it, not on every call: scanning the environment was about a
fifth of the client's CPU per call (platform calls come in bursts of hundreds). A process
that changes them later makes a new session. So is a netrc file (``NETRC``, ``~/.netrc``),
which ``requests`` looked for on every call; and a request without cookies, auth or
session parameters is prepared without ``requests``' generic merging (the same request,
at about a third of the cost).
"""

from __future__ import annotations

import io
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from channelkit.errors import (
    ChannelKitError,
    ConfigurationError,
    ConnectTimeout,
    ReadTimeout,
    TransportError,
)
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
    "platform_timeout",
]

logger = logging.getLogger(__name__)

DEFAULT_CONNECT_TIMEOUT = 3.05
DEFAULT_READ_TIMEOUT = 10.0
DEFAULT_TIMEOUT: tuple[float, float] = (DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT)
DEFAULT_POOL_SIZE = 10

Timeout = float | tuple[float, float]
"""The overall deadline in seconds, or a ``(connect, total)`` pair (see the module
docstring): ``total`` bounds the whole call, ``connect`` the connection within it."""


def normalize_timeout(timeout: Timeout | None, default: tuple[float, float]) -> tuple[float, float]:
    """Return an explicit ``(connect, total)`` pair; ``None`` means ``default``.

    A single number ``t`` is the overall deadline: ``(min(3.05, t), t)``."""
    if timeout is None:
        return default
    if isinstance(timeout, bool):
        raise ConfigurationError("expected seconds or a (connect, total) pair", "timeout")
    if isinstance(timeout, int | float):
        pair = (min(DEFAULT_CONNECT_TIMEOUT, float(timeout)), float(timeout))
    elif isinstance(timeout, tuple) and len(timeout) == 2:
        pair = (float(timeout[0]), float(timeout[1]))
    else:
        raise ConfigurationError("expected seconds or a (connect, total) pair", "timeout")
    if not (pair[0] > 0 and pair[1] > 0):
        raise ConfigurationError("timeouts must be positive (never unbounded)", "timeout")
    return pair


def platform_timeout(seconds: float) -> tuple[float, float]:
    """The ``(connect, total)`` pair for a platform's ``requestTimeout`` of ``seconds``."""
    return normalize_timeout(float(seconds), DEFAULT_TIMEOUT)


# -- the overall deadline below the status line -------------------------------------------

#: the deadline (``time.monotonic()`` reading) of the request this thread is sending
_deadline = threading.local()


class _DeadlineReader(io.RawIOBase):
    """The socket reader of one answer: before each read the socket's timeout becomes
    the time left before the deadline, so trickled bytes cannot stretch the call."""

    def __init__(self, sock: Any, deadline: float) -> None:
        super().__init__()
        self._sock = sock
        self._raw = sock.makefile("rb", buffering=0)
        self._deadline = deadline
        self._idle = sock.gettimeout()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("overall deadline passed")
        idle = self._idle
        self._sock.settimeout(left if idle is None else min(idle, left))
        result: int | None = self._raw.readinto(buffer)
        return result

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()


def _deadline_response_class() -> type:
    import http.client

    class _DeadlineResponse(http.client.HTTPResponse):
        """``http.client``'s response reading through a `_DeadlineReader` when the
        sending thread set a deadline (see `Transport.request()`)."""

        def __init__(self, sock: Any, *args: Any, **kwargs: Any) -> None:
            super().__init__(sock, *args, **kwargs)
            deadline: float | None = getattr(_deadline, "value", None)
            if deadline is not None:
                self.fp.close()
                self.fp = io.BufferedReader(_DeadlineReader(sock, deadline))

    return _DeadlineResponse


_POOLS: dict[str, type] = {}


def _deadline_pools() -> dict[str, type]:
    """urllib3 pool classes whose connections read answers under the deadline."""
    if _POOLS:
        return _POOLS
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    response_class = _deadline_response_class()

    class _Connection(HTTPConnection):
        pass

    class _SecureConnection(HTTPSConnection):
        pass

    _Connection.response_class = response_class
    _SecureConnection.response_class = response_class

    class _Pool(HTTPConnectionPool):
        ConnectionCls = _Connection

    class _SecurePool(HTTPSConnectionPool):
        ConnectionCls = _SecureConnection

    _POOLS.update(http=_Pool, https=_SecurePool)
    return _POOLS


#: Hosts whose environment settings one session remembers (a client talks to one to three).
MAX_ENVIRONMENT_HOSTS = 64


def _host_key(url: str) -> str:
    """``scheme://host:port`` of ``url`` (what ``NO_PROXY`` and the proxies depend on)."""
    scheme, _, rest = url.partition("://")
    return f"{scheme.lower()}://{rest.split('/', 1)[0].split('?', 1)[0].lower()}"


def make_session(pool_size: int = DEFAULT_POOL_SIZE) -> requests.Session:
    """A ``requests.Session`` whose connection pool holds ``pool_size`` connections per host.

    urllib3 retries are disabled: retrying is the SDK's job (`channelkit.http.retry`).
    """
    if pool_size < 1:
        raise ConfigurationError("must be at least 1", "pool_size")
    import requests
    from requests.adapters import HTTPAdapter

    pools = _deadline_pools()

    class _DeadlineAdapter(HTTPAdapter):
        """Every pool it makes (direct or through a proxy) reads under the deadline."""

        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = dict(pools)

        def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
            manager = super().proxy_manager_for(proxy, **proxy_kwargs)
            if not proxy.lower().startswith("socks"):
                manager.pool_classes_by_scheme = dict(pools)
            return manager

    class _Session(requests.Session):
        """Reads the environment's proxy and CA-bundle settings once per host (see the
        module docstring); requests asked for explicit proxies, a CA bundle or a client
        certificate are merged as ``requests`` always does."""

        def __init__(self) -> None:
            super().__init__()
            self._environment: OrderedDict[tuple[str, Any, Any], Any] = OrderedDict()
            self._environment_lock = threading.Lock()
            self._netrc: OrderedDict[str, Any] = OrderedDict()

        def merge_environment_settings(
            self, url: Any, proxies: Any, stream: Any, verify: Any, cert: Any
        ) -> Any:
            if not self.trust_env or proxies or verify not in (None, True) or cert is not None:
                return super().merge_environment_settings(url, proxies, stream, verify, cert)
            key = (_host_key(str(url)), stream, verify)
            with self._environment_lock:
                known = self._environment.get(key)
            if known is None:
                known = super().merge_environment_settings(url, {}, stream, verify, cert)
                with self._environment_lock:
                    self._environment[key] = known
                    while len(self._environment) > MAX_ENVIRONMENT_HOSTS:
                        self._environment.popitem(last=False)
            return {**known, "proxies": dict(known["proxies"])}

        def prepare_request(self, request: Any) -> Any:
            # ``requests.Session.prepare_request`` merges headers, params, cookies and
            # hooks through generic helpers (a runtime Protocol check per value, slow
            # before Python 3.12) and looks for a netrc file on every call: about two
            # thirds of preparing a request. In the common case (no cookies on the
            # session or the request, no auth, no session params or hooks) the same
            # request is prepared directly; anything else goes the way requests goes.
            if (
                request.cookies
                or len(self.cookies)
                or request.auth
                or self.auth
                or self.params
                or any(self.hooks.values())
                or not isinstance(request.headers, dict)
                or not isinstance(request.params, dict)
                or self._netrc_auth(str(request.url)) is not None
            ):
                return super().prepare_request(request)
            from requests.models import PreparedRequest
            from requests.structures import CaseInsensitiveDict

            headers = CaseInsensitiveDict(self.headers)
            headers.update(request.headers)
            for name in [name for name, value in headers.items() if value is None]:
                del headers[name]
            params = {k: v for k, v in request.params.items() if v is not None}
            prepared = PreparedRequest()
            prepared.prepare(
                method=str(request.method).upper(),
                url=request.url,
                files=request.files,
                data=request.data,
                json=request.json,
                headers=headers,
                params=params or None,
                hooks=request.hooks,
            )
            return prepared

        def _netrc_auth(self, url: str) -> Any:
            """The netrc credentials of ``url``'s host (None: none), read once per host
            like the proxies."""
            if not self.trust_env:
                return None
            from requests.utils import get_netrc_auth

            key = _host_key(url)
            with self._environment_lock:
                if key in self._netrc:
                    return self._netrc[key]
            found = get_netrc_auth(url)
            with self._environment_lock:
                self._netrc[key] = found
                while len(self._netrc) > MAX_ENVIRONMENT_HOSTS:
                    self._netrc.popitem(last=False)
            return found

    session = _Session()
    adapter = _DeadlineAdapter(pool_connections=pool_size, pool_maxsize=pool_size, max_retries=0)
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
    if read1 is None:  # not a urllib3 2 response (test doubles): plain chunks
        stream = getattr(raw, "stream", None)
        if stream is not None:
            yield from stream(_READ_CHUNK, decode_content=True)
            return
        while True:
            piece = raw.read(_READ_CHUNK)
            if not piece:
                return
            yield piece
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
        multipart: Mapping[str, Any] | None = None,
    ) -> requests.Response:
        """Send the request and return the response, whatever its status, within the
        overall deadline ``timeout[1]`` (connecting within ``timeout[0]`` of it).

        ``json_body`` is sent as JSON when ``has_body`` is true; ``form_body`` (used by the
        OAuth token endpoints) as ``application/x-www-form-urlencoded``; ``multipart``
        (file uploads) as a streamed ``multipart/form-data`` body
        (`channelkit.http.multipart.MultipartBody`, built anew for every call, so a
        retried call reads its files again from the first byte). Raises
        `TransportError` when no response arrived: `ConnectTimeout` or
        `ReadTimeout` (both ``timeout=True`` and builtin ``TimeoutError``) on a timeout.
        """
        import requests
        import urllib3

        total = timeout[1]
        connect = min(timeout[0], total)
        kwargs: dict[str, Any] = {
            "params": dict(params or {}),
            "headers": dict(headers or {}),
            "timeout": (connect, total),
            "allow_redirects": False,
            "stream": True,  # the body is read below, under the overall deadline
        }
        if has_body:
            kwargs["json"] = json_body
        elif form_body is not None:
            kwargs["data"] = dict(form_body)
        elif multipart is not None:
            from channelkit.http.multipart import MultipartBody

            upload = MultipartBody(multipart)
            kwargs["data"] = upload
            kwargs["headers"]["Content-Type"] = upload.content_type
        shown = redact_url(url)
        # One deadline for the whole call (connect + send + status line + headers + every
        # byte of the answer): a per-read timeout alone never trips against a peer that
        # trickles bytes. The answer's socket reader takes it from this thread.
        deadline = time.monotonic() + total
        overall = (
            f"{method} {shown}: read timeout, no complete answer within the overall "
            f"deadline of {total:g} s"
        )
        try:
            _deadline.value = deadline
            try:
                response = self.session.request(method, url, **kwargs)
            finally:
                _deadline.value = None
            try:
                chunks: list[bytes] = []
                size = 0
                for piece in _pieces(response):
                    chunks.append(piece)
                    size += len(piece)
                    if time.monotonic() > deadline:
                        raise ReadTimeout(overall)
                    if size > MAX_RESPONSE_BYTES:
                        raise TransportError(
                            f"{method} {shown}: answer larger than {MAX_RESPONSE_BYTES} bytes"
                        )
                body = b"".join(chunks)
            finally:
                response.close()  # the connection goes back to the pool
            # The body was read here, under the deadline; the caller reads it from memory
            # (``response.content``, ``.json()``) through the public ``raw`` stream.
            response.raw = io.BytesIO(body)
            return response
        except requests.ConnectTimeout:
            message = f"{method} {shown}: connect timeout after {connect:g} s"
            raise ConnectTimeout(message) from None
        except ChannelKitError:
            raise
        except (requests.Timeout, urllib3.exceptions.TimeoutError, TimeoutError):
            raise ReadTimeout(overall) from None
        except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
            raise TransportError(f"{method} {shown}: {type(exc).__name__}") from None

    def close(self) -> None:
        """Close the session if this transport created it."""
        if self._owns_session:
            self.session.close()
