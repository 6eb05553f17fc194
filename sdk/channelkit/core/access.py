"""Who may talk to the bot, and where: the channel's access policy.

`AccessConfig` is the validated ``access`` section of a channel (``ChannelConfig.access``):

* ``dm`` - direct messages: ``open`` (anyone, the default), ``allowlist`` (only
  ``allowUsers`` and ``admins``), ``pairing`` (like ``allowlist``, and a stranger gets a
  one-time pairing code an operator approves) or ``closed`` (nobody);
* ``groups`` - group chats: ``open`` (the default), ``allowlist`` (chats in
  ``allowChats``, or people in ``allowUsers`` / ``admins``) or ``closed``;
* ``requireMention`` - in groups, only messages addressed to the bot (mentioned, a
  reply to it, a command addressed to it) reach it (default true); ``groupRules`` maps
  a group's chat id to ``{"requireMention": bool}`` to override it for that group;
* ``admins`` - the people who may use the operator commands (`OPERATOR_COMMANDS`:
  ``/stop all``, and ``/status`` for the whole chat rather than their own conversation);
  `channelkit.core.operator_commands` applies that rule once the gate admitted the
  message. Without admins nobody may ``/stop all``.

`AccessGate` applies it once, in the core, to every inbound message before anything
reaches the agent or shows an indicator. A refused person in a direct message is told
why, at most once per `NOTICE_INTERVAL_S` per chat and person (a bounded, locked TTL
map on the injected clock); in a group a refused or unaddressed message is ignored
without a reply.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from channelkit.core.handles import CommandHandle, CommandResult
from channelkit.core.pairing import (
    MAX_PAIRING_CODES,
    PAIRING_CODE_TTL_S,
    PairingBook,
    PairingCode,
)
from channelkit.core.text import (
    MSG_ACCESS_DM_CLOSED,
    MSG_ACCESS_NOT_ALLOWED,
    MSG_ACCESS_PAIRING,
)
from channelkit.core.types import InboundMessage
from channelkit.errors import ConfigurationError
from channelkit.runtime.clock import Clock, SystemClock
from channelkit.runtime.maps import BoundedMap
from channelkit.state.memory import MemoryStore

__all__ = [
    "ACCESS_COMMAND",
    "ACCESS_SCHEMA",
    "MAX_PAIRING_CODES",
    "NOTICE_INTERVAL_S",
    "OPERATOR_COMMANDS",
    "PAIRING_CODE_TTL_S",
    "AccessConfig",
    "AccessDecision",
    "AccessGate",
    "DmPolicy",
    "GroupPolicy",
    "PairingCode",
    "refused",
]

logger = logging.getLogger(__name__)

#: The ``CommandHandle.command`` of a message the access policy refused.
ACCESS_COMMAND = "access"

#: A refused person in a direct message is told at most once per this many seconds.
NOTICE_INTERVAL_S = 3600.0
#: Refusal notices remembered at once (oldest forgotten first).
MAX_NOTICES = 1000
#: Keys of the in-process store pairing uses when the channel has none of its own.
_OWN_STORE_KEYS = 3 * MAX_PAIRING_CODES + 10_000
#: Commands whose reach depends on ``admins``: ``/stop all`` is theirs alone, ``/status``
#: shows them the whole chat (others: their own conversation).
OPERATOR_COMMANDS = ("status", "stop")


class DmPolicy(str, Enum):
    """Who may write to the bot in a direct message."""

    OPEN = "open"
    ALLOWLIST = "allowlist"
    PAIRING = "pairing"
    CLOSED = "closed"


class GroupPolicy(str, Enum):
    """In which groups the bot answers."""

    OPEN = "open"
    ALLOWLIST = "allowlist"
    CLOSED = "closed"


_ID_LIST: dict[str, Any] = {
    "type": "array",
    "items": {"type": "string", "minLength": 1},
    "uniqueItems": True,
}

#: The JSON Schema of a channel's ``access`` section (``channels[i].access``).
ACCESS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "who may talk to the bot, and where; absent: anyone, anywhere",
    "properties": {
        "dm": {"enum": [p.value for p in DmPolicy]},
        "groups": {"enum": [p.value for p in GroupPolicy]},
        "allowUsers": _ID_LIST,
        "allowChats": _ID_LIST,
        "admins": _ID_LIST,
        "requireMention": {"type": "boolean"},
        "groupRules": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "properties": {"requireMention": {"type": "boolean"}},
                "additionalProperties": False,
            },
        },
    },
    "additionalProperties": False,
}

_KEYS = {
    "dm": "dm",
    "groups": "groups",
    "allowUsers": "allow_users",
    "allowChats": "allow_chats",
    "admins": "admins",
    "requireMention": "require_mention",
    "groupRules": "group_rules",
}


def _ids(value: object, path: str) -> frozenset[str]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ConfigurationError("must be a list of platform user or chat ids", path=path)
    out: set[str] = set()
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            raise ConfigurationError(
                f"must be a non-blank string, got {item!r}", path=f"{path}[{index}]"
            )
        out.add(item)
    return frozenset(out)


@dataclass(frozen=True)
class AccessConfig:
    """A channel's access policy (see the module docstring); the default admits
    everyone everywhere and answers every group message, as a channel without one.

    Build it from the configuration's camelCase mapping with `from_mapping()`;
    invalid values raise `ConfigurationError` naming the field.
    """

    dm: DmPolicy | str = DmPolicy.OPEN
    groups: GroupPolicy | str = GroupPolicy.OPEN
    allow_users: frozenset[str] = frozenset()
    allow_chats: frozenset[str] = frozenset()
    admins: frozenset[str] = frozenset()
    require_mention: bool | None = None
    #: group chat id -> whether that group requires a mention
    group_rules: Mapping[str, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "dm", DmPolicy(self.dm))
        except ValueError:
            raise ConfigurationError(
                f"must be one of {[p.value for p in DmPolicy]}, got {self.dm!r}", path="access.dm"
            ) from None
        try:
            object.__setattr__(self, "groups", GroupPolicy(self.groups))
        except ValueError:
            raise ConfigurationError(
                f"must be one of {[p.value for p in GroupPolicy]}, got {self.groups!r}",
                path="access.groups",
            ) from None
        for name, key in (
            ("allow_users", "allowUsers"),
            ("allow_chats", "allowChats"),
            ("admins", "admins"),
        ):
            object.__setattr__(self, name, _ids(getattr(self, name), f"access.{key}"))
        if self.require_mention is not None and not isinstance(self.require_mention, bool):
            raise ConfigurationError(
                f"must be true or false, got {self.require_mention!r}",
                path="access.requireMention",
            )
        rules: object = self.group_rules
        if not isinstance(rules, Mapping):
            raise ConfigurationError("must be an object of chat id -> rule", "access.groupRules")
        checked: dict[str, bool] = {}
        for chat, rule in rules.items():
            if not isinstance(chat, str) or not chat:
                raise ConfigurationError("keys must be chat ids", path="access.groupRules")
            if not isinstance(rule, bool):
                raise ConfigurationError(
                    f"requireMention must be true or false, got {rule!r}",
                    path=f"access.groupRules.{chat}",
                )
            checked[chat] = rule
        object.__setattr__(self, "group_rules", checked)

    @classmethod
    def from_mapping(cls, data: object) -> AccessConfig:
        """Parse the ``access`` section (camelCase keys, as in the configuration file).

        An unknown key or a bad value raises `ConfigurationError` whose ``path`` names
        it (``access.dm``, ``access.allowUsers[2]``, ``access.groupRules.oc_1``).
        """
        if isinstance(data, AccessConfig):
            return data
        if not isinstance(data, Mapping):
            raise ConfigurationError("must be an object", path="access")
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            name = _KEYS.get(key)
            if name is None:
                known = ", ".join(sorted(_KEYS))
                raise ConfigurationError(f"is not a known field (known: {known})", f"access.{key}")
            if name == "group_rules":
                value = _group_rules(value)
            kwargs[name] = value
        return cls(**kwargs)

    def requires_mention(self, chat_id: str) -> bool:
        """Whether a group message in ``chat_id`` must address the bot."""
        rule = self.group_rules.get(chat_id)
        if rule is not None:
            return rule
        return True if self.require_mention is None else self.require_mention


def _group_rules(value: object) -> dict[str, bool]:
    if not isinstance(value, Mapping):
        raise ConfigurationError("must be an object of chat id -> rule", "access.groupRules")
    out: dict[str, bool] = {}
    for chat, rule in value.items():
        path = f"access.groupRules.{chat}"
        if not isinstance(rule, Mapping):
            raise ConfigurationError('must be an object like {"requireMention": false}', path)
        for key in rule:
            if key != "requireMention":
                raise ConfigurationError("is not a known field", f"{path}.{key}")
        if "requireMention" not in rule:
            raise ConfigurationError("is required", f"{path}.requireMention")
        flag = rule["requireMention"]
        if not isinstance(flag, bool):
            raise ConfigurationError(
                f"must be true or false, got {flag!r}", f"{path}.requireMention"
            )
        out[str(chat)] = flag
    return out


@dataclass(frozen=True)
class AccessDecision:
    """What the gate decided for one message: ``admitted``, else ``notice`` (the text to
    tell the person, None: say nothing) and ``reason`` (for logs and tests)."""

    admitted: bool
    reason: str
    notice: str | None = None


_ADMITTED = AccessDecision(True, "admitted")


class AccessGate:
    """Applies an `AccessConfig` to inbound messages; thread-safe.

    `check()` decides one message (and rations the refusal notices); the pairing
    methods (`pairing_codes()`, `approve()`, `deny()`, `revoke()`) change who is
    admitted in ``pairing`` mode while the channel runs. ``store()`` returns the
    channel's `StateStore` (pairings shared by every process using it), or None: an
    in-process store of the gate's own is used.
    """

    def __init__(
        self,
        config: AccessConfig,
        *,
        clock: Clock | None = None,
        notice_interval: float = NOTICE_INTERVAL_S,
        channel_name: str = "channel",
        store: Callable[[], Any] | None = None,
    ) -> None:
        self.config = config
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._lock = threading.Lock()
        #: (chat, person) -> True while a refusal notice was sent within the interval
        self._noticed: BoundedMap[tuple[str, str], object] = BoundedMap(
            MAX_NOTICES, ttl=notice_interval, clock=self._clock
        )
        self._channel_name = channel_name
        self._store = store
        #: the pairing records when the channel has no state store of its own
        self._own_store: MemoryStore | None = None

    def update(self, config: AccessConfig) -> None:
        """Apply ``config`` from now on (a running bot's new allowlist); the people paired
        and the notices already sent are kept."""
        if not isinstance(config, AccessConfig):
            raise ConfigurationError("must be an AccessConfig", path="access")
        with self._lock:
            self.config = config

    # -- deciding ------------------------------------------------------------------------
    def allowed_user(self, user_id: str) -> bool:
        """``user_id`` is in ``allowUsers`` or ``admins``, or was paired."""
        cfg = self.config
        if user_id in cfg.allow_users or user_id in cfg.admins:
            return True
        return cfg.dm is DmPolicy.PAIRING and self.pairing.is_paired(user_id)

    def is_admin(self, user_id: str) -> bool:
        """``user_id`` is an admin, or no admins are set (``/stop all`` wants a listed
        admin all the same: see `channelkit.core.operator_commands`)."""
        admins = self.config.admins
        return not admins or user_id in admins

    def admits(self, msg: InboundMessage) -> bool:
        """Whether `check()` would admit ``msg``, without telling anybody anything (no
        notice counted, no pairing code made): for adapters that record admitted runs."""
        return self._decide(msg, tell=False).admitted

    def check(self, msg: InboundMessage) -> AccessDecision:
        """Decide whether ``msg`` reaches the agent (or the chat commands); a refusal
        carries the notice to send, at most once an hour per chat and person."""
        return self._decide(msg, tell=True)

    def _decide(self, msg: InboundMessage, *, tell: bool) -> AccessDecision:
        # operator commands are admitted like any message; what they may do there is
        # decided by channelkit.core.operator_commands (admins only for /stop all)
        return self._group(msg) if msg.is_group else self._direct(msg, tell)

    def _group(self, msg: InboundMessage) -> AccessDecision:
        cfg = self.config
        if cfg.groups is GroupPolicy.CLOSED:
            return AccessDecision(False, "groups_closed")
        if (
            cfg.groups is GroupPolicy.ALLOWLIST
            and msg.chat_id not in cfg.allow_chats
            and not self.allowed_user(msg.sender_id)
        ):
            return AccessDecision(False, "group_not_allowed")
        if cfg.requires_mention(msg.chat_id) and msg.mentions_bot is False:
            return AccessDecision(False, "not_mentioned")
        return _ADMITTED

    def _direct(self, msg: InboundMessage, tell: bool) -> AccessDecision:
        cfg = self.config
        if cfg.dm is DmPolicy.OPEN:
            return _ADMITTED
        if cfg.dm is DmPolicy.CLOSED:
            return self._refuse(msg, "dm_closed", MSG_ACCESS_DM_CLOSED, tell)
        if self.allowed_user(msg.sender_id):
            return _ADMITTED
        if cfg.dm is DmPolicy.ALLOWLIST:
            return self._refuse(msg, "dm_not_allowed", MSG_ACCESS_NOT_ALLOWED, tell)
        if not tell:
            return AccessDecision(False, "pairing")
        code = self._pairing_code(msg)
        if code is None:  # told about a live code within the hour
            return AccessDecision(False, "pairing_pending")
        return AccessDecision(False, "pairing", MSG_ACCESS_PAIRING.format(code=code))

    def _refuse(self, msg: InboundMessage, reason: str, text: str, tell: bool) -> AccessDecision:
        return AccessDecision(False, reason, text if tell and self._first_notice(msg) else None)

    def _first_notice(self, msg: InboundMessage) -> bool:
        """True once per notice interval per (chat, person)."""
        mine = object()
        stored = self._noticed.setdefault((msg.chat_id, msg.sender_id), lambda: mine)
        return stored is mine

    # -- pairing -------------------------------------------------------------------------
    @property
    def pairing(self) -> PairingBook:
        """The channel's pairing records (`PairingBook`) in its state store."""
        store = self._store() if self._store is not None else None
        if store is None:
            with self._lock:
                if self._own_store is None:
                    self._own_store = MemoryStore(clock=self._clock, maxsize=_OWN_STORE_KEYS)
                store = self._own_store
        return PairingBook(self._channel_name, store, clock=self._clock)

    def _pairing_code(self, msg: InboundMessage) -> str | None:
        """A new code for the person, or None when they hold a live one (told already)."""
        return self.pairing.request(msg.sender_id, msg.chat_id)

    def pairing_codes(self) -> list[PairingCode]:
        """The pairing requests waiting for an operator, oldest first."""
        return self.pairing.codes()

    def approve(self, code: str) -> PairingCode | None:
        """Admit the person who holds ``code`` (a code works once); None when unknown,
        expired or answered."""
        return self.pairing.approve(code)

    def deny(self, code: str) -> PairingCode | None:
        """Drop the request holding ``code``; None when unknown, expired or answered."""
        return self.pairing.deny(code)

    def revoke(self, user_id: str) -> bool:
        """Take a paired person's access away again; False when they were not paired."""
        return self.pairing.revoke(user_id)

    def paired_users(self) -> list[str]:
        """The people paired through pairing codes."""
        return self.pairing.paired()


def refused(
    channel_name: str,
    msg: InboundMessage,
    decision: AccessDecision,
    reply: Callable[[str], Future[CommandResult]],
) -> CommandHandle:
    """The handle of a refused message: ``reply(notice)`` sends the notice when there is
    one (its handle's ``reply`` is the text), else nothing is sent (``reply`` None)."""
    level = logging.DEBUG if msg.is_group else logging.INFO
    logger.log(
        level, "[%s] message refused by the access policy: %s", channel_name, decision.reason
    )
    if decision.notice is None:
        done: Future[CommandResult] = Future()
        done.set_result(CommandResult(ACCESS_COMMAND, "", False))
        return CommandHandle(ACCESS_COMMAND, None, done)
    return CommandHandle(ACCESS_COMMAND, decision.notice, reply(decision.notice))
