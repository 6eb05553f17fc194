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
* **fencing**: each lease acquisition gets a fencing token, the next value of the
  counter ``<channel>:lease-token`` (`StateStore.hold_lease()`, one atomic step in the
  store); the lease key holds it and a renewal succeeds only while the key still holds
  it. Every record this instance writes about its runs and cards, every card action
  claim it takes and every forwarded action it settles goes through `Cluster.write()`,
  which the store accepts only while the lease key holds this instance's token
  (`StateStore.write_if()`: the check and the write are one Lua script in Redis, one
  locked step in memory). A survivor takes over a dead instance with
  `Cluster.take_over()`: an atomic ``add`` of a fence mark on its expired lease key, so
  either the instance renewed first (it is alive: nothing is taken) or no token of it is
  ever accepted again. An instance trusts its lease until ``lease_expiry_s -
  lease_renew_s`` after its last successful renewal began (always before the store
  expires the lease key, so before any survivor can take over); past that,
  `Cluster.holds_lease()` renews synchronously first. A renewal or a write the store
  refuses marks it `Cluster.fenced` for good: it logs that once as an error, calls
  ``on_fenced`` (the adapter stops its runs) and never writes to a card or settles a
  card action again. While the store cannot be reached the lease is trusted (nobody can
  take over without the store); the first renewal after the outage decides.
* **an empty store**: a renewal that finds its lease key gone without a fence mark
  (Redis restarted empty, or flushed) takes a new token and calls ``on_reacquired``:
  the adapter writes its live runs and cards again, so a callback reaching another
  instance finds their owner. A lease gone after this instance went longer than the
  lease's expiry without a successful renewal (paused, cut off) is not taken again when
  the store was wiped meanwhile or the silence outlived a fence mark
  (``claim_ttl_s``): a survivor may have taken over, so the instance fences itself.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from channelkit.errors import ChannelKitError, StateStoreUnavailable
from channelkit.platforms.common.store_watch import watch_of
from channelkit.runtime.clock import Clock
from channelkit.state.base import CLAIM_MISMATCH, GUARD_ABSENT, GUARD_STALE

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
        #: called (on the pool) when a renewal took the lease again after the store lost
        #: it (restarted empty, flushed): the adapter writes its live records again
        self.on_reacquired: Callable[[], None] | None = None
        #: this instance's fencing token (0 before the first renewal)
        self.token = 0
        #: times the lease was taken again after the store lost it (diagnostics, tests)
        self.reacquired = 0
        self._lease_until = float("-inf")
        self._last_renewed = float("-inf")  # when the last successful renewal began
        self._renew_lock = threading.Lock()  # one renewal at a time: tokens stay in step

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
        lease = self.store.get(self.lease_key(instance_id))
        return lease is not None and "token" in lease

    def token_key(self) -> str:
        """The counter every lease acquisition of this channel takes its token from."""
        return self.key("lease-token")

    def take_over(self, instance_id: str, *, force: bool = False) -> bool:
        """Fence ``instance_id`` before finalizing what it left: True when it is dead and
        fenced (by this call or an earlier survivor), False when it holds its lease.

        The fence mark is added to its lease key only when that key is absent (expired),
        atomically, so an instance that renewed in time is never fenced; ``force``
        (this instance's own previous incarnation, by ``instanceName``) writes it over a
        live lease. Raises when the store is down."""
        if instance_id == self.instance_id:
            return False
        key = self.lease_key(instance_id)
        mark = {"fencedBy": self.instance_id, "at": self._clock.time()}
        ttl = self.options.claim_ttl_s
        if force:
            self.store.put(key, mark, ttl_s=ttl)
            return True
        if self.store.add(key, mark, ttl_s=ttl):
            return True
        lease = self.store.get(key)
        return lease is not None and "token" not in lease

    def fence(self, instance_id: str) -> None:
        """`take_over()` with ``force``: fence ``instance_id`` whatever its lease."""
        self.take_over(instance_id, force=True)

    # -- fenced writes -------------------------------------------------------------------
    def guarded(
        self,
        key: str,
        value: Mapping[str, Any] | None,
        *,
        ttl_s: float | None = None,
        only_if_absent: bool = False,
    ) -> str:
        """Write ``key`` (None: delete) only while this instance's token is current, in
        one atomic step in the store; the `StateStore.write_if()` outcome. A stale
        token fences this instance (and answers `GUARD_STALE` from then on); a lease the
        store lost is taken again once (a renewal) and the write retried. Raises
        `StateStoreUnavailable` when the store is down."""
        for attempt in range(3):
            if self.fenced:
                return GUARD_STALE
            token = self.token
            if token <= 0:  # no lease taken yet (the store did not answer at start)
                if not self.renew() and not self.fenced:
                    raise StateStoreUnavailable(
                        f"state store unavailable: [{self.channel}] holds no lease yet"
                    )
                continue
            outcome = self.store.write_if(
                self.lease_key(self.instance_id),
                "token",
                token,
                key,
                value,
                ttl_s=ttl_s,
                only_if_absent=only_if_absent,
            )
            if outcome == GUARD_STALE:
                with self._renew_lock:  # a renewal that changed the token has ended
                    current = self.token
                if current == token:
                    self._fenced()
                    return GUARD_STALE
            if outcome in (GUARD_STALE, GUARD_ABSENT) and attempt < 2:
                if outcome == GUARD_ABSENT:
                    self.renew()
                continue
            return outcome
        return GUARD_STALE if self.fenced else GUARD_ABSENT

    def claim_record(
        self,
        record: str,
        match: Mapping[str, str],
        claim: str,
        value: Mapping[str, Any],
        *,
        ttl_s: float | None = None,
    ) -> tuple[dict[str, Any] | None, str]:
        """Read ``record`` and, when its ``match`` fields agree, take the one-shot claim
        ``claim`` carrying this instance's token, in one round trip
        (`StateStore.claim_matching()`); a stale or lost lease goes through `guarded()`
        (renewal, fencing). Raises `StateStoreUnavailable` when the store is down."""
        token = self.token
        if self.fenced or token <= 0:
            found = self.store.get(record)
            if found is None or any(str(found.get(k)) != v for k, v in match.items()):
                return found, CLAIM_MISMATCH
            return found, self.guarded(claim, value, ttl_s=ttl_s, only_if_absent=True)
        found, outcome = self.store.claim_matching(
            record,
            match,
            claim,
            value,
            guard=self.lease_key(self.instance_id),
            field="token",
            expected=token,
            ttl_s=ttl_s,
        )
        if outcome in (GUARD_STALE, GUARD_ABSENT):
            outcome = self.guarded(claim, value, ttl_s=ttl_s, only_if_absent=True)
        return found, outcome

    def write(
        self,
        what: str,
        key: str,
        value: Mapping[str, Any] | None,
        *,
        ttl_s: float | None = None,
        only_if_absent: bool = False,
    ) -> str | None:
        """`guarded()` through `call()`: None (logged once per outage) when the store is
        down."""
        outcome = self.call(
            what, lambda: self.guarded(key, value, ttl_s=ttl_s, only_if_absent=only_if_absent)
        )
        return outcome if isinstance(outcome, str) else None

    # -- renewal -------------------------------------------------------------------------
    def renew(self) -> bool:
        """Renew this instance's lease (or take it, with a new token); False when the
        store is down or this instance is fenced."""
        ttl = self.options.lease_expiry_s
        key = self.lease_key(self.instance_id)
        with self._renew_lock:
            if self.fenced:
                return False
            started = self._clock.time()
            value = {"instance": self.instance_id, "name": self.name or "", "at": started}
            held = self.token
            counter = self.token_key()

            def hold() -> int:
                return self.store.hold_lease(key, value, token=held, ttl_s=ttl, counter=counter)

            outcome = self.call("lease", hold)
            again = False
            if not isinstance(outcome, int):  # the store is down: trusted until the next
                # renewal's time, so card writes do not each wait for a store that does
                # not answer
                until = self._clock.time() + self.options.lease_renew_s
                self._lease_until = max(self._lease_until, until)
                return False
            if outcome <= 0:
                lost = True
            else:
                again = held > 0 and outcome != held
                lost = again and self._lapsed(started)
                if lost:  # the lease we just took goes too: nobody may think us alive
                    mark = {"fencedBy": self.instance_id, "at": started}
                    self.call("lease", lambda: self.store.put(key, mark, ttl_s=ttl))
            if not lost:
                self.token = outcome
                self._last_renewed = started
                margin = min(self.options.lease_renew_s, ttl / 2)
                self._lease_until = max(self._lease_until, started + ttl - margin)
        if lost:
            self._fenced()
            return False
        if again:
            self._reacquired()
        return True

    def _lapsed(self, now: float) -> bool:
        """True when a lease found gone cannot be taken again safely: this instance went
        longer than the lease expiry without renewing (a survivor could have taken over)
        and either a fence mark would have expired meanwhile or the store was wiped (a
        fence mark would be gone)."""
        silent = now - self._last_renewed
        if silent <= self.options.lease_expiry_s:
            return False  # the store lost a lease that had not expired: wiped
        if silent >= self.options.claim_ttl_s:
            return True
        watch = watch_of(self.store)
        try:
            watch.check_epoch(force=True)
        except (StateStoreUnavailable, ChannelKitError, OSError):
            return True
        wiped_at = watch.reset_at
        return wiped_at is not None and wiped_at >= self._last_renewed

    def _reacquired(self) -> None:
        self.reacquired += 1
        logger.warning(
            "[%s] the state store lost this instance's lease (restarted empty or flushed): "
            "lease taken again, live runs and cards registered again",
            self.channel,
        )
        callback = self.on_reacquired
        if callback is not None:
            try:
                self._submit(callback)
            except RuntimeError:  # the pool stopped: the channel is closing
                pass

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
        thread = threading.Thread(target=self._consume, name=f"{self.channel}-inbox", daemon=True)
        thread.start()
        self._thread = thread  # published started: a racing stop() never joins an unstarted one
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
