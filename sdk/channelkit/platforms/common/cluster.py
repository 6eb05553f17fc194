"""Several processes, one bot: instance leases, the forwarding inbox and store outages.

Every channel built with a `StateStore` is one *instance* of
its bot. `Cluster` is the platform-neutral machinery an adapter uses for that:

* **identity**: `Cluster.instance_id` is the store's ``instance_id`` plus a
  per-channel suffix (two channels sharing one store object are two instances), and
  `Cluster.name` the configured ``instanceName`` (stable across restarts), if any;
* **lease**: the key ``<channel>:lease:<instance_id>`` is written with a TTL of
  ``lease_expiry_s`` (30 s) and renewed every ``lease_renew_s`` (5 s) by a timer on the
  channel's scheduler (the renewal itself runs on the pool). An instance whose lease key
  is gone is dead: a survivor recovers its records (`Cluster.alive()`);
* **sweep**: after each renewal (and once at start) the adapter's ``sweep(first)``
  runs on the pool: it finalizes what dead instances left (``first`` is True at start,
  when records of this instance's previous incarnation are recovered too);
* **inbox**: a claimed card action received by an instance that does not own the run
  is pushed to ``inbox:<owner instance_id>`` (after the ACK). One daemon thread per
  instance pops its inbox and hands every message to ``apply`` (which must not wait on
  a run: it posts the work to the pool);
* **outages**: every store error goes through `Cluster.unavailable()`, which logs
  one error per outage; the first success afterwards logs that the store is back;
* **fencing**: a survivor taking over a dead instance's records first writes
  ``<channel>:fenced:<instance_id>`` (`Cluster.fence()`). An instance trusts its lease
  until ``lease_expiry_s - lease_renew_s`` after its last successful renewal began
  (always before the store expires the lease key, so before any survivor can take
  over); past that, `Cluster.holds_lease()` renews synchronously first. A renewal that
  finds this instance fenced marks it `Cluster.fenced` for good: it logs that once as an
  error, calls ``on_fenced`` (the adapter stops its runs) and never writes to a card or
  settles a card action again. While the store cannot be reached the lease is trusted
  (nobody can take over without the store); the first renewal after the outage decides.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from channelkit.errors import ChannelKitError, StateStoreUnavailable
from channelkit.runtime.clock import Clock

if TYPE_CHECKING:
    from channelkit.runtime.scheduler import Scheduler, TimerHandle
    from channelkit.state import StateStore

__all__ = ["Cluster", "ClusterOptions"]

logger = logging.getLogger(__name__)

#: The key of the message stop() pushes to its own inbox to end a blocked pop.
_WAKE = "_channelkit_wake"


@dataclass(frozen=True)
class ClusterOptions:
    """``instanceName``, ``leaseRenewS`` (5), ``leaseExpiryS`` (30), ``claimTtlS``
    (3,600: how long a one-shot claim key lives), ``tombstoneTtlS`` (600)."""

    instance_name: str | None = None
    lease_renew_s: float = 5.0
    lease_expiry_s: float = 30.0
    claim_ttl_s: float = 3600.0
    tombstone_ttl_s: float = 600.0
    poll_s: float = 1.0  # the inbox pop's wait (the consumer's stop latency)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None) -> ClusterOptions:
        raw = raw or {}
        name = raw.get("instanceName")
        return cls(
            instance_name=str(name) if name else None,
            lease_renew_s=float(raw.get("leaseRenewS", 5.0)),
            lease_expiry_s=float(raw.get("leaseExpiryS", 30.0)),
            claim_ttl_s=float(raw.get("claimTtlS", 3600.0)),
            tombstone_ttl_s=float(raw.get("tombstoneTtlS", 600.0)),
        )


class Cluster:
    """One instance of a bot; see the module docstring."""

    def __init__(
        self,
        store: StateStore,
        *,
        channel: str,
        clock: Clock,
        scheduler: Scheduler,
        submit: Callable[[Callable[[], Any]], Any],
        apply: Callable[[dict[str, Any]], None],
        sweep: Callable[[bool], None],
        options: ClusterOptions | None = None,
    ) -> None:
        self.store = store
        self.options = options or ClusterOptions()
        self.channel = channel
        self.instance_id = f"{store.instance_id}.{secrets.token_hex(3)}"
        self.name = self.options.instance_name
        self._clock = clock
        self._scheduler = scheduler
        self._submit = submit
        self._apply = apply
        self._sweep = sweep
        self._stop = threading.Event()
        self._down = False
        self._down_lock = threading.Lock()
        self._timer: TimerHandle | None = None
        self._thread: threading.Thread | None = None
        #: store errors seen (diagnostics, tests)
        self.outages = 0
        #: True once a survivor took over this instance's records (never reset)
        self.fenced = False
        #: called once (on the pool) when this instance finds itself fenced
        self.on_fenced: Callable[[], None] | None = None
        self._lease_until = float("-inf")

    # -- keys ---------------------------------------------------------------------------
    def key(self, *parts: str) -> str:
        """``<channel>:<part>:<part>...``: the channel's own key space in the store."""
        return ":".join((self.channel, *parts))

    def inbox(self, instance_id: str) -> str:
        return f"inbox:{instance_id}"

    # -- outages ------------------------------------------------------------------------
    def unavailable(self, what: str, exc: BaseException) -> None:
        """Note a store failure: one error logged per outage."""
        with self._down_lock:
            first, self._down = not self._down, True
            self.outages += 1
        if first:
            logger.error(
                "[%s] state store unavailable (%s): card actions are refused until it is "
                "back: %s",
                self.channel,
                what,
                exc,
            )

    def reachable(self) -> None:
        """Note a store success (ends an outage)."""
        if self._down:
            with self._down_lock:
                was, self._down = self._down, False
            if was:
                logger.warning("[%s] state store reachable again", self.channel)

    @property
    def down(self) -> bool:
        return self._down

    def call(self, what: str, fn: Callable[[], Any]) -> Any:
        """``fn()`` against the store; None (logged once per outage) when it fails."""
        try:
            result = fn()
        except (StateStoreUnavailable, ChannelKitError, OSError) as exc:
            self.unavailable(what, exc)
            return None
        self.reachable()
        return result

    # -- lease ---------------------------------------------------------------------------
    def lease_key(self, instance_id: str) -> str:
        return self.key("lease", instance_id)

    def alive(self, instance_id: str) -> bool:
        """True while ``instance_id`` holds its lease (raises when the store is down)."""
        if instance_id == self.instance_id:
            return True
        return self.store.get(self.lease_key(instance_id)) is not None

    def fence_key(self, instance_id: str) -> str:
        return self.key("fenced", instance_id)

    def fence(self, instance_id: str) -> None:
        """Mark ``instance_id`` as taken over (before finalizing what it left): if it
        comes back it finds the mark and writes nothing more. Raises when the store is
        down."""
        self.store.put(
            self.fence_key(instance_id),
            {"by": self.instance_id, "at": self._clock.time()},
            ttl_s=self.options.claim_ttl_s,
        )

    def renew(self) -> bool:
        """Write this instance's lease, then check it was not fenced; False when the
        store is down or this instance is fenced."""
        if self.fenced:
            return False
        started = self._clock.time()
        value = {"instance": self.instance_id, "name": self.name or "", "at": started}
        ttl = self.options.lease_expiry_s
        key = self.lease_key(self.instance_id)
        fence = self.fence_key(self.instance_id)

        def put() -> str:
            self.store.put(key, value, ttl_s=ttl)
            return "fenced" if self.store.get(fence) is not None else "ok"

        outcome = self.call("lease", put)
        if outcome == "fenced":
            self._fenced()
            return False
        if outcome != "ok":  # the store is down: trusted until the next renewal's time,
            # so card writes do not each wait for a store that does not answer
            until = self._clock.time() + self.options.lease_renew_s
            self._lease_until = max(self._lease_until, until)
            return False
        margin = min(self.options.lease_renew_s, ttl / 2)
        self._lease_until = max(self._lease_until, started + ttl - margin)
        return True

    def holds_lease(self) -> bool:
        """True while this instance may write to its cards and settle its questions:
        not fenced, and its lease either fresh or renewed now (a store that cannot be
        reached leaves the lease trusted: nobody can take over without it)."""
        if self.fenced:
            return False
        if self._clock.time() < self._lease_until:
            return True
        self.renew()
        return not self.fenced

    def _fenced(self) -> None:
        with self._down_lock:
            first, self.fenced = not self.fenced, True
        if not first:
            return
        logger.error(
            "[%s] this instance lost its lease (instance %s): another instance took over "
            "its cards; its runs are stopped and it writes to no card again",
            self.channel,
            self.instance_id,
        )
        callback = self.on_fenced
        if callback is not None:
            try:
                self._submit(callback)
            except RuntimeError:  # the pool stopped: the channel is closing
                pass

    def start(self) -> None:
        """Take the lease, recover what a previous incarnation left, start the inbox
        consumer and the renewal timer."""
        self.renew()
        self._submit(lambda: self._run_sweep(True))
        self._thread = threading.Thread(
            target=self._consume, name=f"{self.channel}-inbox", daemon=True
        )
        self._thread.start()
        self._schedule()

    def _schedule(self) -> None:
        if self._stop.is_set():
            return
        try:
            self._timer = self._scheduler.call_later(self.options.lease_renew_s, self._tick)
        except RuntimeError:  # the scheduler stopped: the channel is closing
            self._timer = None

    def _tick(self) -> None:
        if self._stop.is_set():
            return
        try:
            self._submit(self._renew_and_sweep)
        except RuntimeError:
            return
        self._schedule()

    def _renew_and_sweep(self) -> None:
        if self._stop.is_set():
            return
        if self.renew():
            self._run_sweep(False)

    def _run_sweep(self, first: bool) -> None:
        try:
            self._sweep(first)
        except (StateStoreUnavailable, OSError) as exc:
            self.unavailable("recovery", exc)
        except Exception:
            logger.exception("[%s] recovery sweep failed", self.channel)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop renewing and consuming (the lease then expires on its own).

        The consumer may be blocked in the inbox pop for up to ``poll_s``: a wake-up
        message pushed to this instance's own inbox ends that wait at once (the consumer
        drops it), so a channel closes without waiting out the poll. When the store is
        down the push fails and the join waits for the pop's own timeout instead.
        """
        self._stop.set()
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            if thread.is_alive():
                try:
                    self.store.push(self.inbox(self.instance_id), {_WAKE: self.instance_id})
                except Exception:  # the store is down: the pop ends on its own timeout
                    logger.debug("[%s] could not wake the inbox consumer", self.channel)
            thread.join(timeout)

    # -- inbox ---------------------------------------------------------------------------
    def forward(self, instance_id: str, message: Mapping[str, Any]) -> bool:
        """Push ``message`` to the inbox of ``instance_id``; False when the store is down."""
        inbox = self.inbox(instance_id)

        def push() -> bool:
            self.store.push(inbox, message)
            return True

        return self.call("forward", push) is True

    def _consume(self) -> None:
        inbox = self.inbox(self.instance_id)
        wait = 0.05
        while not self._stop.is_set():
            try:
                message = self.store.pop(inbox, self.options.poll_s)
            except Exception as exc:
                self.unavailable("inbox", exc)
                self._stop.wait(wait)  # a real wait: the store is down, nothing to do
                wait = min(2.0, wait * 2)
                continue
            wait = 0.05
            self.reachable()
            if message is None or _WAKE in message:
                continue  # nothing arrived, or stop() woke the pop (a stale wake: dropped)
            try:
                self._apply(message)
            except Exception:
                logger.exception("[%s] forwarded action failed", self.channel)
