"""Card switches: when a card type is off, for whom, and for how long.

A failed card degrades in the scope of its cause, never wider:

- one card fails for a reason of its own (an invalid parameter, a transient error): that
  card falls back to text, nothing is switched;
- the platform refuses to deliver into one chat (the bot left it, the chat is muted for
  bots): `CardSwitch.reject_chat()` turns the card type off for that chat only, for
  ``chat_cooldown_s`` seconds;
- the platform refuses the card type itself (its template is missing or unpublished, the
  app may not use it): `CardSwitch.reject_globally()` turns it off for every chat for
  ``cooldown_s`` seconds. Then it comes back on by itself: the next card is the one
  retry, and a second refusal switches it off for another cool-down.

Time is the injected clock. The per-chat memory is a bounded map (oldest chat first
out), so a flood of failing chats cannot grow it.
"""

from __future__ import annotations

import logging
import threading

from channelkit.runtime.clock import Clock
from channelkit.runtime.maps import DEFAULT_MAXSIZE, BoundedMap

__all__ = ["CardSwitch"]

logger = logging.getLogger(__name__)


class CardSwitch:
    """Whether a card type may be used for a chat; see the module docstring.

    ``enabled=False`` (the configuration turned the card type off) is final: the switch
    never turns it on.
    """

    def __init__(
        self,
        name: str,
        *,
        clock: Clock,
        enabled: bool = True,
        cooldown_s: float = 300.0,
        chat_cooldown_s: float = 600.0,
        max_chats: int = DEFAULT_MAXSIZE,
    ) -> None:
        if cooldown_s <= 0 or chat_cooldown_s <= 0:
            raise ValueError("cooldown_s and chat_cooldown_s: must be > 0")
        self.name = name
        self.configured = enabled
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._lock = threading.Lock()
        self._off_until: float | None = None  # global cool-down end, None while on
        self._chats: BoundedMap[str, bool] = BoundedMap(max_chats, ttl=chat_cooldown_s, clock=clock)

    @property
    def enabled(self) -> bool:
        """On for chats in general (configured on and not in a global cool-down)."""
        if not self.configured:
            return False
        with self._lock:
            if self._off_until is None:
                return True
            if self._clock.now() < self._off_until:
                return False
            self._off_until = None  # cool-down over: the next card is the retry
        logger.info("%s back on after its cool-down; the next card retries", self.name)
        return True

    def allows(self, chat_id: str) -> bool:
        """On for ``chat_id``: enabled, and this chat's deliveries are not refused."""
        return self.enabled and chat_id not in self._chats

    def reject_globally(self, reason: str) -> None:
        """The platform refused the card type itself: off for everyone for a cool-down."""
        if not self.configured:
            return
        with self._lock:
            first = self._off_until is None
            self._off_until = self._clock.now() + self.cooldown_s
        if first:
            logger.error(
                "%s refused by the platform (%s); text for every chat for the next %.0f s",
                self.name,
                reason,
                self.cooldown_s,
            )

    def reject_chat(self, chat_id: str, reason: str) -> None:
        """The platform refused a delivery into ``chat_id``: off for that chat only."""
        if chat_id in self._chats:
            return
        self._chats[chat_id] = True
        logger.warning("%s not delivered into one chat (%s); text there for now", self.name, reason)
