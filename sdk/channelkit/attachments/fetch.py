"""Stream one attachment download into a directory, bounded and without trusting the
server: capped while streaming, redirects only to the platform's own hosts, the type
sniffed from the bytes."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Protocol
from urllib.parse import urljoin, urlsplit

from channelkit.attachments.model import ReceivedFile
from channelkit.attachments.names import sanitize_name, unique_path
from channelkit.attachments.sniff import SNIFF_BYTES, sniff_content_type
from channelkit.errors import (
    AttachmentError,
    AttachmentFailed,
    AttachmentRefused,
    AttachmentTooLarge,
    ConfigurationError,
)

if TYPE_CHECKING:  # requests loads with the first download, not with the core
    import requests

__all__ = [
    "DEFAULT_PER_FILE",
    "DEFAULT_PER_MESSAGE",
    "ChunkTransform",
    "DownloadLimits",
    "MessageBudget",
    "download",
]

MB = 1024 * 1024
DEFAULT_PER_FILE = 20 * MB
"""The default cap on one attachment, in bytes."""
DEFAULT_PER_MESSAGE = 50 * MB
"""The default cap on all the attachments of one message together, in bytes."""

_AUTH_HEADERS = ("authorization", "cookie", "proxy-authorization")


@dataclass(frozen=True)
class DownloadLimits:
    """The bounds of one download.

    `per_file` and `per_message` are caps in bytes; `connect_timeout` bounds the TCP
    (and TLS) connect, `read_timeout` each wait for bytes from the server, in seconds;
    `max_redirects` the hops followed (each to an allowed host); `chunk_size` the bytes
    read and written at a time (the only buffer held in memory).
    """

    per_file: int = DEFAULT_PER_FILE
    per_message: int = DEFAULT_PER_MESSAGE
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    max_redirects: int = 3
    chunk_size: int = 64 * 1024

    def __post_init__(self) -> None:
        for field in ("per_file", "per_message", "chunk_size"):
            if getattr(self, field) <= 0:
                raise ConfigurationError(f"must be > 0 (got {getattr(self, field)})", field)
        for field in ("connect_timeout", "read_timeout"):
            if not getattr(self, field) > 0:
                raise ConfigurationError(f"must be > 0 (got {getattr(self, field)})", field)
        if self.max_redirects < 0:
            raise ConfigurationError(f"must be >= 0 (got {self.max_redirects})", "max_redirects")


class MessageBudget:
    """The bytes one message's attachments may still use together (thread-safe).

    Pass the same budget to every `download` of one message: each download takes
    bytes from it as they arrive and gives back what a refused or failed file took.
    """

    def __init__(self, limit: int) -> None:
        if limit <= 0:
            raise ConfigurationError(f"must be > 0 (got {limit})", "per_message")
        self.limit = limit
        self._used = 0
        self._lock = threading.Lock()

    @property
    def remaining(self) -> int:
        """The bytes left for the message's next files."""
        with self._lock:
            return self.limit - self._used

    def take(self, count: int) -> bool:
        """Take `count` bytes; False (nothing taken) when fewer are left."""
        with self._lock:
            if self._used + count > self.limit:
                return False
            self._used += count
            return True

    def give_back(self, count: int) -> None:
        """Return `count` bytes taken for a file that was not kept."""
        with self._lock:
            self._used = max(0, self._used - count)


class ChunkTransform(Protocol):
    """Turns the body as it arrives into the file's bytes (e.g. a platform's CDN
    decryption), one chunk at a time, without holding the body whole.

    `update(chunk)` returns the bytes ready so far (possibly none: a cipher keeps an
    unfinished block); `finish()` returns the rest once the body ended, and raises
    `ValueError` when the body was not a whole, valid stream (a bad padding).
    `overhead` is how many bytes the body may be longer than the file (a padding):
    a `Content-Length` is refused only when it exceeds the cap by more.
    """

    overhead: int

    def update(self, chunk: bytes) -> bytes: ...

    def finish(self) -> bytes: ...


def download(
    session: requests.Session,
    url: str,
    directory: Path,
    *,
    name: str | None,
    headers: Mapping[str, str] | None = None,
    allowed_redirect_hosts: Collection[str] = (),
    limits: DownloadLimits | None = None,
    budget: MessageBudget | None = None,
    transform: Callable[[], ChunkTransform] | None = None,
) -> ReceivedFile:
    """Stream `url` into a new file in `directory` and describe what arrived.

    The body is read `limits.chunk_size` bytes at a time and written as it comes,
    never held whole. A `Content-Length` above the cap is refused before any body byte
    is read; without one the bytes are counted and the download stops at the first
    byte past the cap. Either way `AttachmentTooLarge` names the file and the limit and
    nothing is left on disk. The cap is the smaller of `limits.per_file` and what
    `budget` (the message's shared `MessageBudget`) has left.

    Redirects are never followed by requests: a redirect is followed only to an
    `http(s)` URL whose host is in `allowed_redirect_hosts` (the platform's own hosts;
    none by default), checked at every hop, never from `https` to `http`; otherwise
    `AttachmentRefused`. Credentials (`Authorization`, `Cookie`) in `headers` are sent
    to the first host only.

    An HTTP error status, a timeout, a broken connection or a failed write (a full
    disk, a missing directory) raises `AttachmentFailed` (`retryable` for timeouts,
    resets, 429 and 5xx). The content type is sniffed from
    the first bytes; the server's `Content-Type` is ignored. `ReceivedFile.name` is
    `sanitize_name(name)`; the file on disk has that name, with a unique suffix when
    another file of the message already took it.

    `transform` (a factory called once per download) makes a `ChunkTransform` that every
    chunk passes through before it is counted, capped, hashed, sniffed and written (a
    platform's CDN decryption); its final bytes come at the end of the body. A body the
    transform refuses raises `AttachmentFailed` (not retryable) and nothing is kept.
    """
    limits = limits or DownloadLimits()
    safe_name = sanitize_name(name)
    allowed = {host.lower().rstrip(".") for host in allowed_redirect_hosts}
    response = _open(session, url, dict(headers or {}), allowed, limits, safe_name)
    with response:
        cap = limits.per_file
        which = "per_file"
        if budget is not None and budget.remaining < cap:
            cap, which = max(0, budget.remaining), "per_message"
        declared = _content_length(response)
        changer = transform() if transform is not None else None
        overhead = changer.overhead if changer is not None else 0
        if declared is not None and declared > cap + overhead:
            raise AttachmentTooLarge(
                name=safe_name, limit=_limit(limits, budget, which), size=declared, which=which
            )
        try:
            path = unique_path(directory, safe_name)
        except OSError as exc:
            raise AttachmentFailed(
                name=safe_name, reason=f"could not be written ({exc.strerror or exc})"
            ) from exc
        return _stream(response, path, safe_name, cap, which, limits, budget, changer)


def _limit(limits: DownloadLimits, budget: MessageBudget | None, which: str) -> int:
    if which != "per_message":
        return limits.per_file
    return budget.limit if budget is not None else limits.per_message


def _open(
    session: requests.Session,
    url: str,
    headers: dict[str, str],
    allowed: set[str],
    limits: DownloadLimits,
    name: str,
) -> requests.Response:
    import requests

    timeout = (limits.connect_timeout, limits.read_timeout)
    first_host = (urlsplit(url).hostname or "").lower()
    for hop in range(limits.max_redirects + 1):
        try:
            response = session.get(
                url, headers=headers, stream=True, allow_redirects=False, timeout=timeout
            )
        except requests.Timeout as exc:
            raise AttachmentFailed(name=name, reason=f"timed out: {exc}", retryable=True) from exc
        except requests.RequestException as exc:
            raise AttachmentFailed(
                name=name, reason=f"connection failed: {type(exc).__name__}", retryable=True
            ) from exc
        if not response.is_redirect:
            if response.status_code >= 400:
                response.close()
                status = response.status_code
                raise AttachmentFailed(
                    name=name,
                    reason=f"the server answered HTTP {status}",
                    status=status,
                    retryable=status == 429 or status >= 500,
                )
            return response
        location = response.headers.get("Location", "")
        response.close()
        if hop == limits.max_redirects:
            break
        target = urljoin(url, location)
        _check_redirect(url, target, allowed, name)
        url = target
        if (urlsplit(url).hostname or "").lower() != first_host:
            headers = {k: v for k, v in headers.items() if k.lower() not in _AUTH_HEADERS}
    raise AttachmentRefused(name=name, reason=f"more than {limits.max_redirects} redirects")


def _check_redirect(source: str, target: str, allowed: set[str], name: str) -> None:
    parts = urlsplit(target)
    host = (parts.hostname or "").lower().rstrip(".")
    if parts.scheme not in ("http", "https"):
        raise AttachmentRefused(
            name=name, reason=f"redirect to a {parts.scheme or 'relative'} URL refused"
        )
    if urlsplit(source).scheme == "https" and parts.scheme == "http":
        raise AttachmentRefused(name=name, reason=f"redirect from https to http ({host}) refused")
    if host not in allowed:
        raise AttachmentRefused(
            name=name,
            reason=f"redirect to {host or 'no host'} refused (not one of the platform's hosts)",
        )


def _content_length(response: requests.Response) -> int | None:
    value = response.headers.get("Content-Length")
    if value is None or not value.strip().isdigit():
        return None
    # with a Content-Encoding the declared length is the compressed size: the counted
    # bytes (decoded) are the ones capped
    return None if response.headers.get("Content-Encoding") else int(value.strip())


def _is_timeout(exc: requests.RequestException) -> bool:
    import requests
    import urllib3

    # while the body streams, requests wraps urllib3's read timeout in a ConnectionError
    return isinstance(exc, requests.Timeout) or any(
        isinstance(arg, urllib3.exceptions.TimeoutError) for arg in exc.args
    )


def _stream(
    response: requests.Response,
    path: Path,
    name: str,
    cap: int,
    which: str,
    limits: DownloadLimits,
    budget: MessageBudget | None,
    changer: ChunkTransform | None = None,
) -> ReceivedFile:
    import requests

    digest = hashlib.sha256()
    head = b""
    size = 0
    taken = 0
    kept = False

    def write(out: BinaryIO, chunk: bytes) -> None:
        nonlocal head, size, taken
        if not chunk:
            return
        if size + len(chunk) > cap:
            raise AttachmentTooLarge(
                name=name, limit=_limit(limits, budget, which), size=cap + 1, which=which
            )
        if budget is not None:
            if not budget.take(len(chunk)):
                raise AttachmentTooLarge(
                    name=name,
                    limit=budget.limit,
                    size=budget.limit + 1,
                    which="per_message",
                )
            taken += len(chunk)
        size += len(chunk)
        if len(head) < SNIFF_BYTES:
            head += chunk[: SNIFF_BYTES - len(head)]
        digest.update(chunk)
        out.write(chunk)

    try:
        with path.open("wb") as out:
            for chunk in response.iter_content(chunk_size=limits.chunk_size):
                if chunk:
                    write(out, changer.update(chunk) if changer is not None else chunk)
            if changer is not None:
                write(out, changer.finish())
        kept = True
    except requests.RequestException as exc:
        # a timeout, a reset or a body cut short: the transfer may succeed again
        reason = "timed out" if _is_timeout(exc) else "the transfer broke off"
        raise AttachmentFailed(
            name=name, reason=f"{reason} after {size} bytes", retryable=True
        ) from exc
    except AttachmentError:
        raise
    except ValueError as exc:  # the transform refused the body (e.g. a bad padding)
        raise AttachmentFailed(name=name, reason=f"could not be decoded ({exc})") from exc
    except OSError as exc:
        raise AttachmentFailed(
            name=name, reason=f"could not be written after {size} bytes ({exc.strerror or exc})"
        ) from exc
    finally:
        if not kept:
            path.unlink(missing_ok=True)
            if budget is not None and taken:
                budget.give_back(taken)
    return ReceivedFile(
        path=path,
        name=name,
        content_type=sniff_content_type(head),
        size=size,
        sha256=digest.hexdigest(),
    )
