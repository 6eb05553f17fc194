"""The observer interface: what channelkit reports about its own work.

The core, the HTTP layer and the shared platform code report what happens (a message
arrived, a run started or ended, an answer was delivered, a platform API call returned)
to an `Observer` through `channelkit.observability.hub`. They never import a metrics
library: the Prometheus observer (`channelkit.observability.metrics`) and the log
observer (`channelkit.observability.logs`) turn the reports into metrics and log lines.

Every method of `Observer` does nothing by default; a subclass overrides what it needs.
Reports carry no message text, no user id and no chat id: a chat appears only as
`chat_hash()`, a short keyed hash that correlates log lines without naming the chat.
This module imports nothing from channelkit.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
from dataclasses import dataclass

__all__ = [
    "LOG_SALT_ENV",
    "Observer",
    "RunReport",
    "chat_hash",
    "platform_of",
]

#: The environment variable holding the key of `chat_hash()` (any text). `serve
#: --workers N` sets one for its workers so their hashes agree; unset, each process
#: picks a random one.
LOG_SALT_ENV = "CHANNELKIT_LOG_SALT"

_salt_lock = threading.Lock()
_salt: bytes | None = None


def _key() -> bytes:
    global _salt
    with _salt_lock:
        if _salt is None:
            given = os.environ.get(LOG_SALT_ENV, "")
            _salt = hashlib.sha256(given.encode()).digest() if given else secrets.token_bytes(32)
        return _salt


def chat_hash(channel: str, chat_id: str | None, thread_id: str | None = None) -> str:
    """A 12-hex-digit keyed hash of a chat (and thread): the same chat gives the same
    hash in one process (in every worker of `serve --workers`, see `LOG_SALT_ENV`);
    the chat id cannot be read back from it."""
    text = f"{channel}\0{chat_id or ''}\0{thread_id or ''}".encode()
    return hashlib.blake2b(text, digest_size=6, key=_key()[:32]).hexdigest()


_platforms: dict[type, str] = {}
_platforms_lock = threading.Lock()


def platform_of(channel: object) -> str:
    """The platform label of a channel: its ``platform`` attribute when it is a string,
    else the ``channelkit.platforms.<name>`` package its class (or a base class) lives
    in, else ``"other"``."""
    declared = getattr(channel, "platform", None)
    if isinstance(declared, str) and declared:
        return declared
    kind = type(channel)
    with _platforms_lock:
        known = _platforms.get(kind)
    if known is not None:
        return known
    found = "other"
    for cls in kind.__mro__:
        parts = cls.__module__.split(".")
        if len(parts) >= 3 and parts[:2] == ["channelkit", "platforms"] and parts[2] != "common":
            found = parts[2]
            break
    with _platforms_lock:
        if len(_platforms) < 1000:
            _platforms[kind] = found
    return found


@dataclass(frozen=True)
class RunReport:
    """One run as the observers see it (never its text or its people).

    `waited_s`: seconds from the message's arrival (or the run's creation) until it
    started; `ran_s`: from its start to its end (0 until it ended); `first_reaction_s`:
    until the person first saw something (None when nothing was shown yet).
    `outcome`: ``started`` in `Observer.run_started`, else ``completed``, ``failed``
    or ``cancelled``.
    """

    platform: str
    channel: str
    run_id: str
    kind: str
    chat: str
    outcome: str
    waited_s: float = 0.0
    ran_s: float = 0.0
    first_reaction_s: float | None = None


class Observer:
    """Receives channelkit's reports; every method is a no-op (override what you need).

    Methods are called on the thread that did the work (web threads, run lanes, pool
    threads): keep them quick and thread-safe. An observer that raises is logged and
    skipped, never breaking the work that reported.
    """

    def channel_opened(self, channel: str, platform: str) -> None:
        """A channel named ``channel`` of ``platform`` was built."""

    def inbound(self, platform: str, channel: str, chat: str, outcome: str, run_id: str) -> None:
        """A person's message reached the channel: ``outcome`` is ``accepted``, ``busy``,
        ``refused`` (the access policy) or ``closed``; ``chat`` a `chat_hash()`;
        ``run_id`` empty unless a run or command took it."""

    def ingress(self, platform: str, outcome: str) -> None:
        """An inbound request or frame was judged: ``accepted``, ``busy``, ``refused``,
        ``closed``, ``bad_signature``, ``replay`` or ``store_unavailable``."""

    def run_started(self, report: RunReport) -> None:
        """A run started (its lifecycle ``started`` hook ran)."""

    def first_reaction(self, platform: str, seconds: float) -> None:
        """The person first saw something of a run ``seconds`` after their message."""

    def run_ended(self, report: RunReport) -> None:
        """A run ended ``completed``, ``failed``, ``cancelled`` or ``rejected``."""

    def runs_queued(self, channel: str, delta: int) -> None:
        """Runs waiting to start changed by ``delta`` (+1 queued, -1 started or gone)."""

    def pending_questions(self, channel: str, delta: int) -> None:
        """Questions and permission requests waiting on a person changed by ``delta``."""

    def delivery(self, channel: str, outcome: str) -> None:
        """A final answer's delivery: ``delivered``, ``retried``, ``alternate_path``,
        ``lost`` or ``uncertain``."""

    def api_call(self, platform: str, operation: str, status: str, seconds: float) -> None:
        """One attempt of a platform API call ended: ``status`` is the HTTP status
        (``"200"``, ``"429"``...), ``timeout`` or ``error`` when no answer came."""

    def connection_state(self, connection: str, old: str, new: str) -> None:
        """A long connection changed from ``old`` to ``new`` status."""

    def store_operation(self, store: str, operation: str, seconds: float) -> None:
        """One state-store operation took ``seconds`` (failures included): ``store`` is
        ``memory`` or ``redis``, ``operation`` one of
        `channelkit.state.base.STORE_OPERATIONS` (``put``, ``get``, ``delete``, ``add``,
        ``replace``, ``scan``, ``push``, ``ping``, ``hold_lease``, ``write_if``,
        ``claim_matching``, ``take_token``; never a key)."""

    def shutdown(self) -> None:
        """The process is shutting down (``serve``): write a summary if you keep one."""
