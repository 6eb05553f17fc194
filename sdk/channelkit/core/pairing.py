"""Pairing: a stranger's one-time code, approved by an operator, in the state store.

With ``access.dm = "pairing"`` a person not yet allowed who writes to the bot directly
gets a one-time code; nothing reaches the agent. An operator approves the code (the
person is admitted from then on), denies it, or later revokes the person. The records
live in the channel's `StateStore` under ``pairing:<channel>:...``, so every process
sharing a Redis store agrees; with the in-memory store they live in the process.

* ``code:<CODE>`` - the request (``user``, ``chat``, ``at``), expiring after
  `PAIRING_CODE_TTL_S`; deleting it is the one-shot claim of an approval or denial.
* ``user:<id>`` - the person's live code (one at a time), same expiry.
* ``paired:<id>`` - an approved person (no expiry; `revoke()` removes it).

At most `MAX_PAIRING_CODES` codes wait at once; past that a stranger gets no code until
one expires or is answered.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from typing import Any

from channelkit.runtime.clock import Clock, SystemClock

__all__ = ["MAX_PAIRING_CODES", "PAIRING_CODE_TTL_S", "PairingBook", "PairingCode"]

logger = logging.getLogger(__name__)

#: A pairing code is valid this long (seconds).
PAIRING_CODE_TTL_S = 3600.0
#: Pairing codes waiting for an operator at once, per channel.
MAX_PAIRING_CODES = 1000

_CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I
_CODE_LENGTH = 8


@dataclass(frozen=True)
class PairingCode:
    """A pending pairing request: who asked, in which chat, when (wall clock)."""

    code: str
    user_id: str
    chat_id: str
    created_at: float


def _new_code() -> str:
    return "".join(secrets.choice(_CODE_ALPHABET) for _ in range(_CODE_LENGTH))


def normalize_code(code: str) -> str:
    """A code as typed (any case, blanks around it) -> its stored spelling."""
    return code.strip().upper()


class PairingBook:
    """The pairing records of one channel in ``store`` (any `StateStore`)."""

    def __init__(self, channel_name: str, store: Any, *, clock: Clock | None = None) -> None:
        self.channel_name = channel_name
        self.store = store
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._prefix = f"pairing:{channel_name}:"

    def _key(self, kind: str, name: str) -> str:
        return f"{self._prefix}{kind}:{name}"

    def request(self, user_id: str, chat_id: str) -> str | None:
        """A new code for ``user_id``; None when they hold a live one already (they were
        told it) or when `MAX_PAIRING_CODES` codes wait."""
        if self.store.get(self._key("user", user_id)) is not None:
            return None
        if len(self.store.scan(self._key("code", ""), MAX_PAIRING_CODES)) >= MAX_PAIRING_CODES:
            logger.warning("[%s] pairing: too many codes waiting; none issued", self.channel_name)
            return None
        code = _new_code()
        if not self.store.add(self._key("user", user_id), {"code": code}, ttl_s=PAIRING_CODE_TTL_S):
            return None  # another process issued one a moment ago
        record = {"user": user_id, "chat": chat_id, "at": self._clock.time()}
        self.store.put(self._key("code", code), record, ttl_s=PAIRING_CODE_TTL_S)
        return code

    def _request(self, code: str, record: dict[str, Any] | None) -> PairingCode | None:
        if record is None:
            return None
        return PairingCode(code, str(record["user"]), str(record["chat"]), float(record["at"]))

    def codes(self) -> list[PairingCode]:
        """The requests waiting for an operator, oldest first."""
        out = []
        start = len(self._key("code", ""))
        for key in self.store.scan(self._key("code", ""), MAX_PAIRING_CODES):
            code = key[start:]
            request = self._request(code, self.store.get(self._key("code", code)))
            if request is not None:
                out.append(request)
        return sorted(out, key=lambda r: r.created_at)

    def _take(self, code: str) -> PairingCode | None:
        """Claim the request of ``code`` once (the first caller anywhere wins)."""
        key = self._key("code", normalize_code(code))
        request = self._request(normalize_code(code), self.store.get(key))
        if request is None or not self.store.delete(key):
            return None
        self.store.delete(self._key("user", request.user_id))
        return request

    def approve(self, code: str) -> PairingCode | None:
        """Admit the person holding ``code`` (a code works once); None when unknown,
        expired or answered already."""
        request = self._take(code)
        if request is not None:
            self.store.put(self._key("paired", request.user_id), {"at": self._clock.time()})
        return request

    def deny(self, code: str) -> PairingCode | None:
        """Drop the request holding ``code``; None when unknown, expired or answered."""
        return self._take(code)

    def revoke(self, user_id: str) -> bool:
        """Take a paired person's access away; False when they were not paired."""
        return bool(self.store.delete(self._key("paired", user_id)))

    def is_paired(self, user_id: str) -> bool:
        """Whether ``user_id`` was approved (and not revoked)."""
        return self.store.get(self._key("paired", user_id)) is not None

    def paired(self) -> list[str]:
        """The approved people (at most 1,000 listed)."""
        start = len(self._key("paired", ""))
        return [key[start:] for key in self.store.scan(self._key("paired", ""))]
