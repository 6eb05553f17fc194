"""One-shot claims: lock-protected compare-and-set records for callback arbitration.

A platform callback (a Stop button, a form submit) is claimed synchronously in the web
handler, before the ACK; the first claimant wins and every later one sees ``False``.

* `OneShotClaim` is an in-flight lock that can be released again (Stop: a failed
  cancellation of a still-current run releases it so the user may retry).
* `StateCell` holds a small state machine value and changes it only with
  `StateCell.compare_and_set()` (question cards: ``reserved -> pending -> claimed ->
  terminal``; a terminal state is never left).
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from typing import Generic, TypeVar

__all__ = ["MAX_NOTICED_ACTORS", "OneShotClaim", "StateCell", "first_notice"]

#: Foreign actors remembered per card for the one-notice-per-actor rule.
MAX_NOTICED_ACTORS = 64

S = TypeVar("S")


class OneShotClaim:
    """A releasable one-shot claim. Thread-safe."""

    __slots__ = ("_claimed", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._claimed = False

    @property
    def claimed(self) -> bool:
        """True while someone holds the claim."""
        with self._lock:
            return self._claimed

    def try_claim(self) -> bool:
        """Take the claim; True only for the first caller since the last release."""
        with self._lock:
            if self._claimed:
                return False
            self._claimed = True
            return True

    def release(self) -> bool:
        """Give the claim back; True if it was held."""
        with self._lock:
            held = self._claimed
            self._claimed = False
            return held


class StateCell(Generic[S]):
    """A state value changed only by compare-and-set. Thread-safe."""

    __slots__ = ("_lock", "_state")

    def __init__(self, initial: S) -> None:
        self._lock = threading.Lock()
        self._state = initial

    @property
    def state(self) -> S:
        """The current state."""
        with self._lock:
            return self._state

    def compare_and_set(self, expected: S | Collection[S], new: S) -> bool:
        """Set ``new`` if the current state is ``expected`` (or one of a collection).

        Strings are compared as single values, not as collections of characters.
        """
        with self._lock:
            if isinstance(expected, str | bytes) or not isinstance(expected, Collection):
                ok = self._state == expected
            else:
                ok = self._state in expected
            if ok:
                self._state = new
            return ok

    def __repr__(self) -> str:
        return f"StateCell({self.state!r})"


def first_notice(noticed: set[str], actor_id: str, limit: int = MAX_NOTICED_ACTORS) -> bool:
    """Record a foreign click on a card; True only for the actor's first one.

    A card answers each foreign actor with at most one notice; beyond ``limit`` distinct
    actors no more notices are sent (the set stays bounded). Call it under the lock that
    guards ``noticed``.
    """
    if actor_id in noticed or len(noticed) >= limit:
        return False
    noticed.add(actor_id)
    return True
