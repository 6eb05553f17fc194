"""Long connections: one thread per connection that connects, reads, ACKs and hands on.

A bot without a public HTTPS address reaches its platform through a long connection
(a WebSocket gateway, or long polling). Every such connection is a
`LongConnection`: one daemon thread runs `LongConnection.serve_once()` (one
connection's life: connect, then read frames, verify, ACK and hand slow work to the
pool, exactly like a web handler), and when it returns or raises, waits a capped,
jittered backoff and connects again, until `LongConnection.stop()`. Nothing else
waits on the connection thread: handlers ACK first and hand work on.

Its `ConnectionState` (connecting, connected, reconnecting with the attempt
count and the last error, stopped) is what ``/healthz`` reports.

A failure that is the platform refusing the credentials (an `AuthError`: a token
revoked while running) is not a network hiccup: the state's ``last_error`` says
"credentials refused by the platform" (``/healthz`` answers 503 with it), the next
attempts back off by `REFUSED_BACKOFF` (the first wait 30-60 s, doubling up to 5 min;
never the 0.5 s of a dropped connection), and the log says so once at ERROR, then at
most every `REFUSED_LOG_INTERVAL_S` while it lasts, and once at INFO when a connection
succeeds again.

A channel that owns connections exposes them as ``channel.connections`` (see
`connections_of()`); `start_connections()` starts them and the channel's close
stops them within its grace period.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from channelkit.errors import AuthError
from channelkit.http import retry
from channelkit.observability import hub
from channelkit.runtime.clock import Clock, SystemClock

__all__ = [
    "REFUSED_BACKOFF",
    "REFUSED_LOG_INTERVAL_S",
    "Backoff",
    "ConnectionState",
    "LongConnection",
    "connections_of",
    "start_connections",
    "stop_connections",
]

logger = logging.getLogger(__name__)

Status = Literal["idle", "connecting", "connected", "reconnecting", "stopped"]

#: (base, cap) seconds of the backoff after the platform refused the credentials
REFUSED_BACKOFF = (60.0, 300.0)
#: while the credentials stay refused, the ERROR line repeats at most this often
REFUSED_LOG_INTERVAL_S = 600.0


@dataclass(frozen=True)
class ConnectionState:
    """A snapshot of one long connection, as ``/healthz`` reports it."""

    name: str
    status: Status
    attempt: int = 0  # failed attempts since the last successful connection
    last_error: str | None = None  # the exception type and a short reason, never a secret
    since: float = 0.0  # wall-clock time (epoch seconds) of the last status change

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


class Backoff:
    """Capped exponential backoff with equal jitter: ``d/2 + random() * d/2`` where
    ``d = min(cap, base * 2**(n-1))`` for the n-th consecutive failure."""

    def __init__(
        self,
        base: float = 0.5,
        cap: float = 30.0,
        *,
        jitter: Callable[[], float] = retry.jitter,
    ) -> None:
        if base < 0 or cap < 0:
            raise ValueError("base and cap: must not be negative")
        self.base = base
        self.cap = cap
        self._jitter = jitter
        self.failures = 0

    def next(self) -> float:
        """The wait before the next attempt (counts one more failure)."""
        self.failures += 1
        ceiling = min(self.cap, self.base * (2.0 ** (self.failures - 1)))
        return ceiling / 2 + self._jitter() * ceiling / 2

    def reset(self) -> None:
        """A connection succeeded: the next failure starts from ``base`` again."""
        self.failures = 0


class LongConnection:
    """One long connection and its thread; subclasses implement `serve_once()`.

    ``wait(stop_event, seconds) -> bool`` waits out a backoff and returns True when the
    connection was stopped meanwhile; the default is ``stop_event.wait(seconds)``. Tests
    inject one that records the delay and returns at once (they never sleep for real).
    ``refused_backoff`` replaces the backoff used while the platform refuses the
    credentials (default `Backoff(*REFUSED_BACKOFF)`).
    """

    def __init__(
        self,
        name: str,
        *,
        clock: Clock | None = None,
        backoff: Backoff | None = None,
        wait: Callable[[threading.Event, float], bool] | None = None,
        refused_backoff: Backoff | None = None,
    ) -> None:
        self.name = name
        self._clock = clock if clock is not None else SystemClock()
        self.backoff = backoff if backoff is not None else Backoff()
        #: the backoff while the platform refuses the credentials (see the module doc)
        self.refused_backoff = refused_backoff or Backoff(*REFUSED_BACKOFF)
        self._refused_logged_at: float | None = None  # loop thread only
        self._wait = wait if wait is not None else (lambda event, seconds: event.wait(seconds))
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._state = ConnectionState(name, "idle", since=self._clock.time())

    # -- what subclasses implement ----------------------------------------------------
    def serve_once(self) -> None:
        """One connection's life: connect, call `connected()` once it is up, read
        until the peer or `stop()` ends it. Return for a clean end (reconnect at
        once, e.g. on a server's ``disconnect`` request); raise on a failure (reconnect
        after a backoff)."""
        raise NotImplementedError

    def interrupt(self) -> None:
        """Unblock a read in progress (close the socket); called by `stop()`."""

    # -- for subclasses ---------------------------------------------------------------
    @property
    def stopping(self) -> bool:
        """True once `stop()` was called: end the read loop."""
        return self._stop.is_set()

    def connected(self) -> None:
        """Mark the connection up (resets the backoff)."""
        self.backoff.reset()
        self.refused_backoff.reset()
        if self._refused_logged_at is not None:
            self._refused_logged_at = None
            logger.info("%s: the platform accepts the credentials again; connected", self.name)
        self._set("connected", attempt=0, last_error=None)

    # -- lifecycle --------------------------------------------------------------------
    def start(self) -> None:
        """Start the connection's thread (once; later calls do nothing)."""
        with self._lock:
            if self._thread is not None or self._stop.is_set():
                return
            thread = threading.Thread(
                target=self._loop, name=f"channelkit-{self.name}", daemon=True
            )
            thread.start()
            # published only once started, under the lock `stop()` reads it with: a stop
            # racing this start sees no thread or a started one, never one it cannot join
            self._thread = thread

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop reading and reconnecting; True when the thread ended within ``timeout``."""
        self._stop.set()
        try:
            self.interrupt()
        except Exception:
            logger.debug("%s: interrupt failed", self.name, exc_info=True)
        with self._lock:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            alive = thread.is_alive()
        else:
            alive = False
        self._set("stopped")
        return not alive

    def state(self) -> ConnectionState:
        """The current `ConnectionState`."""
        with self._lock:
            return self._state

    # -- the loop ---------------------------------------------------------------------
    def _set(self, status: Status, **changes: Any) -> None:
        with self._lock:
            current = self._state
            fields = {
                "attempt": changes.get("attempt", current.attempt),
                "last_error": changes.get("last_error", current.last_error),
            }
            self._state = ConnectionState(self.name, status, since=self._clock.time(), **fields)
        # the one place a connection's status changes: its log line and gauge
        hub.connection_state(self.name, current.status, status)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._set("connecting")
            try:
                self.serve_once()
            except Exception as exc:
                if self._stop.is_set():
                    break
                reason = f"{type(exc).__name__}: {str(exc)[:200]}"
                attempt = self.state().attempt + 1
                if isinstance(exc, AuthError):
                    delay = self.refused_backoff.next()
                    reason = f"credentials refused by the platform: {reason}"
                    self._set("reconnecting", attempt=attempt, last_error=reason)
                    self._log_refused(exc, delay, attempt)
                else:
                    delay = self.backoff.next()
                    self._set("reconnecting", attempt=attempt, last_error=reason)
                    logger.warning(
                        "%s: connection failed (%s); reconnecting in %.1f s (attempt %d)",
                        self.name,
                        type(exc).__name__,
                        delay,
                        attempt,
                    )
                if self._wait(self._stop, delay):
                    break
                continue
            if not self._stop.is_set():
                self._set("reconnecting")  # a clean end: the peer asked for a reconnect
        self._set("stopped")

    def _log_refused(self, exc: AuthError, delay: float, attempt: int) -> None:
        """ERROR once, then at most every `REFUSED_LOG_INTERVAL_S` (DEBUG between)."""
        now = self._clock.now()
        last = self._refused_logged_at
        if last is not None and now - last < REFUSED_LOG_INTERVAL_S:
            logger.debug("%s: credentials still refused (attempt %d)", self.name, attempt)
            return
        self._refused_logged_at = now
        logger.error(
            "%s: the platform refused the credentials (%s: HTTP %s); /healthz answers 503 "
            "until it accepts them; trying again in %.0f s (attempt %d; repeated here at "
            "most every %.0f s)",
            self.name,
            type(exc).__name__,
            exc.status,
            delay,
            attempt,
            REFUSED_LOG_INTERVAL_S,
        )


def connections_of(channel: object) -> Sequence[LongConnection]:
    """The long connections a channel owns (``channel.connections``; empty if none)."""
    found = getattr(channel, "connections", ())
    return tuple(c for c in found if isinstance(c, LongConnection))


def start_connections(channels: Iterable[object]) -> list[LongConnection]:
    """Start every long connection of ``channels``; returns them."""
    started: list[LongConnection] = []
    for channel in channels:
        for connection in connections_of(channel):
            connection.start()
            started.append(connection)
    return started


def stop_connections(connections: Iterable[LongConnection], timeout: float) -> bool:
    """Stop ``connections`` (each within what is left of ``timeout``); True if all ended."""
    clock = SystemClock()
    deadline = clock.now() + timeout
    ok = True
    for connection in connections:
        ok = connection.stop(max(0.0, deadline - clock.now())) and ok
    return ok
