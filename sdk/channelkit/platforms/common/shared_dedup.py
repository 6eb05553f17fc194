"""First-delivery dedup shared by every instance of one bot (update, event, message ids).

A platform may deliver the same update twice: a webhook retry, a long poll answered
twice, or the same event handed to two processes that serve one bot. `SharedDedup`
is a drop-in for the `ReplayGuard` a channel
uses as its dedup log (``first(key)`` / ``forget(key)`` / ``in`` / ``len``):

* without a store (or with its own process's state) it is exactly that guard;
* with a `StateStore` it first asks the local guard (two
  racing copies in one process never reach the store twice), then claims
  ``dedup:<scope>:<key>`` with one atomic ``add`` whose TTL covers the platform's
  redelivery window, so whichever instance claims first starts the run and every other
  copy, on any instance, is acknowledged and dropped.

The rule for how long an id is remembered is the guard's (see
`channelkit.platforms.common.replay`): pass the platform's send time as
``first(key, at=...)`` and ``ttl`` covering the platform's redelivery window, or build it
``ordered=True`` for ids the platform issues in increasing order. In-process memory is
bounded; when the bound is reached the window shrinks and old ids are refused, never
accepted twice. The store keeps each key until the same expiry (``at + ttl``).

A store outage fails closed: ``first`` answers False (the caller acknowledges and
starts nothing) and the outage is logged once as an error, its end once as a warning.
Starting a run the store could not vouch for risks two runs of one message (two answers
in the chat, two agent sessions doing the work); dropping one message during an outage
is what the person sees as "no answer", and they send it again. ``outage_drops`` counts
the messages so dropped. `SharedDedup.claim()` tells such a drop (``"unavailable"``)
from a replay (``"seen"``), so the channel can tell the person once per outage that the
bot is temporarily unavailable (`channelkit.platforms.common.store_watch`).

A store that comes back empty (restarted without persistence, flushed) lost every claim:
the store's epoch (`StoreWatch`) shows it (each claim is added only while the epoch
this instance knows is still there, in one atomic step), and for the redelivery window (``ttl``, or
``state.resetFailClosedSeconds``) a delivery sent before the wipe was noticed is refused
as a possible replay, so a redelivered message does not run twice.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

from channelkit.errors import StateStoreUnavailable
from channelkit.observability import hub
from channelkit.platforms.common.replay import DEFAULT_REPLAY_ENTRIES, ReplayGuard
from channelkit.platforms.common.store_watch import StoreWatch, watch_of

if TYPE_CHECKING:
    from channelkit.state.base import StateStore

__all__ = ["SharedDedup"]

logger = logging.getLogger(__name__)


class SharedDedup:
    """``first(key)``: True exactly once per key across every instance sharing ``store``.

    ``scope`` names the id space (e.g. ``"telegram-update"``); keys are stored as
    ``dedup:<scope>:<key>`` for ``ttl`` seconds. Thread-safe.
    """

    def __init__(
        self,
        time: Callable[[], float],
        *,
        ttl: float,
        scope: str,
        store: StateStore | None = None,
        ordered: bool = False,
        maxsize: int = DEFAULT_REPLAY_ENTRIES,
    ) -> None:
        # a copy this instance saw counts as a replay there; one another instance
        # claimed first counts below
        self.local = ReplayGuard(time, ttl=ttl, ordered=ordered, maxsize=maxsize, scope=scope)
        self._platform = scope.split("-", 1)[0]
        self.store = store
        self.ttl = ttl
        self.scope = scope
        self._time = time
        self._lock = threading.Lock()
        self._down = False
        #: first deliveries dropped because the store could not be reached
        self.outage_drops = 0
        if store is not None:
            watch_of(store, time)  # made with this clock unless the store has one already

    @property
    def watch(self) -> StoreWatch | None:
        """The store's outage and wipe tracking (`watch_of()`); None without a store."""
        return None if self.store is None else watch_of(self.store, self._time)

    def _key(self, key: Hashable) -> str:
        return f"dedup:{self.scope}:{key}"

    def first(self, key: Hashable, at: float | None = None) -> bool:
        """True for the first delivery of ``key`` (here and on every other instance).

        ``at``: when the platform sent it (epoch seconds, the platform's own timestamp);
        the key is remembered until ``at + ttl`` and a copy arriving after that is
        refused (see `ReplayGuard.first()`).
        """
        return self.claim(key, at) == "first"

    def claim(self, key: Hashable, at: float | None = None, *, sent_at: float | None = None) -> str:
        """`first()` with the reason: ``"first"`` (run it), ``"seen"`` (a replay here or
        on another instance, or sent before a wipe of the store: drop it) or
        ``"unavailable"`` (the store could not be reached: drop it, tell the person).

        ``sent_at`` (default ``at``): the platform's send time, used only to tell a
        delivery sent before a wipe from one sent after it; unknown (None), a delivery
        is refused for the whole window after a wipe."""
        if sent_at is None:
            sent_at = at
        if not self.local.first(key, at):
            return "seen"
        watch = self.watch
        if self.store is None or watch is None:
            return "first"
        now = self._time()
        remaining = (now if at is None else at) + self.ttl - now
        try:
            watch.check_epoch()
            if watch.fail_closed(sent_at, self.ttl):
                hub.ingress(self._platform, "replay")
                return "seen"
            value = {"at": now, "by": self.store.instance_id}
            ttl = max(1.0, remaining)
            added = watch.add_in_epoch(self._key(key), value, ttl_s=ttl)
            if added == "wiped":  # flushed since the last epoch read: judged again
                if watch.fail_closed(sent_at, self.ttl):
                    hub.ingress(self._platform, "replay")
                    return "seen"
                added = watch.add_in_epoch(self._key(key), value, ttl_s=ttl)
            won = added == "added"
        except StateStoreUnavailable as exc:
            self.local.forget(key)  # once the store answers, a redelivery may be served
            watch.failed(exc)
            self._outage(exc)
            hub.ingress(self._platform, "store_unavailable")
            return "unavailable"
        watch.answered()
        self._recovered()
        if not won:
            hub.ingress(self._platform, "replay")
            return "seen"
        return "first"

    def forget(self, key: Hashable) -> None:
        """Undo ``first(key)``: the delivery was refused (closed) and may come again."""
        self.local.forget(key)
        if self.store is None:
            return
        try:
            self.store.delete(self._key(key))
        except StateStoreUnavailable as exc:
            self._outage(exc)

    def __contains__(self, key: object) -> bool:
        """True while ``key`` is remembered by this instance."""
        return key in self.local

    def __len__(self) -> int:
        return len(self.local)

    def _outage(self, exc: StateStoreUnavailable) -> None:
        with self._lock:
            self.outage_drops += 1
            first = not self._down
            self._down = True
        if first:
            logger.error(
                "%s dedup: the state store is unavailable (%s); new deliveries are "
                "acknowledged and dropped until it answers again",
                self.scope,
                exc,
            )

    def _recovered(self) -> None:
        if not self._down:
            return
        with self._lock:
            was_down, self._down = self._down, False
            dropped = self.outage_drops
        if was_down:
            logger.warning(
                "%s dedup: the state store answers again (%d deliveries dropped so far)",
                self.scope,
                dropped,
            )
