"""What every instance knows about its shared state store: up or down, and wiped or not.

One `StoreWatch` per store object (`watch_of()`), shared by the channels using it:

* **health**: `StoreWatch.health()` pings the store (bounded by the store's own socket
  timeout) and answers ``{"ok": ..., "store": "redis", "url": ..., "error": ...}``;
  ``url`` is the store's redacted URL (never a password) and ``error`` the class of the
  failure. ``/healthz`` puts it under ``state`` and answers 503 while it is not ok; the
  next probe after the store answers again is ok (no restart).
* **one notice per person per outage**: `unavailable_notice()` is the rule every chat
  platform follows for a message, Stop or click the store could not vouch for (nothing
  runs): the first time its person is met during an outage (`StoreWatch.notify_once()`)
  it gives the work that tells them ``MSG_STORE_UNAVAILABLE``, in their language,
  through the channel's normal send path on its pool; the channel runs that work after
  the ACK. The set of people told is bounded (`DEFAULT_NOTICE_ENTRIES`); past the bound
  a person is not told (the outage is logged once, never per message). It empties when
  the store answers again, so the next outage tells everyone again.
* **a wiped store**: the key `EPOCH_KEY` holds a random epoch, written by the first
  instance that finds it absent. Each instance remembers the epoch it saw; finding it
  gone or changed (Redis restarted without persistence, or flushed) means every claim
  and dedup marker was lost. From then on, for the platform's redelivery window
  (`StoreWatch.fail_closed()`), a delivery the platform sent before the wipe was noticed
  is refused (it may have run already); deliveries sent afterwards run as usual. The
  epoch is checked before the first claim, before the first claim after an outage, and
  every `DEFAULT_EPOCH_CHECK_S` seconds at most on the claim path; ``state.
  resetFailClosedSeconds`` overrides the window. A first-delivery claim is added only
  while the epoch is the one this instance knows, in the same atomic step
  (`StoreWatch.add_in_epoch()`), so a flush between two epoch reads cannot let a
  redelivery through.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time as _time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from channelkit.core.text import MSG_STORE_UNAVAILABLE
from channelkit.state.base import GUARD_EXISTS, GUARD_WRITTEN

if TYPE_CHECKING:
    from channelkit.core.catalog import Messages
    from channelkit.state.base import StateStore

__all__ = [
    "DEFAULT_EPOCH_CHECK_S",
    "DEFAULT_NOTICE_ENTRIES",
    "EPOCH_KEY",
    "StoreWatch",
    "unavailable_notice",
    "watch_of",
]

logger = logging.getLogger(__name__)

#: The store key holding the current epoch (``{"epoch": hex, "at": epoch seconds}``).
EPOCH_KEY = "store-epoch"
#: At most this many people remembered as told during one outage.
DEFAULT_NOTICE_ENTRIES = 10_000
#: The epoch is read again at most this often on the claim path (seconds).
DEFAULT_EPOCH_CHECK_S = 5.0


class StoreWatch:
    """Outage and wipe tracking of one `StateStore` (see the module docstring).

    ``time`` is the clock (epoch seconds) used for epochs and windows. Thread-safe.
    """

    def __init__(
        self,
        store: StateStore,
        time: Callable[[], float],
        *,
        check_every_s: float = DEFAULT_EPOCH_CHECK_S,
        max_notices: int = DEFAULT_NOTICE_ENTRIES,
        fail_closed_s: float | None = None,
    ) -> None:
        self.store = store
        self._time = time
        self.check_every_s = float(check_every_s)
        self.max_notices = int(max_notices)
        #: the fail-closed window after a wipe (None: each caller's redelivery window)
        self.fail_closed_s = fail_closed_s
        self._lock = threading.Lock()
        self._down = False
        self._error: str | None = None
        self._told: OrderedDict[str, None] = OrderedDict()
        self._epoch: str | None = None
        self._next_check = float("-inf")
        #: when the last wipe was noticed (epoch seconds), None before any
        self.reset_at: float | None = None
        #: deliveries refused because they may have run before a wipe
        self.reset_drops = 0

    # -- outages --------------------------------------------------------------------------
    @property
    def down(self) -> bool:
        """True between a failed store call and the next successful one."""
        return self._down

    def failed(self, exc: BaseException) -> None:
        """Note a failed store call: the store is down; the epoch is read again first
        thing once it answers."""
        with self._lock:
            self._down = True
            self._error = _error_class(exc)
            self._next_check = float("-inf")

    def answered(self) -> None:
        """Note a successful store call: an outage ends and its notices are forgotten."""
        if not self._down:
            return
        with self._lock:
            self._down = False
            self._error = None
            self._told.clear()

    def notify_once(self, person: str) -> bool:
        """True the first time ``person`` is met during the current outage (bounded)."""
        with self._lock:
            if person in self._told or len(self._told) >= self.max_notices:
                return False
            self._told[person] = None
            return True

    def health(self) -> dict[str, Any]:
        """Ping the store: ``ok``, ``store`` (its kind), ``url`` (redacted) and, when it
        is down, ``error`` (the failure's class)."""
        entry: dict[str, Any] = {"ok": True, "store": _kind(self.store)}
        url = getattr(self.store, "url", None)
        if isinstance(url, str):
            entry["url"] = url  # RedisStore keeps it redacted
        try:
            self.store.ping()
        except Exception as exc:  # a health probe never raises
            self.failed(exc)
            entry["ok"] = False
            entry["error"] = self._error or _error_class(exc)
            return entry
        self.answered()
        return entry

    # -- wipes ----------------------------------------------------------------------------
    def check_epoch(self, *, force: bool = False) -> None:
        """Read the epoch when it is due (or ``force``): a missing or changed epoch is a
        wipe (``reset_at`` set, logged once). Raises `StateStoreUnavailable`."""
        now = self._time()
        with self._lock:
            if not force and now < self._next_check:
                return
        current = self.store.get(EPOCH_KEY)
        if current is None or not isinstance(current.get("epoch"), str):
            fresh = {"epoch": secrets.token_hex(8), "at": now}
            current = fresh if self.store.add(EPOCH_KEY, fresh) else self.store.get(EPOCH_KEY)
            current = current if current is not None else fresh
        epoch = str(current["epoch"])
        with self._lock:
            known, self._epoch = self._epoch, epoch
            self._next_check = now + self.check_every_s
            wiped = known is not None and known != epoch
            if wiped:
                at = current.get("at")
                stamp = float(at) if isinstance(at, int | float) else now
                self.reset_at = min(now, stamp)
        if wiped:
            logger.warning(
                "the state store came back empty (its epoch changed): claims and dedup "
                "markers were lost; deliveries sent before now are refused for the "
                "redelivery window"
            )

    def add_in_epoch(self, key: str, value: dict[str, Any], *, ttl_s: float | None = None) -> str:
        """Add ``key`` (a one-shot claim) only while the store's epoch is the one this
        instance knows, atomically: ``"added"``, ``"taken"`` (the key was there) or
        ``"wiped"`` (the epoch is gone or changed: the wipe is noted, nothing added).
        Raises `StateStoreUnavailable`."""
        with self._lock:
            epoch = self._epoch
        if epoch is None:
            self.check_epoch(force=True)
            with self._lock:
                epoch = self._epoch
            assert epoch is not None
        outcome = self.store.write_if(
            EPOCH_KEY, "epoch", epoch, key, value, ttl_s=ttl_s, only_if_absent=True
        )
        if outcome == GUARD_WRITTEN:
            return "added"
        if outcome == GUARD_EXISTS:
            return "taken"
        self.check_epoch(force=True)  # notes the wipe and writes the new epoch
        return "wiped"

    def fail_closed(self, at: float | None, window_s: float) -> bool:
        """True when a delivery sent at ``at`` (None: unknown) must be refused: within
        the window after a wipe and sent before it was noticed."""
        reset_at = self.reset_at
        if reset_at is None:
            return False
        window = self.fail_closed_s if self.fail_closed_s is not None else window_s
        if self._time() >= reset_at + window:
            return False
        if at is not None and at >= reset_at:
            return False
        with self._lock:
            self.reset_drops += 1
        return True


_WATCHES: weakref.WeakKeyDictionary[Any, StoreWatch] = weakref.WeakKeyDictionary()
_WATCHES_LOCK = threading.Lock()


def watch_of(store: StateStore, time: Callable[[], float] | None = None) -> StoreWatch:
    """The one `StoreWatch` of ``store``, made on first use with ``time`` (epoch
    seconds; default `time.time`): channels pass their clock when they build their
    dedup, before anything else asks."""
    with _WATCHES_LOCK:
        watch = _WATCHES.get(store)
        if watch is None:
            watch = StoreWatch(store, time if time is not None else _time.time)
            _WATCHES[store] = watch
        return watch


def unavailable_notice(
    store: StateStore | None,
    *,
    channel: str,
    person: str | None,
    send: Callable[[str], object],
    post: Callable[[Callable[[], None]], object],
    messages: Messages | None = None,
) -> Callable[[], None] | None:
    """What a channel does with a delivery its shared ``store`` could not vouch for
    (a message, Stop or click that was acknowledged and starts nothing).

    The first time ``person`` (the sender's or clicker's id; empty or None: nobody to
    tell) of ``channel`` is met during the store's current outage, the answer is the
    work that tells them ``MSG_STORE_UNAVAILABLE``: ``send(text)`` (the channel's normal
    send path to the delivery's chat, or to the person directly), handed to the
    channel's pool with ``post``. The channel runs that work after its ACK
    (`Decision.then()`, `IngressResponse.with_after()`, or at once where there is no ACK
    to wait for): nothing waits on the network before the ACK. ``text`` is in
    ``messages``' locale (the person's, `ChannelBase.messages_for()`); None passes the
    catalog `Message` itself, for a send path that renders catalog messages in the
    person's language on its own. A failed send is logged as a warning, never raised.

    None when there is nothing to do: no ``store``, no person, the person was told
    already during this outage, or `DEFAULT_NOTICE_ENTRIES` people were.
    """
    if store is None or not person or not watch_of(store).notify_once(f"{channel}:{person}"):
        return None
    text = MSG_STORE_UNAVAILABLE if messages is None else messages.text(MSG_STORE_UNAVAILABLE)

    def tell() -> None:
        try:
            send(text)
        except Exception as exc:  # a notice is best effort: the outage is logged already
            logger.warning("[%s] the store-unavailable notice failed: %s", channel, exc)

    def after_ack() -> None:
        post(tell)

    return after_ack


def _kind(store: object) -> str:
    name = type(store).__name__
    return name[: -len("Store")].lower() if name.endswith("Store") and name != "Store" else name


def _error_class(exc: BaseException) -> str:
    cause = getattr(exc, "cause_class", "")
    name = type(exc).__name__
    return f"{name} ({cause})" if isinstance(cause, str) and cause else name
