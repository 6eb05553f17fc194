"""Which language each person sees: the channel's ``locale`` and per-person overrides.

`PersonLocales` belongs to one channel. `messages_for()` answers with the `Messages`
of a person: the language their platform told for them (`note()`, e.g. Telegram's
``language_code`` of the sender's last message) when the catalog has it, else the
channel's ``locale``, else English. At most ``max_people`` people are remembered (the
least recently noted is forgotten first and sees the channel's locale again).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from channelkit.core.catalog import DEFAULT_LOCALE, Messages, messages, resolve_locale

__all__ = ["MAX_PEOPLE", "PersonLocales"]

#: People whose language is remembered per channel.
MAX_PEOPLE = 10_000


class PersonLocales:
    """The channel locale and the languages people's platforms told (bounded, locked)."""

    def __init__(self, locale: str | None = None, *, max_people: int = MAX_PEOPLE) -> None:
        if max_people < 1:
            raise ValueError(f"max_people: must be >= 1, got {max_people!r}")
        #: the configured locale (None: not set; the channel shows English)
        self.configured = resolve_locale(locale) if locale is not None else None
        self.max_people = max_people
        self._lock = threading.Lock()
        self._people: OrderedDict[str, str] = OrderedDict()

    @property
    def default(self) -> Messages:
        """The channel's `Messages` (its ``locale``, else English)."""
        return messages(self.configured or DEFAULT_LOCALE)

    def note(self, person: str | None, language: str | None) -> None:
        """``person``'s platform says they use ``language`` (a tag such as ``"de-AT"``);
        a tag the catalog has no table for, or None, forgets the person's override."""
        if not person:
            return
        locale = resolve_locale(language) if language else None
        with self._lock:
            if locale is None:
                self._people.pop(person, None)
                return
            self._people[person] = locale
            self._people.move_to_end(person)
            while len(self._people) > self.max_people:
                self._people.popitem(last=False)

    def locale_of(self, person: str | None) -> str | None:
        """The language noted for ``person`` (None: none)."""
        if not person:
            return None
        with self._lock:
            return self._people.get(person)

    def messages_for(self, person: str | None = None) -> Messages:
        """The `Messages` ``person`` reads (see the module docstring)."""
        return messages(self.locale_of(person) or self.configured or DEFAULT_LOCALE)

    def __len__(self) -> int:
        with self._lock:
            return len(self._people)
