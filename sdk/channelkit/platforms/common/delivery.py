"""Nothing lost: the final answer's delivery chain (retries, alternate paths, health).

A final answer is one or more *parts* (a long answer is split by the platform's size
limit), sent in order. Each part has ordered alternate *paths* (Telegram: formatted ->
plain text; Feishu: card -> text; DingTalk: robot API -> trusted session webhook), each
a callable making one send. `DeliveryChain.deliver()` sends every part, giving each
path up to ``max_attempts`` attempts (default 4) with capped, "equal jitter" exponential
backoff (`channelkit.http.retry.RetryPolicy.backoff()`).

Liveness (why no worker ever waits for a later attempt)
    The first attempt runs on the calling thread (the run's ``on_response_complete``
    hook), so an answer that goes out at once is shown before the run's ``completed``
    event, as before. When an attempt fails and a wait is due, the chain does *not*
    wait: it books the next attempt on the channel's `Scheduler`
    (``call_later``) and returns; the hook returns and frees its worker. When the timer
    is due, the scheduler hands the continuation to the hook pool, which makes the next
    attempt(s) and, if needed, books the next timer. No thread blocks on an event that
    another pool task must set, so the chain makes progress with every pool at one
    worker; a pending answer costs one timer, not a thread. The run itself completes
    while a retry is pending (its answer is already in the chain's hands); only a
    failure with nothing left to wait for is raised to the hook (``raise_if_refused``),
    which fails the run in phase ``delivery`` as before.

What is retried (each case is one branch of `classify()`)
    * `RateLimited` (HTTP 429, Telegram ``retry_after``, the
      platforms' rate-limit codes): the platform refused, nothing was shown; retried
      after ``Retry-After`` / ``retry_after`` (capped at ``retry_after_cap``), else after
      the backoff.
    * `ServerError` and any ``retryable`` `ApiError`
      (5xx, documented retryable codes): the platform answered that it failed; retried.
    * A transport failure *before the request was sent* (connect timeout, connection
      refused / reset while connecting:
      `channelkit.http.retry.failed_before_sending()`): nothing left; retried.
    * A malformed answer (garbage, too-deep JSON, wrong types:
      `DeserializationError`, ``ValueError``,
      ``RecursionError``) is a failed call and retried like a 5xx.
    * A read timeout or a reset *after the request was sent*: the outcome is unknown, the
      person may already see the answer. It is retried only on a path marked
      ``idempotent`` (an idempotency key makes a duplicate impossible: Feishu's message
      ``uuid``); elsewhere the chain stops, because neither a retry nor another path can
      rule out a duplicate. Such an answer is counted ``failed`` and ``uncertain``.
    * Any other failure (400, 403, 404, an unknown route...) is a definite refusal of
      that path: the next path is tried at once (nothing was shown, so no duplicate).

    When a path's attempts are used up the next path is tried, unless an attempt of the
    part had an unknown outcome (then no other path is tried, for the same reason).

Waiting for a rate-limit token
    Every attempt runs inside `channelkit.platforms.common.rate_limit.no_wait()`: a path
    whose call would wait for its chat's (or the bot's) token raises `Throttled` instead
    of sleeping on the worker (each path makes one call, so nothing went out). Its next
    try is booked on the scheduler after the wait, and no attempt is counted. An answer
    told to wait for `THROTTLE_PATIENCE_S` in all makes its next attempt outside
    `no_wait()`: the call then takes its turn in the bucket's line (bounded by the
    pacer's own ``max_wait_s``, after which it goes without a token), so a busy bucket
    never starves it.

When every path failed
    One structured ``ERROR`` log record per answer (logger
    ``channelkit.platforms.common.delivery``, ``extra={"delivery": {...}}`` with channel,
    run id, owner id, chat, part, attempts and reason; never the answer's text, never
    an exception message that could echo it) and `DeliveryHealth` counters
    (``channel.delivery_health``): ``delivered``, ``retried`` (answers that needed a
    retry or an alternate path), ``failed`` (answers not delivered), ``uncertain`` (of
    those, answers whose last attempt had an unknown outcome).

`DeliveryChain.close()` (the adapter's ``on_close``) cancels pending retries and
reports each of those answers as failed (reason ``channel closed``).

How each answer ended is reported to ``on_outcome(run_id, outcome)`` (the channel's
``note_final_delivery``): ``delivered``; ``refused`` (failed at once, raised to the hook:
the run fails and says so); ``uncertain`` (an unknown outcome, not sent again) or
``failed`` (a later attempt failed, nobody waiting): the core keeps the answer for
``/last`` and hints at it on the person's next message.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from channelkit.core.last_answers import DeliveryOutcome
from channelkit.errors import (
    ApiError,
    ChannelKitError,
    DeserializationError,
    RateLimited,
    TransportError,
)
from channelkit.http.retry import RetryPolicy, failed_before_sending
from channelkit.observability import hub, tracing
from channelkit.platforms.common.rate_limit import DEFAULT_MAX_WAIT_S, Throttled, no_wait
from channelkit.runtime.scheduler import Scheduler, TimerHandle

__all__ = [
    "DEFAULT_ATTEMPTS",
    "THROTTLE_PATIENCE_S",
    "DeliveryChain",
    "DeliveryHealth",
    "DeliveryJob",
    "DeliveryPath",
    "DeliveryTarget",
    "classify",
    "default_policy",
]

logger = logging.getLogger(__name__)

#: Attempts per path.
DEFAULT_ATTEMPTS = 4
#: Clock seconds an answer is told to wait for rate-limit tokens before its next attempt
#: waits in the bucket's line instead (the pacer's own bound).
THROTTLE_PATIENCE_S = DEFAULT_MAX_WAIT_S

Verdict = Literal["retry", "unknown", "refused"]


def default_policy() -> RetryPolicy:
    """4 attempts per path; backoff 1 s doubling, capped at 30 s; Retry-After capped at
    60 s. The policy is only read (``backoff``), never asked to sleep."""
    return RetryPolicy(
        max_attempts=DEFAULT_ATTEMPTS, backoff_base=1.0, backoff_cap=30.0, retry_after_cap=60.0
    )


@dataclass(frozen=True)
class DeliveryPath:
    """One way to send one part: ``send()`` makes one attempt (raising on failure).

    ``idempotent``: a repeated attempt cannot show the part twice (an idempotency key
    is sent, the same on every attempt), so an unknown outcome may be retried.
    """

    name: str
    send: Callable[[], object]
    idempotent: bool = False


@dataclass(frozen=True)
class DeliveryTarget:
    """Who the answer is for (logged when it is lost; never the text)."""

    channel: str
    chat_id: str
    run_id: str | None = None
    owner_id: str | None = None


class DeliveryHealth:
    """Per-channel counters of final-answer delivery (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.delivered = 0
        self.retried = 0
        self.failed = 0
        self.uncertain = 0

    def _add(self, name: str) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)

    def snapshot(self) -> dict[str, int]:
        """``{"delivered", "retried", "failed", "uncertain"}`` at one instant."""
        with self._lock:
            return {
                "delivered": self.delivered,
                "retried": self.retried,
                "failed": self.failed,
                "uncertain": self.uncertain,
            }


def classify(error: BaseException) -> Verdict:
    """``retry`` (nothing was shown, a later attempt may succeed), ``unknown`` (the
    request was sent, the outcome is unknown) or ``refused`` (nothing was shown; this
    path will not work). See the module docstring for each case."""
    if isinstance(error, RateLimited):
        return "retry"  # the platform throttled: nothing shown
    if isinstance(error, ApiError):
        # 5xx / documented retryable codes: the platform answered that it failed
        return "retry" if error.retryable else "refused"
    if isinstance(error, TransportError):
        # before sending: nothing left; after sending: may have been shown
        return "retry" if failed_before_sending(error) else "unknown"
    if isinstance(error, DeserializationError | ValueError | RecursionError):
        return "retry"  # an answer we cannot read is a failed call
    if isinstance(error, ChannelKitError):
        return "refused"
    return "refused"


class DeliveryJob:
    """One answer on its way: where it is, and how it ended.

    ``state`` is ``pending``, ``delivered`` or ``failed``; ``done`` is set when it ended.
    Touched by one thread at a time (the caller, then one timer continuation at a time).
    """

    def __init__(
        self, parts: Sequence[Sequence[DeliveryPath]], target: DeliveryTarget, now: float
    ) -> None:
        self.parts = [tuple(p) for p in parts]
        self.target = target
        self.started_at = now
        self.finished_at: float | None = None
        self.state: Literal["pending", "delivered", "failed"] = "pending"
        self.reason: str | None = None
        self.error: BaseException | None = None
        self.attempts = 0  # every attempt of every part and path
        self.uncertain = False
        self.retried = False
        self.done = threading.Event()
        self._part = 0
        self._path = 0
        self._attempt = 0  # attempts of the current path
        self._part_unknown = False  # an attempt of the current part had an unknown outcome
        self._handle: TimerHandle | None = None
        self._sync = True  # still on the thread that called deliver()
        self._sync_failure = False
        self._span: object = None  # its trace span (tracing.SPAN_DELIVERY), ended in _finish
        self._throttled_since: float | None = None  # first told to wait for a token

    @property
    def latency(self) -> float | None:
        """Clock seconds from ``deliver`` to the end (``None`` while pending)."""
        return None if self.finished_at is None else self.finished_at - self.started_at

    def raise_if_refused(self) -> None:
        """Raise the last error when the answer failed at once with a definite refusal
        (nothing to wait for, nothing possibly shown): the hook fails the run as before.
        A pending answer, or one that may have been shown, raises nothing."""
        if self.state == "failed" and self._sync_failure and self.error is not None:
            raise self.error


class DeliveryChain:
    """Delivers final answers (see the module docstring). One per channel.

    ``scheduler`` is the channel's scheduler (its clock times the backoff and its pool
    runs the continuations); ``policy`` gives ``max_attempts``, the backoff and the
    ``Retry-After`` cap (`default_policy()`).
    """

    def __init__(
        self,
        scheduler: Scheduler,
        *,
        policy: RetryPolicy | None = None,
        health: DeliveryHealth | None = None,
        on_outcome: Callable[[str | None, DeliveryOutcome], None] | None = None,
    ) -> None:
        self._scheduler = scheduler
        self._on_outcome = on_outcome
        self.policy = policy if policy is not None else default_policy()
        self.health = health if health is not None else DeliveryHealth()
        self._lock = threading.Lock()
        self._pending: set[DeliveryJob] = set()
        self._closed = False

    @property
    def pending(self) -> int:
        """Answers waiting for a retry."""
        with self._lock:
            return len(self._pending)

    def deliver(
        self, parts: Sequence[Sequence[DeliveryPath]], target: DeliveryTarget
    ) -> DeliveryJob:
        """Send ``parts`` in order; returns once delivered, failed, or a retry is booked.

        Never waits for a later attempt (see the module docstring)."""
        job = DeliveryJob(parts, target, self._scheduler.clock.now())
        if tracing.tracing_enabled():
            job._span = tracing.start_span(
                tracing.SPAN_DELIVERY,
                {
                    "channelkit.platform": hub.platform_for(target.channel),
                    "channelkit.channel": target.channel,
                    "channelkit.run_id": target.run_id,
                },
            )
        with tracing.use_span(job._span):  # its API calls are the delivery's children
            self._run(job)
        job._sync = False
        return job

    def close(self) -> None:
        """Cancel every pending retry; each of those answers is reported failed."""
        with self._lock:
            self._closed = True
            jobs = list(self._pending)
        for job in jobs:
            handle = job._handle
            if handle is not None and handle.cancel():
                self._fail(job, "channel closed before the next attempt")

    # -- internals ---------------------------------------------------------------------

    def _resume(self, job: DeliveryJob) -> None:
        with self._lock:
            self._pending.discard(job)
        job._handle = None
        with tracing.use_span(job._span):
            self._run(job)

    def _run(self, job: DeliveryJob) -> None:
        while job._part < len(job.parts):
            paths = job.parts[job._part]
            if job._path >= len(paths):
                job.error = ChannelKitError("no delivery path for this answer")
                self._fail(job, "no delivery path")
                return
            path = paths[job._path]
            job._attempt += 1
            job.attempts += 1
            now = self._scheduler.clock.now()
            since = job._throttled_since
            patient = since is not None and now - since >= THROTTLE_PATIENCE_S
            try:
                if patient:  # told to wait long enough: take a turn in the line
                    path.send()
                else:
                    with no_wait():
                        path.send()
            except Throttled as exc:  # our own rate limit: a wait, not an attempt
                job._attempt -= 1
                job.attempts -= 1
                if since is None:
                    job._throttled_since = now
                self._book(job, exc.wait, retried=False)
                return
            except Exception as exc:
                if not self._after_failure(job, path, exc):
                    return
                continue
            job._part += 1
            job._path = 0
            job._attempt = 0
            job._part_unknown = False
            job._throttled_since = None
        self._finish(job, "delivered")

    def _after_failure(self, job: DeliveryJob, path: DeliveryPath, exc: Exception) -> bool:
        """Decide after a failed attempt. True: go on now; False: stop here (a retry
        was booked, or the answer failed)."""
        job.error = exc
        verdict = classify(exc)
        where = f"{path.name} attempt {job._attempt}"
        if verdict == "unknown":
            job._part_unknown = True
            if not path.idempotent:
                # sent, outcome unknown, no idempotency key: a retry or another path
                # could show it twice
                self._fail(job, f"outcome unknown after {_describe(exc)} ({where})", True)
                return False
        if verdict in ("retry", "unknown"):
            if job._attempt < self.policy.max_attempts:
                self._book(job, self._delay(job._attempt, exc))
                return False
            if job._part_unknown:
                # an earlier attempt may have shown it; another path could duplicate it
                self._fail(job, f"outcome unknown after {_describe(exc)} ({where})", True)
                return False
        # a definite refusal, or this path's attempts are used up: the next path
        paths = job.parts[job._part]
        if job._path + 1 >= len(paths):
            self._fail(job, f"{_describe(exc)} ({where}, every path failed)")
            return False
        logger.info(
            "[%s] final answer: %s failed (%s); trying %s",
            job.target.channel,
            path.name,
            _describe(exc),
            paths[job._path + 1].name,
        )
        job._path += 1
        job._attempt = 0
        self._mark_retried(job)
        hub.delivery(job.target.channel, "alternate_path")
        return True

    def _delay(self, attempt: int, exc: Exception) -> float:
        if isinstance(exc, RateLimited) and exc.retry_after is not None:
            return min(max(0.0, exc.retry_after), self.policy.retry_after_cap)
        return self.policy.backoff(attempt)

    def _book(self, job: DeliveryJob, delay: float, *, retried: bool = True) -> None:
        if retried:
            self._mark_retried(job)
            hub.delivery(job.target.channel, "retried")
        with self._lock:
            closed = self._closed
            if not closed:
                self._pending.add(job)
        if closed:
            self._fail(job, "channel closed before the next attempt")
            return
        try:
            job._handle = self._scheduler.call_later(delay, self._resume, job)
        except Exception:
            with self._lock:
                self._pending.discard(job)
            self._fail(job, "the scheduler is stopped")

    def _mark_retried(self, job: DeliveryJob) -> None:
        if not job.retried:
            job.retried = True
            self.health._add("retried")

    def _fail(self, job: DeliveryJob, reason: str, uncertain: bool = False) -> None:
        job.reason = reason
        job.uncertain = uncertain
        job._sync_failure = job._sync and not uncertain
        self.health._add("failed")
        if uncertain:
            self.health._add("uncertain")
        target = job.target
        logger.error(
            "[%s] final answer not delivered: run=%s owner=%s chat=%s part=%d/%d "
            "attempts=%d reason=%s",
            target.channel,
            target.run_id,
            target.owner_id,
            target.chat_id,
            job._part + 1,
            len(job.parts),
            job.attempts,
            reason,
            extra={
                "delivery": {
                    "channel": target.channel,
                    "run_id": target.run_id,
                    "owner_id": target.owner_id,
                    "chat_id": target.chat_id,
                    "part": job._part + 1,
                    "parts": len(job.parts),
                    "attempts": job.attempts,
                    "uncertain": uncertain,
                    "reason": reason,
                }
            },
        )
        self._finish(job, "failed")

    def _finish(self, job: DeliveryJob, state: Literal["delivered", "failed"]) -> None:
        if state == "delivered":
            self.health._add("delivered")
        job.state = state
        job.finished_at = self._scheduler.clock.now()
        job.done.set()
        ended = "delivered" if state == "delivered" else "uncertain" if job.uncertain else "lost"
        hub.delivery(job.target.channel, ended)
        tracing.end_span(
            job._span,
            {"channelkit.outcome": ended, "channelkit.attempts": job.attempts},
            error=None if state == "delivered" else ended,
        )
        if self._on_outcome is not None:
            outcome: DeliveryOutcome
            if state == "delivered":
                outcome = "delivered"
            elif job.uncertain:
                outcome = "uncertain"
            else:
                outcome = "refused" if job._sync_failure else "failed"
            try:
                self._on_outcome(job.target.run_id, outcome)
            except Exception:
                logger.exception("[%s] delivery outcome listener failed", job.target.channel)


def _describe(exc: BaseException) -> str:
    """The error's kind, status and code: never its message (which may echo the text)."""
    if isinstance(exc, ApiError):
        code = f" code {exc.code}" if exc.code is not None else ""
        return f"{type(exc).__name__} HTTP {exc.status}{code}"
    if isinstance(exc, TransportError):
        sent = "before sending" if failed_before_sending(exc) else "after sending"
        return f"{type(exc).__name__} {sent}"
    return type(exc).__name__
