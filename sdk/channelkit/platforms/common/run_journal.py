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

The set is bounded (`MAX_RECORDS`, the oldest dropped with a warning). Failures to
write (a store outage, a full disk) are logged and never fail the run: the record is a
courtesy for the crash case, not part of the run.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from channelkit.core.catalog import en
from channelkit.core.types import LifecycleEvent, LifecycleType

if TYPE_CHECKING:
    from channelkit.state.base import StateStore

__all__ = ["MAX_RECORDS", "RECORD_TTL_S", "TEXT_INTERRUPTED", "RunJournal"]

logger = logging.getLogger(__name__)

#: Runs recorded at once (the oldest record is dropped beyond it).
MAX_RECORDS = 1_000
#: What a restarted process tells the person whose run the previous one's crash cut off.
TEXT_INTERRUPTED = en("notice.interrupted")
#: Seconds a stored record lives at most (a run longer than a day is not told).
RECORD_TTL_S = 86_400.0


class RunJournal:
    """Records of runs in progress; see the module docstring.

    ``scope`` names the channel (``telegram``, the channel name); ``store`` the shared
    store (preferred), ``path`` the file used without one.
    """

    def __init__(
        self,
        scope: str,
        *,
        store: StateStore | None = None,
        path: str | os.PathLike[str] | None = None,
        max_records: int = MAX_RECORDS,
    ) -> None:
        if not isinstance(scope, str) or not scope or ":" in scope:
            raise ValueError("scope: must be a non-empty string without ':'")
        self.scope = scope
        self.store = store
        self.path = Path(path) if path is not None and store is None else None
        self._max = max_records
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """True when records survive the process (a store or a file)."""
        return self.store is not None or self.path is not None

    # -- writes ---------------------------------------------------------------------------
    def record(self, key: str, record: Mapping[str, Any]) -> None:
        """Record the run ``key`` (``record``: what telling its person needs, JSON)."""
        if self.store is not None:
            try:
                self.store.put(self._key("inflight", key), record, ttl_s=RECORD_TTL_S)
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
        a pool) rather than send itself; an exception it raises is logged."""
        told = 0
        for record in self.take_leftovers():
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

    # -- internals --------------------------------------------------------------------------
    def _key(self, kind: str, key: str) -> str:
        return f"{self.scope}:{kind}:{key}"

    def _take_stored(self) -> list[dict[str, Any]]:
        store = self.store
        assert store is not None
        taken: list[dict[str, Any]] = []
        try:
            keys = store.scan(self._key("inflight", ""), limit=self._max)
            for stored in keys:
                key = stored[len(self._key("inflight", "")) :]
                record = store.get(stored)
                if record is None:
                    continue
                told = self._key("told", key)
                if store.add(told, {"by": store.instance_id}, ttl_s=RECORD_TTL_S):
                    taken.append(record)
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
