"""The settlement side of approval buttons, shared by Telegram, Feishu, Slack and Discord.

A platform presenter keeps its live approval records in a `CardRegistry` and
answers through the request's one-shot responder. The registration (the text prompt
when the registry is full), the one-shot claim of a tap, what follows the platform's own
send (subscribe to the settlement, undo on a failed send, finalize when the request
ended before the send returned), the answer on the pool, the settlement (tombstone,
then one finalize on the pool) and the once-only finalize are the same everywhere;
`ApprovalButtons` holds them. A subclass names where its record keeps the sent
message (`ApprovalButtons._sent_ref()` / `ApprovalButtons._set_sent_ref()`)
and shows the outcome (`ApprovalButtons._show_outcome()`); a settled prompt shows
the request and the outcome only, never the commands that answered it
(`ApprovalButtons.settled_text()`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any, Generic, Literal, Protocol, TypeVar

from channelkit.core.approvals import PermissionRequestContext
from channelkit.core.catalog import Messages, messages
from channelkit.core.text import without_reply_commands
from channelkit.platforms.common.native_input import reserve_native_input
from channelkit.platforms.common.registry import CardRegistry, MemoryCardRegistry

__all__ = ["ApprovalButtons", "ApprovalRecord"]


class ApprovalRecord(Protocol):
    """What the shared settlement reads and writes of a platform's approval record."""

    token: str
    ctx: PermissionRequestContext
    claimed: bool
    settled: bool
    finalized: bool


R = TypeVar("R", bound=ApprovalRecord)


class ApprovalButtons(Generic[R]):
    """The registry, answer, settlement and finalize of one channel's approval buttons.

    ``api`` is the platform's API wrapper (the subclass's calls use it). ``submit(key,
    fn)`` runs ``fn`` on a per-key serial queue of the pool (never on the web thread).
    ``prompt(ctx)`` makes a request's prompt text when `present()` is given none
    (`ApprovalButtons._prompt_text()`); ``texts_for(person)`` gives the catalog texts a
    person reads (the channel sets its ``messages_for``). ``_what`` prefixes the log
    lines (``"<what> answer failed"``) and ``_logger`` is the platform module's logger.
    """

    _what = "approval"
    _logger = logging.getLogger(__name__)

    def __init__(
        self,
        api: Any,
        *,
        submit: Callable[[Any, Callable[[], Any]], Any],
        clock: Any,
        registry: CardRegistry[Any, Any] | None = None,
        prompt: Callable[[PermissionRequestContext], str] | None = None,
    ) -> None:
        self._api = api
        self._submit = submit
        self._prompt = prompt
        self.registry: CardRegistry[Any, Any] = (
            registry if registry is not None else MemoryCardRegistry(clock)
        )
        self._lock = self.registry.lock
        #: the catalog texts a person reads (the channel sets its ``messages_for``)
        self.texts_for: Callable[[str | None], Messages] = lambda _: messages()

    def _prompt_text(self, ctx: PermissionRequestContext, text: str | None) -> str:
        """``text``, else the constructor's ``prompt(ctx)``; a `ValueError` naming
        ``text`` when there is neither."""
        if text is not None:
            return text
        if self._prompt is None:
            raise ValueError("text: required when the presenter has no prompt")
        return self._prompt(ctx)

    def live_count(self) -> int:
        return len(self.registry)

    def _sent_ref(self, record: R) -> Any:
        """The sent message's reference on ``record`` (None before the send returned)."""
        raise NotImplementedError

    def _set_sent_ref(self, record: R, ref: Any) -> None:
        raise NotImplementedError

    @staticmethod
    def settled_text(prompt: str, outcome: str, limit: int) -> str:
        """The settled prompt's text (at most ``limit`` characters): the request without
        its "Reply with: /approve ... /deny ..." commands, then a blank line and the
        ``outcome`` label."""
        body = without_reply_commands(prompt).rstrip()
        return f"{body[: max(0, limit - len(outcome) - 2)]}\n\n{outcome}"

    def _show_outcome(self, record: R, ref: Any) -> None:
        """Show the request's end state on the sent message ``ref`` (on the pool)."""
        raise NotImplementedError

    def _register(self, record: R) -> bool:
        """Register ``record`` under its token; False (the text prompt) when the registry
        is full (`reserve_native_input()`)."""
        return reserve_native_input(self.registry, record.token, record, None)

    @staticmethod
    def _take(record: R) -> Literal["stale", "busy"] | None:
        """The one-shot claim of ``record`` by a correlated and authorized tap (call it
        under the registry lock): None when this tap claimed it, ``stale`` once the
        request ended, ``busy`` while an earlier tap's answer is on its way."""
        if record.settled:
            return "stale"
        if record.claimed:
            return "busy"
        record.claimed = True
        return None

    def _deliver(self, record: R, send: Callable[[], Any], failure: str) -> str:
        """Send the registered ``record``'s prompt with ``send`` (its result is the sent
        message's reference); ``presented``, or ``unsupported`` when the send failed
        (logged as ``failure``, the record dropped again)."""
        token = record.token
        unsubscribe = record.ctx.on_settled(lambda _reason: self._on_settled(record))
        try:
            ref = send()
        except Exception as exc:
            self._logger.warning("%s: %s", failure, type(exc).__name__)
            unsubscribe()
            with self._lock:
                self.registry.remove(token, record)
            return "unsupported"
        with self._lock:
            self._set_sent_ref(record, ref)
            settled = record.settled
        if settled:
            self._submit(token, partial(self._finalize, record))
        return "presented"

    def _respond(self, record: R, option_id: str) -> None:
        try:
            record.ctx.select(option_id)  # False: another surface won; its settlement shows
        except Exception as exc:
            self._logger.warning("%s answer failed: %s", self._what, type(exc).__name__)

    def _on_settled(self, record: R) -> None:
        with self._lock:
            if record.settled:
                return
            record.settled = True
            self.registry.remove(record.token, record)
            self.registry.bury(record.token, (record.ctx.request_id, "ended"))
            sent = self._sent_ref(record) is not None
        if sent:
            self._submit(record.token, partial(self._finalize, record))

    def _finalize(self, record: R) -> None:
        with self._lock:
            if record.finalized or self._sent_ref(record) is None:
                return
            record.finalized = True
            ref = self._sent_ref(record)
        self._show_outcome(record, ref)
