"""Which group messages reach the agent: the Telegram group policy.

In a private chat every message is for the bot. In groups and supergroups the
``group_policy`` of `TelegramConfig` decides:

- ``"mention"`` (default): only messages addressed to the bot pass, i.e. messages that
  mention ``@<bot_username>``, commands addressed as ``/cmd@<bot_username>`` and replies
  to one of the bot's own messages. A bare ``/cancel`` is *not* addressed (several bots
  may share the group) and neither is ``/cancel@other_bot``. The mention is removed from
  the text the agent sees.
- ``"open"``: every message passes (mentions of the bot are still removed).
- ``"disabled"``: no group message passes.

The bot's id is the numeric prefix of its token; its username comes from the
configuration (``bot_username``) or from `TelegramChannel.fetch_identity()` (``getMe``). Until the
username is known, only replies to the bot pass the ``"mention"`` policy, and a warning
says so once. Dropped group messages are expected traffic and are logged at DEBUG only.
"""

from __future__ import annotations

import logging
import re
import threading

from channelkit.platforms.telegram.ingress import TgMessage

__all__ = ["GROUP_POLICIES", "GroupGate"]

logger = logging.getLogger(__name__)

#: The accepted values of ``TelegramConfig.group_policy``.
GROUP_POLICIES = ("mention", "open", "disabled")

#: A Telegram username: 5-32 characters of letters, digits and underscores.
USERNAME_RE = re.compile(r"^[A-Za-z0-9_]{5,32}$")


class GroupGate:
    """Decides whether a message is for the bot and returns the text the agent sees.

    ``GroupGate(policy, bot_id, bot_username=None)``; thread-safe (the username may be
    learnt from ``getMe`` while webhook threads read it).
    """

    def __init__(self, policy: str, bot_id: int, bot_username: str | None = None) -> None:
        if policy not in GROUP_POLICIES:
            raise ValueError(f"policy: must be one of {', '.join(GROUP_POLICIES)}")
        self.policy = policy
        self.bot_id = bot_id
        self._lock = threading.Lock()
        self._username: str | None = None
        self._mention: re.Pattern[str] | None = None
        self._warned = False
        if bot_username is not None:
            self.set_username(bot_username)

    @property
    def username(self) -> str | None:
        """The bot's username without ``@`` (``None`` until known)."""
        with self._lock:
            return self._username

    def set_username(self, username: str) -> None:
        """Record the bot's username (with or without a leading ``@``)."""
        name = username[1:] if username.startswith("@") else username
        if not USERNAME_RE.match(name):
            raise ValueError(f"not a Telegram username: {username!r}")
        # ``@name`` as a whole word: not part of an e-mail address, a longer username or
        # a ``/cmd@name`` suffix (commands are matched separately).
        # The blanks around it go too, so "hey @bot  what" becomes "hey what".
        pattern = re.compile(rf"[ \t]*(?<![\w@/])@{re.escape(name)}(?!\w)[ \t]*", re.IGNORECASE)
        with self._lock:
            self._username = name
            self._mention = pattern

    def admit(self, message: TgMessage) -> str | None:
        """The text to hand to the agent, or ``None`` when the message is not for it."""
        text = message.text
        if text is None:
            return None
        if message.chat.type == "private":
            return text
        if self.policy == "disabled":
            logger.debug("telegram group message in %s dropped: groups disabled", message.chat.id)
            return None
        with self._lock:
            username, mention = self._username, self._mention
        if text.startswith("/"):
            return self._admit_command(message, text, username)
        stripped = _without(mention, text)
        if self.policy == "open":
            return stripped or text
        if message.reply_to_from_id == self.bot_id:
            return stripped or text
        if mention is None:
            self._warn_unknown_username()
            return None
        if stripped != text and stripped:
            return stripped
        logger.debug("telegram group message in %s dropped: bot not mentioned", message.chat.id)
        return None

    def addressed(self, message: TgMessage) -> bool:
        """Whether a group message addresses the bot: a reply to one of its messages, a
        command ``/cmd@<bot_username>``, or a mention of ``@<bot_username>`` (a whole
        word; ``@all``-style words name nobody on Telegram)."""
        text = message.text or ""
        if message.reply_to_from_id == self.bot_id:
            return True
        with self._lock:
            username, mention = self._username, self._mention
        if username is None or mention is None:
            return False
        if text.startswith("/"):
            _, at, target = text.split(maxsplit=1)[0].partition("@")
            return bool(at) and target.lower() == username.lower()
        return mention.search(text) is not None

    def _admit_command(self, message: TgMessage, text: str, username: str | None) -> str | None:
        head = text.split(maxsplit=1)[0]
        _, at, target = head.partition("@")
        if at:
            if username is not None and target.lower() == username.lower():
                return text
            if username is None:
                self._warn_unknown_username()
            return None  # addressed to another bot (or to us while our name is unknown)
        if self.policy == "open" or message.reply_to_from_id == self.bot_id:
            return text
        logger.debug("telegram group command %s dropped: not addressed to the bot", head)
        return None

    def _warn_unknown_username(self) -> None:
        with self._lock:
            if self._warned:
                return
            self._warned = True
        logger.warning(
            "telegram group_policy 'mention' without a bot username: only replies to the "
            "bot reach it; set telegram.bot_username or call fetch_identity() at startup"
        )


def _without(mention: re.Pattern[str] | None, text: str) -> str:
    """``text`` without the bot's mentions (each with its surrounding blanks -> one space)."""
    if mention is None or not mention.search(text):
        return text
    return mention.sub(" ", text).strip()
