"""Runs in progress, recorded where a restarted process can find them.

A polling channel (Telegram ``getUpdates``, Weixin ``getupdates``) confirms an update by
asking for the next ones; once confirmed, the platform never delivers it again. A
process killed (``kill -9``, an out-of-memory kill, a power cut) in the middle of a run
would leave the person waiting for an answer that never comes, and nobody would know.

`RunJournal` is the record that closes that gap. The channel records a run
before its polling cursor moves past the update that started it
(`RunJournal.record()`), and removes the record when the run ends, whatever the end
(`RunJournal.done()`: completed, failed, cancelled, stopped by a shutdown that told
the person). Whatever is still recorded when a new process starts polling belongs to a
run that was cut off: `RunJournal.take_leftovers()` hands each such record over
exactly once, and the channel tells its person the run was interrupted.

Where the record lives:

* with a `StateStore` (``state.redis``): one key per run,
  ``<scope>:inflight:<key>``, kept `RECORD_TTL_S` at most; a leftover is claimed
  with ``add`` on ``<scope>:told:<key>`` first, so two processes starting together tell
  the person once;
* without one, in a JSON file (``path``): the whole record set, rewritten atomically
  (a temporary file then ``os.replace``) on every change, under a lock;
* with neither, nowhere (the behaviour of a process that keeps nothing across restarts).

A channel whose ingress has no cursor (DingTalk Stream, Feishu's WebSocket, Slack's Events
API: the platform forgets an event once it was acknowledged) follows its people's runs
through their lifecycle events instead (`RunJournal.follow()`: recorded on ``started``,
removed on the terminal event), and tells the leftovers when it starts
(`RunJournal.tell_leftovers()`, called by ``recover_interrupted_runs`` when the service
starts its channels).

Several processes, one store: a stored record names the instance that runs it
(``instance``: its ``instanceName``, else this process's journal) and the process's
journal itself (``incarnation``: the store's per-process ``instance_id`` and a
suffix). A journal given the channel's scheduler keeps a lease for its instance, the
key ``<scope>:alive:<instance>``, written with a TTL of ``lease_expiry_s`` and renewed
every ``lease_renew_s`` on the scheduler. A process
that starts (a rolling restart, one worker replaced) then hands over only what dead
instances left: a record of a live instance (its lease key is there) is another
process's run in progress and stays; a record of this instance's earlier incarnation
(the same ``instanceName``) is taken at once; a record of an instance whose lease
lapsed is taken when it lapses, by the next renewal's sweep of any live process, so
the people of a process that crashed are told while the others go on. Without a
scheduler every stored record is taken at start (the behaviour a single poller, which
owns the bot alone, relies on).

The set is bounded (`MAX_RECORDS`, the oldest dropped with a warning). Failures to
write (a store outage, a full disk) are logged and never fail the run: the record is a
courtesy for the crash case, not part of the run.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from channelkit.core.catalog import en
from channelkit.core.types import LifecycleEvent, LifecycleType
from channelkit.platforms.common.cluster import ClusterOptions

if TYPE_CHECKING:
    from channelkit.runtime.scheduler import Scheduler, TimerHandle
    from channelkit.state.base import StateStore

__all__ = [
    "LEASE_EXPIRY_S",
    "LEASE_RENEW_S",
    "MAX_RECORDS",
    "RECORD_TTL_S",
    "TEXT_INTERRUPTED",
    "RunJournal",
    "channel_journal",
]

logger = logging.getLogger(__name__)

#: Runs recorded at once (the oldest record is dropped beyond it).
MAX_RECORDS = 1_000
#: What a restarted process tells the person whose run the previous one's crash cut off.
TEXT_INTERRUPTED = en("notice.interrupted")
#: Seconds a stored record lives at most (a run longer than a day is not told).
RECORD_TTL_S = 86_400.0
#: Seconds between two renewals of an instance's lease, and the silence after which an
#: instance is presumed dead (the ``state`` section's lease settings change them).
LEASE_RENEW_S = 5.0
LEASE_EXPIRY_S = 30.0
#: The fields a stored record carries besides the channel's own (who runs it).
_OWNER_FIELDS = ("instance", "incarnation")


class RunJournal:
    """Records of runs in progress; see the module docstring.

    ``scope`` names the channel (``telegram``, the channel name); ``store`` the shared
    store (preferred), ``path`` the file used without one. With a store, ``scheduler``
    (the channel's) keeps this instance's lease and sweeps for dead instances' runs;
    ``instance_name`` is the instance's stable name (the ``state`` section's
    ``instanceName``); ``lease_renew_s`` and ``lease_expiry_s`` time the lease. Call
    `close()` with the channel.
    """

    def __init__(
        self,
        scope: str,
        *,
        store: StateStore | None = None,
        path: str | os.PathLike[str] | None = None,
        max_records: int = MAX_RECORDS,
        scheduler: Scheduler | None = None,
        instance_name: str | None = None,
        lease_renew_s: float = LEASE_RENEW_S,
        lease_expiry_s: float = LEASE_EXPIRY_S,
    ) -> None:
        if not isinstance(scope, str) or not scope or ":" in scope:
            raise ValueError("scope: must be a non-empty string without ':'")
        if not 0 < lease_renew_s < lease_expiry_s:
            raise ValueError("lease_renew_s: must be more than 0 and less than lease_expiry_s")
        self.scope = scope
        self.store = store
        self.path = Path(path) if path is not None and store is None else None
        self._max = max_records
        self._lock = threading.Lock()
        #: the channel's scheduler: leases and sweeps (store mode only)
        self._scheduler = scheduler if store is not None else None
        #: this journal in this process (two channels sharing one store object are two)
        #: and the instance it is (its stable name when one is configured, else this)
        self.incarnation = (
            f"{store.instance_id}.{secrets.token_hex(3)}" if store is not None else None
        )
        self.instance = instance_name or self.incarnation
        self._named = bool(instance_name)
        self._renew_s = float(lease_renew_s)
        self._expiry_s = float(lease_expiry_s)
        self._tell: Callable[[str, str | None, dict[str, Any]], None] | None = None
        self._timer: TimerHandle | None = None
        self._leased = False
        self._closed = False
        self._failing = False  # the last lease write failed (one warning per outage)

    @property
    def enabled(self) -> bool:
        """True when records survive the process (a store or a file)."""
        return self.store is not None or self.path is not None

    # -- writes ---------------------------------------------------------------------------
    def record(self, key: str, record: Mapping[str, Any]) -> None:
        """Record the run ``key`` (``record``: what telling its person needs, JSON)."""
        if self.store is not None:
            self._hold_lease()
            owned = {**record, "instance": self.instance, "incarnation": self.incarnation}
            try:
                self.store.put(self._key("inflight", key), owned, ttl_s=RECORD_TTL_S)
            except Exception as exc:
                logger.warning("%s: recording run %s failed: %s", self.scope, key, exc)
            return
        if self.path is not None:
            with self._lock:
                records = self._read()
                records.pop(key, None)
                records[key] = dict(record)
                while len(records) > self._max:
                    oldest = next(iter(records))
                    logger.warning("%s: run record %s dropped (bound reached)", self.scope, oldest)
                    del records[oldest]
                self._write(records)

    def done(self, key: str) -> None:
        """The run ``key`` ended (its person was told how): forget its record."""
        if self.store is not None:
            try:
                self.store.delete(self._key("inflight", key))
            except Exception as exc:
                logger.warning("%s: removing run record %s failed: %s", self.scope, key, exc)
            return
        if self.path is not None:
            with self._lock:
                records = self._read()
                if records.pop(key, None) is not None:
                    self._write(records)

    def take_leftovers(self) -> list[dict[str, Any]]:
        """The records left by an earlier process, each handed to one caller once (and
        removed). Call when this process starts polling, before it records any run."""
        if self.store is not None:
            return self._take_stored()
        if self.path is not None:
            with self._lock:
                records = self._read()
                if records:
                    self._write({})
                return list(records.values())
        return []

    def follow(self, event: LifecycleEvent, extra: Mapping[str, Any] | None = None) -> None:
        """Follow a person's run by its lifecycle ``event``: record it on ``started``
        (its chat, thread and owner, with ``extra``: JSON the channel needs to reach the
        person again, under ``<chat>:<message id>``), forget it on its terminal event,
        whatever the end. Runs without a person or a message id are not recorded."""
        if not self.enabled or event.owner is None or not event.message_id:
            return
        key = f"{event.chat_id}:{event.message_id}"
        if event.type is LifecycleType.STARTED:
            record = {
                **(extra or {}),
                "chat": event.chat_id,
                "thread": event.thread_id,
                "owner": event.owner.id,
                "run": event.run_id,
            }
            self.record(key, record)
        elif LifecycleType(event.type).terminal:
            self.done(key)

    def tell_leftovers(self, tell: Callable[[str, str | None, dict[str, Any]], None]) -> int:
        """Take the leftovers (`take_leftovers()`) and call ``tell(chat, thread, record)``
        once for each; returns how many were told. ``tell`` should hand the sending on (to
        a pool) rather than send itself; an exception it raises is logged. With a store
        and a scheduler, each lease renewal tells the same way what instances that died
        since left."""
        if self._scheduler is not None:
            with self._lock:
                self._tell = tell
            self._hold_lease()
        return self._tell_each(tell, self.take_leftovers())

    def _tell_each(
        self,
        tell: Callable[[str, str | None, dict[str, Any]], None],
        records: list[dict[str, Any]],
    ) -> int:
        told = 0
        for record in records:
            chat, thread = record.get("chat"), record.get("thread")
            if not isinstance(chat, str) or not chat:
                continue
            logger.warning("%s: a run in %s was interrupted by a restart", self.scope, chat)
            try:
                tell(chat, thread if isinstance(thread, str) and thread else None, record)
            except Exception as exc:
                logger.warning("%s: telling %s failed: %s", self.scope, chat, exc)
                continue
            told += 1
        return told

    # -- the lease (store and scheduler) ------------------------------------------------
    def _hold_lease(self) -> None:
        """Write this instance's lease and arm its renewal, once (store mode)."""
        if self._scheduler is None:
            return
        with self._lock:
            if self._leased or self._closed:
                return
            self._leased = True
        self._write_lease()
        self._arm()

    def _write_lease(self) -> bool:
        """Write the lease key; False when the store refused (logged once per outage)."""
        assert self.store is not None and self.instance is not None
        try:
            self.store.put(self._key("alive", self.instance), {"at": 1}, ttl_s=self._expiry_s)
        except Exception as exc:
            with self._lock:
                first, self._failing = not self._failing, True
            if first:
                logger.warning("%s: renewing the run journal's lease failed: %s", self.scope, exc)
            return False
        with self._lock:
            recovered, self._failing = self._failing, False
        if recovered:
            logger.info("%s: the run journal's lease is renewed again", self.scope)
        return True

    def _arm(self) -> None:
        scheduler = self._scheduler
        assert scheduler is not None
        with self._lock:
            if not self._closed:
                self._timer = scheduler.call_later(self._renew_s, self._renew)

    def _renew(self) -> None:
        """Renew the lease, tell what instances that died left (once `tell_leftovers()`
        named how), and book the next renewal (the scheduler hands this to the pool)."""
        renewed = self._write_lease()
        with self._lock:
            tell = None if self._closed or not renewed else self._tell
        if tell is not None:  # (the store refused the lease: no sweep until it answers)
            self._tell_each(tell, self._take_stored())
        self._arm()

    def close(self) -> None:
        """Stop renewing and give the lease up (a graceful end: the runs this process
        still had were told how they ended, and nothing of it is left to sweep)."""
        with self._lock:
            self._closed = True
            timer, self._timer = self._timer, None
            leased = self._leased
        if timer is not None:
            timer.cancel()
        if leased and self.store is not None and self.instance is not None:
            try:
                self.store.delete(self._key("alive", self.instance))
            except Exception as exc:
                logger.warning("%s: giving the lease up failed: %s", self.scope, exc)

    # -- internals --------------------------------------------------------------------------
    def _key(self, kind: str, key: str) -> str:
        return f"{self.scope}:{kind}:{key}"

    def _left_by_the_dead(self, record: Mapping[str, Any], alive: dict[str, bool]) -> bool:
        """Whether a stored ``record`` is a run no live process is running (see the
        module docstring); always True without a scheduler (no leases kept). ``alive``
        remembers the instances already looked up in this sweep."""
        if self._scheduler is None:
            return True
        instance, incarnation = record.get("instance"), record.get("incarnation")
        if incarnation == self.incarnation:
            return False  # a run of this process
        if not isinstance(instance, str) or not instance:
            return True  # recorded before records named their instance
        if self._named and instance == self.instance:
            return True  # this instance's earlier incarnation
        assert self.store is not None
        if instance not in alive:
            alive[instance] = self.store.get(self._key("alive", instance)) is not None
        return not alive[instance]

    def _take_stored(self) -> list[dict[str, Any]]:
        store = self.store
        assert store is not None
        taken: list[dict[str, Any]] = []
        alive: dict[str, bool] = {}  # instance -> its lease is there (this sweep)
        try:
            keys = store.scan(self._key("inflight", ""), limit=self._max)
            for stored in keys:
                key = stored[len(self._key("inflight", "")) :]
                record = store.get(stored)
                if record is None or not self._left_by_the_dead(record, alive):
                    continue
                told = self._key("told", key)
                if store.add(told, {"by": store.instance_id}, ttl_s=RECORD_TTL_S):
                    taken.append({k: v for k, v in record.items() if k not in _OWNER_FIELDS})
                store.delete(stored)
        except Exception as exc:
            logger.warning(
                "%s: reading the records of interrupted runs failed: %s", self.scope, exc
            )
        return taken

    def _read(self) -> dict[str, dict[str, Any]]:
        assert self.path is not None
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            logger.warning("%s: reading %s failed: %s", self.scope, self.path, exc)
            return {}
        try:
            data = json.loads(raw) if raw.strip() else {}
        except ValueError:
            logger.warning("%s: %s is not JSON; its records are ignored", self.scope, self.path)
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(k): v for k, v in data.items() if isinstance(v, dict)}

    def _write(self, records: Mapping[str, Mapping[str, Any]]) -> None:
        assert self.path is not None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".runs-", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump(records, handle)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(tmp, self.path)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError as exc:
            logger.warning("%s: writing %s failed: %s", self.scope, self.path, exc)


def channel_journal(
    scope: str,
    *,
    store: StateStore | None,
    path: str | os.PathLike[str] | None,
    scheduler: Scheduler,
    lease: ClusterOptions | Mapping[str, Any] | None = None,
) -> RunJournal:
    """The run journal of a channel that tells its leftovers itself
    (`RunJournal.tell_leftovers()`): in ``store`` when there is one, with a lease kept
    on the channel's ``scheduler`` as ``lease`` says (the ``state`` section's
    ``instanceName``, ``leaseRenewSeconds``, ``leaseExpirySeconds``: a channel's
    ``cluster_options``), else in the file ``path``."""
    options = lease if isinstance(lease, ClusterOptions) else ClusterOptions.from_mapping(lease)
    return RunJournal(
        scope,
        store=store,
        path=path,
        scheduler=scheduler,
        instance_name=options.instance_name,
        lease_renew_s=options.lease_renew_s,
        lease_expiry_s=options.lease_expiry_s,
    )
