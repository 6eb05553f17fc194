"""The last final answer of each conversation scope, so that no answer is ever gone.

A final send that hangs or is reset after the request went out is not sent again when
the platform offers no idempotency key (the person may already see it; a second send
could show it twice). The answer is kept here instead: the person can ask for it again
with ``/last``, and their next message gets a one-line hint when the delivery of their
previous answer was uncertain (or failed later, on a retry nobody was waiting for).

`LastAnswers` keeps one record per session (the scope the router maps a chat,
thread and sender to): the run's answer, bounded to `LAST_ANSWER_MAX_CHARS` (the
newest text kept, a marker in front), its time and its delivery state. Records expire
after ``ChannelConfig.last_answer_max_age`` seconds. In memory the map is a
`BoundedMap` (1,000 scopes, oldest first out, every
access under its lock); with a state store the records live in the store (key
``last-answer:<channel>:<session>``, with the same time to live), so another process
serving the bot answers ``/last`` too.

Delivery states: ``pending`` (handed to the adapter), ``delivered``, ``refused`` (the
send failed at once and the run failed: the person was told), ``uncertain`` (the
outcome of a sent request is unknown) and ``failed`` (every later attempt failed).
Only ``uncertain`` and ``failed`` earn the hint, once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Literal

from channelkit.runtime.clock import Clock
from channelkit.runtime.maps import DEFAULT_MAXSIZE, BoundedMap

__all__ = ["LAST_ANSWER_MAX_CHARS", "DeliveryOutcome", "LastAnswers"]

logger = logging.getLogger(__name__)

#: The longest answer kept for ``/last`` (characters; older text is dropped).
LAST_ANSWER_MAX_CHARS = 20_000
_MARKER = "[...]\n"

DeliveryOutcome = Literal["delivered", "refused", "uncertain", "failed"]
_STATES = ("pending", "delivered", "refused", "uncertain", "failed")
_HINTED = ("uncertain", "failed")


def _bounded(text: str) -> str:
    if len(text) <= LAST_ANSWER_MAX_CHARS:
        return text
    return _MARKER + text[-(LAST_ANSWER_MAX_CHARS - len(_MARKER)) :]


class LastAnswers:
    """Each scope's last final answer and its delivery state (see the module docstring).

    ``max_age`` bounds how long an answer is kept (seconds, on ``clock``'s wall time);
    ``store`` returns the channel's state store when one is configured (asked on each
    use: adapters attach their store after the channel was built)."""

    def __init__(
        self,
        channel_name: str,
        *,
        clock: Clock,
        max_age: float,
        store: Callable[[], Any] | None = None,
        maxsize: int = DEFAULT_MAXSIZE,
    ) -> None:
        if max_age <= 0:
            raise ValueError("max_age: must be > 0")
        self.channel_name = channel_name
        self.max_age = max_age
        self._clock = clock
        self._store = store
        self._records: BoundedMap[str, dict[str, Any]] = BoundedMap(
            maxsize, ttl=max_age, clock=clock
        )
        #: run id -> its session (the delivery outcome names the run only)
        self._runs: BoundedMap[str, str] = BoundedMap(maxsize, ttl=max_age, clock=clock)
        self._lock = threading.Lock()  # read-modify-write of one record

    # -- storage ----------------------------------------------------------------------

    def _shared(self) -> Any:
        if self._store is None:
            return None
        try:
            return self._store()
        except Exception:  # a broken provider never breaks a run
            return None

    def _key(self, session_id: str) -> str:
        return f"last-answer:{self.channel_name}:{session_id}"

    def _get(self, session_id: str) -> dict[str, Any] | None:
        store = self._shared()
        if store is not None:
            try:
                record = store.get(self._key(session_id))
            except Exception as exc:
                logger.warning(
                    "[%s] last answer not read from the store: %s", self.channel_name, exc
                )
                record = None
        else:
            record = self._records.get(session_id)
        if record is None:
            return None
        if self._clock.time() - float(record.get("at", 0.0)) > self.max_age:
            return None
        return dict(record)

    def _put(self, session_id: str, record: dict[str, Any]) -> None:
        store = self._shared()
        if store is not None:
            try:
                store.put(self._key(session_id), record, ttl_s=self.max_age)
                return
            except Exception as exc:
                logger.warning("[%s] last answer kept in memory: %s", self.channel_name, exc)
        self._records[session_id] = record

    # -- the channel's side -----------------------------------------------------------

    def record(self, session_id: str, run_id: str, text: str) -> None:
        """The run's final answer is on its way (before the adapter sends it)."""
        if not text:
            return
        record = {
            "run_id": run_id,
            "text": _bounded(text),
            "at": self._clock.time(),
            "state": "pending",
            "hinted": False,
        }
        with self._lock:
            self._runs[run_id] = session_id
            self._put(session_id, record)

    def settle(self, run_id: str | None, outcome: DeliveryOutcome) -> None:
        """How the delivery of ``run_id``'s answer ended (the adapter's delivery chain)."""
        if outcome not in _STATES:
            raise ValueError(f"outcome: must be one of {_STATES[1:]}, got {outcome!r}")
        if run_id is None:
            return
        with self._lock:
            session_id = self._runs.get(run_id)
            if session_id is None:
                return
            record = self._get(session_id)
            if record is None or record.get("run_id") != run_id:
                return  # a newer answer replaced it
            record["state"] = outcome
            self._put(session_id, record)
        if outcome in _HINTED:
            logger.info(
                "[%s] answer of run %s %s: kept for /last", self.channel_name, run_id, outcome
            )

    def take_hint(self, session_id: str) -> bool:
        """True once when the scope's last answer may not have arrived (the caller tells
        the person about ``/last``)."""
        with self._lock:
            record = self._get(session_id)
            if record is None or record.get("hinted") or record.get("state") not in _HINTED:
                return False
            record["hinted"] = True
            self._put(session_id, record)
            return True

    def last(self, session_id: str) -> str | None:
        """The scope's last answer (None when there is none, or it is too old); asking
        for it ends the hint."""
        with self._lock:
            record = self._get(session_id)
            if record is None:
                return None
            if not record.get("hinted"):
                record["hinted"] = True
                self._put(session_id, record)
            return str(record.get("text") or "") or None

    def state(self, session_id: str) -> str | None:
        """The delivery state of the scope's last answer (None: no answer kept)."""
        record = self._get(session_id)
        return None if record is None else str(record.get("state"))
