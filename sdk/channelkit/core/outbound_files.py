"""An agent's files and images on their way to the chat (outbound half of issue 25).

`FileDeliveries` sends one `OutboundSource` (a confined file or bytes) through the
channel's `upload` hook (`ChannelBase.upload_file`, which a platform overrides to upload
natively) and completes a Future with the platform's message id. Every attempt runs on
a serial lane of the channel: a run's own file goes on the run's lane, so it shows after
the text said before it (`RunEvents` ends the segment first, as for a presentation).

Retries, as for a final answer (`channelkit.platforms.common.delivery`): a throttled
call (429, ``retry_after`` honoured up to `MAX_RETRY_AFTER_S`), a 5xx or other
``retryable`` platform error, a broken connection or an unreadable answer is tried again,
up to `MAX_ATTEMPTS` attempts, after a capped, jittered exponential backoff booked on
the channel's scheduler (nothing blocks while waiting). Every attempt opens the file
again, from its first byte. A connection lost after the body was sent is retried too:
for a file, a rare duplicate is preferred to a file that silently never arrives.

When the platform refuses (any other error, or the attempts are used up), the person
gets one text line naming the file and why (catalog key ``attachment.not_sent``) and
the Future fails with `FileNotDelivered` (``told`` says whether that line went out).
A file refused before anything was sent (outside the allowed root, too large, a stopped
run) is not told to the person: the agent gets the error.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass, field

from channelkit.attachments.outbound import OutboundSource
from channelkit.core.catalog import Messages
from channelkit.core.text import MSG_ATTACHMENT_NOT_SENT
from channelkit.core.types import SessionTarget
from channelkit.errors import (
    ApiError,
    AttachmentError,
    DeserializationError,
    FileNotDelivered,
    RateLimited,
    TransportError,
)
from channelkit.http.retry import RetryPolicy
from channelkit.runtime.scheduler import Scheduler, TimerHandle
from channelkit.runtime.serial import KeyedSerialQueue

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_RETRY_AFTER_S",
    "FileDeliveries",
    "FileJob",
    "Upload",
    "refusal_reason",
]

logger = logging.getLogger(__name__)

#: Upload attempts per file.
MAX_ATTEMPTS = 4
#: The longest ``Retry-After`` honoured; a longer one is a refusal.
MAX_RETRY_AFTER_S = 60.0

#: ``upload(target, file, image=..., caption=...) -> message id``: one attempt.
Upload = Callable[..., str]


def _policy() -> RetryPolicy:
    return RetryPolicy(
        max_attempts=MAX_ATTEMPTS,
        backoff_base=1.0,
        backoff_cap=30.0,
        retry_after_cap=MAX_RETRY_AFTER_S,
    )


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, RateLimited):
        return True
    if isinstance(exc, ApiError):
        return exc.retryable
    return isinstance(exc, TransportError | DeserializationError)


def refusal_reason(exc: BaseException) -> str:
    """Why a file did not go out, as the fallback line says it (never a token)."""
    if isinstance(exc, FileNotDelivered):
        return exc.reason
    if isinstance(exc, AttachmentError):
        text = str(exc)
        prefix = f"{exc.name}: "
        return text[len(prefix) :] if text.startswith(prefix) else text
    if isinstance(exc, ApiError):
        code = f", code {exc.code}" if exc.code is not None else ""
        said = " ".join(str(exc.message).split())[:200]
        return f"the platform refused it (HTTP {exc.status}{code}: {said})"
    if isinstance(exc, TransportError):
        return "the connection to the platform failed"
    if isinstance(exc, NotImplementedError):
        return str(exc) or "this platform cannot upload files"
    return f"the upload failed ({type(exc).__name__})"


@dataclass(eq=False)
class FileJob:
    """One file on its way: where to, what, and the Future its sender waits on."""

    target: SessionTarget
    file: OutboundSource
    image: bool
    caption: str | None
    reply: Future[str]
    lane: Hashable
    texts: Messages
    cancelled: Callable[[], bool] = lambda: False
    attempts: int = 0
    handle: TimerHandle | None = field(default=None, repr=False)


class FileDeliveries:
    """Uploads files through a channel's `upload` hook (see the module docstring).

    ``upload`` makes one attempt; ``tell(target, text)`` sends the fallback line;
    ``lanes`` and ``scheduler`` are the channel's. Thread-safe.
    """

    def __init__(
        self,
        channel_name: str,
        *,
        upload: Upload,
        tell: Callable[[SessionTarget, str], None],
        lanes: KeyedSerialQueue,
        scheduler: Scheduler,
        policy: RetryPolicy | None = None,
    ) -> None:
        self.channel_name = channel_name
        self._upload = upload
        self._tell = tell
        self._lanes = lanes
        self._scheduler = scheduler
        self.policy = policy if policy is not None else _policy()
        self._lock = threading.Lock()
        self._waiting: set[FileJob] = set()  # jobs with a retry booked
        self._closed = False

    @property
    def waiting(self) -> int:
        """Files waiting for a retry."""
        with self._lock:
            return len(self._waiting)

    def start(self, job: FileJob) -> Future[str]:
        """Queue the first attempt of ``job`` on its lane; its Future."""
        self._lanes.post(job.lane, self.attempt, job)
        return job.reply

    def attempt(self, job: FileJob) -> None:
        """One attempt (on ``job.lane``): done, a retry booked, or refused and told."""
        if job.reply.done():
            return
        if job.cancelled():
            self._fail(job, "the run was stopped before it was sent", None, tell=False)
            return
        job.attempts += 1
        try:
            message_id = self._upload(job.target, job.file, image=job.image, caption=job.caption)
        except Exception as exc:
            try:
                self._after_failure(job, exc)
            except Exception as failed:  # never leave the sender waiting
                logger.exception("[%s] handling a failed upload failed", self.channel_name)
                self._fail(job, refusal_reason(exc), failed, tell=False)
            return
        logger.info(
            "[%s] file sent to chat %s (%d bytes, attempt %d)",
            self.channel_name,
            job.target.chat_id,
            job.file.size,
            job.attempts,
        )
        job.reply.set_result(str(message_id) if message_id is not None else "")

    def close(self) -> None:
        """Cancel every booked retry; each of those files fails (no fallback line)."""
        with self._lock:
            self._closed = True
            jobs = list(self._waiting)
            self._waiting.clear()
        for job in jobs:
            if job.handle is not None:
                job.handle.cancel()
            self._fail(job, "the channel closed before the next attempt", None, tell=False)

    # -- internals ---------------------------------------------------------------------

    def _after_failure(self, job: FileJob, exc: Exception) -> None:
        if isinstance(exc, AttachmentError) and not isinstance(exc, FileNotDelivered):
            # refused before anything was sent (the file changed, grew, vanished)
            self._fail(job, refusal_reason(exc), exc, tell=True)
            return
        if _retryable(exc) and job.attempts < self.policy.max_attempts:
            delay = self._delay(job.attempts, exc)
            if delay is not None:
                self._book(job, delay, exc)
                return
        self._fail(job, refusal_reason(exc), exc, tell=True)

    def _delay(self, attempt: int, exc: Exception) -> float | None:
        if isinstance(exc, RateLimited) and exc.retry_after is not None:
            if exc.retry_after > self.policy.retry_after_cap:
                return None
            return max(0.0, exc.retry_after)
        return self.policy.backoff(attempt)

    def _book(self, job: FileJob, delay: float, exc: Exception) -> None:
        logger.info(
            "[%s] file upload attempt %d failed (%s); retrying in %.1f s",
            self.channel_name,
            job.attempts,
            type(exc).__name__,
            delay,
        )
        with self._lock:
            closed = self._closed
            if not closed:
                self._waiting.add(job)
        if closed:
            self._fail(job, "the channel closed before the next attempt", exc, tell=False)
            return
        try:
            job.handle = self._scheduler.call_later(delay, self._resume, job)
        except Exception:
            with self._lock:
                self._waiting.discard(job)
            self._fail(job, refusal_reason(exc), exc, tell=True)

    def _resume(self, job: FileJob) -> None:
        with self._lock:
            if job not in self._waiting:
                return
            self._waiting.discard(job)
        job.handle = None
        try:
            self._lanes.post(job.lane, self.attempt, job)
        except Exception as exc:
            self._fail(job, "the channel closed before the next attempt", exc, tell=False)

    def _fail(self, job: FileJob, reason: str, exc: BaseException | None, *, tell: bool) -> None:
        if job.reply.done():
            return
        told = False
        if tell:
            line = job.texts.text(MSG_ATTACHMENT_NOT_SENT.format(name=job.file.name, reason=reason))
            try:
                self._tell(job.target, line)
                told = True
            except Exception as tell_exc:
                logger.warning(
                    "[%s] the line about a file not sent failed too: %s",
                    self.channel_name,
                    type(tell_exc).__name__,
                )
        logger.warning(
            "[%s] file not delivered to chat %s after %d attempt(s): %s",
            self.channel_name,
            job.target.chat_id,
            job.attempts,
            type(exc).__name__ if exc is not None else reason,
        )
        error = FileNotDelivered(
            name=job.file.name, reason=reason, told=told, attempts=job.attempts, cause=exc
        )
        if exc is not None:
            error.__cause__ = exc
        try:
            job.reply.set_exception(error)
        except Exception:  # completed meanwhile (InvalidStateError)
            pass
