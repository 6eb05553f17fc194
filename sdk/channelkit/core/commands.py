"""Chat commands: ``/approve``, ``/approve-always``, ``/deny``, ``/cancel``, ``/last``,
``/new``, ``/status`` and ``/stop`` (``/stop all``).

`parse_command()` recognizes them; `ChatCommands` answers them with the
ownership rules of the channel: a permission command answers the one pending request of
its chat (or the one named by id) in memory on the caller's thread, ``/cancel`` is
authorized there and executed on the pool, and every reply is sent on the chat's lane.
It finds requests through `PendingRequests`,
runs through the `RunTable`, cancels through
`RunCancellation` and replies through the channel's
``send_message`` hook. ``/last`` sends the scope's last answer again
(`LastAnswers`). ``/new``, ``/status`` and ``/stop all`` are answered by
`OperatorCommands` (`channelkit.core.operator_commands`); ``/stop`` alone is ``/cancel``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any, TypeVar

from channelkit.core.admission import RunAdmission
from channelkit.core.cancellation import RunCancellation
from channelkit.core.config import ChannelConfig
from channelkit.core.handles import CommandHandle, CommandResult
from channelkit.core.hooks import ChannelHooks
from channelkit.core.last_answers import LastAnswers
from channelkit.core.operator_commands import STOP_ALL_ARG, OperatorCommands
from channelkit.core.pending import CANCELLED_RESPONSE, Pending
from channelkit.core.permission_requests import PendingRequests
from channelkit.core.questions import always_option_id, approval_option_id, reject_option_id
from channelkit.core.runs import Run, RunTable
from channelkit.core.sessions import SessionRouter
from channelkit.core.text import (
    MSG_APPROVED,
    MSG_APPROVED_ALWAYS,
    MSG_CANCEL_FAILED,
    MSG_CANCEL_UNAUTHORIZED,
    MSG_CANCELLED,
    MSG_DENIED,
    MSG_FAILED,
    MSG_NO_ALWAYS,
    MSG_NO_APPROVABLE,
    MSG_NO_LAST_ANSWER,
    MSG_NONE,
    MSG_NOT_FOUND_ID,
    MSG_NOT_PENDING,
    MSG_NOTHING_RUNNING,
    MSG_STOP_USAGE,
    MSG_SUBMIT_VIA_CARD,
    MSG_UNAUTHORIZED,
    format_ambiguous,
)
from channelkit.core.types import CancellationReason, InboundMessage, SessionTarget
from channelkit.runtime.pool import WorkerPool
from channelkit.runtime.serial import KeyedSerialQueue

__all__ = ["COMMANDS", "ChatCommands", "later", "parse_command"]

logger = logging.getLogger(__name__)

#: Commands ChannelBase handles itself (the text after ``/``).
COMMANDS = ("approve", "approve-always", "deny", "cancel", "last", "new", "status", "stop")

_T = TypeVar("_T")


def parse_command(text: str) -> tuple[str, str | None] | None:
    """``"/deny req-1"`` -> ``("deny", "req-1")``; None for anything else.

    Only `COMMANDS` are recognized; ``/approve@bot`` is accepted as ``/approve``.
    """
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    parts = stripped.split()
    name = parts[0][1:].split("@", 1)[0].lower()
    if name not in COMMANDS:
        return None
    return name, (parts[1] if len(parts) > 1 else None)


def _selected(option_id: str) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


class ChatCommands:
    """The channel's command handling; see the module docstring."""

    def __init__(
        self,
        *,
        config: ChannelConfig,
        table: RunTable,
        router: SessionRouter,
        requests: PendingRequests,
        cancellation: RunCancellation,
        hooks: ChannelHooks,
        lanes: KeyedSerialQueue,
        pool: WorkerPool,
        answers: LastAnswers,
        admission: RunAdmission,
        admins: Callable[[], frozenset[str]],
    ) -> None:
        self.channel_name = config.name
        self._config = config
        self._table = table
        self._router = router
        self._requests = requests
        self._cancellation = cancellation
        self._hooks = hooks
        self._lanes = lanes
        self._pool = pool
        self._answers = answers
        #: ``/new``, ``/status`` and ``/stop all``
        self.operator = OperatorCommands(
            channel_name=config.name,
            table=table,
            router=router,
            admission=admission,
            cancellation=cancellation,
            admins=admins,
            authorized=self.authorized,
            reply=self.send_reply,
            deliver=self.deliver_reply,
            later=later,
            pool=pool,
            texts=hooks.messages_for,
        )

    def handle(
        self,
        name: str,
        arg: str | None,
        msg: InboundMessage,
        target: SessionTarget,
        defer: list[Callable[[], None]] | None = None,
    ) -> CommandHandle:
        if name == "cancel":
            return self.cancel_command(msg, target, defer)
        if name == "last":
            return self.last_command(target, defer)
        if name == "new":
            return self.operator.new_command(msg, target, defer)
        if name == "status":
            return self.operator.status_command(msg, target, defer)
        if name == "stop":
            if arg is None:
                return self.cancel_command(msg, target, defer)  # /stop is /cancel
            if arg.lower() == STOP_ALL_ARG:
                return self.operator.stop_all_command(msg, target, defer)
            usage: str = MSG_STOP_USAGE
            return CommandHandle("stop", usage, self.send_reply(target, "stop", usage, defer))
        if defer is not None:
            # answered after the ACK: settlement listeners queue card writes
            future = later(
                defer,
                lambda: self._lanes.submit(
                    ("chat", target.chat_id, target.thread_id or ""),
                    self._answer_and_reply,
                    name,
                    arg,
                    msg,
                    target,
                ),
            )
            return CommandHandle(name, None, future)
        reply = self.permission_command(name, arg, msg, target)
        return CommandHandle(name, reply, self.send_reply(target, name, reply))

    def _answer_and_reply(
        self, name: str, arg: str | None, msg: InboundMessage, target: SessionTarget
    ) -> CommandResult:
        return self.deliver_reply(target, name, self.permission_command(name, arg, msg, target))

    def send_reply(
        self,
        target: SessionTarget,
        command: str,
        reply: str,
        defer: list[Callable[[], None]] | None = None,
    ) -> Future[CommandResult]:
        def submit() -> Future[CommandResult]:
            return self._lanes.submit(
                ("chat", target.chat_id, target.thread_id or ""),
                self.deliver_reply,
                target,
                command,
                reply,
            )

        return submit() if defer is None else later(defer, submit)

    def deliver_reply(self, target: SessionTarget, command: str, reply: str) -> CommandResult:
        # a catalog message (``MSG_*``) is shown in the language of the person it answers
        reply = self._hooks.messages_for(target.sender_id).text(reply)
        try:
            self._hooks.send_message(target.chat_id, reply, thread_id=target.thread_id)
        except Exception as exc:
            logger.error("[%s] sending the /%s reply failed: %s", self.channel_name, command, exc)
            return CommandResult(command, reply, False)
        return CommandResult(command, reply, True)

    def authorized(self, target: SessionTarget) -> bool:
        """True when ``target``'s sender may use /cancel, /new and the permission
        commands: always in a session of their own; in a shared session (``chat`` or
        ``thread`` scope for this message) when ``authorized_senders`` is unset or
        lists them."""
        allowed = self._config.authorized_senders
        return not self._router.shared(target) or allowed is None or target.sender_id in allowed

    def can_answer(self, pending: Pending, msg: InboundMessage) -> bool:
        if pending.target.chat_id != msg.chat_id:
            return False
        if (pending.target.thread_id or "") != (msg.thread_id or ""):
            return False
        if pending.user_input_presented and msg.sender_id != pending.target.sender_id:
            return False
        return self._router.shared(pending.target) or msg.sender_id == pending.target.sender_id

    def permission_command(
        self, decision: str, request_id: str | None, msg: InboundMessage, target: SessionTarget
    ) -> str:
        if not self.authorized(target):
            return MSG_UNAUTHORIZED
        if request_id:
            found = self._requests.get(request_id)
            if found is None or not self.can_answer(found, msg):
                return MSG_NOT_FOUND_ID
            pending = found
        else:
            candidates = [
                p
                for p in self._requests.in_chat(msg.chat_id, msg.thread_id)
                if self.can_answer(p, msg)
            ]
            if not candidates:
                return MSG_NONE
            if len(candidates) > 1:
                return format_ambiguous(
                    decision, [(p.request_id, p.request.title) for p in candidates]
                )
            pending = candidates[0]
        options = pending.request.options
        if decision == "approve":
            if pending.user_input_presented:
                return MSG_SUBMIT_VIA_CARD
            option_id = approval_option_id(options)
            if option_id is None:
                return MSG_NO_APPROVABLE
            response: Mapping[str, Any] = _selected(option_id)
            success = MSG_APPROVED
        elif decision == "approve-always":
            if pending.user_input_presented:
                return MSG_SUBMIT_VIA_CARD
            option_id = always_option_id(options)
            if option_id is None:
                return MSG_NO_ALWAYS
            response, success = _selected(option_id), MSG_APPROVED_ALWAYS
        else:
            option_id = reject_option_id(options)
            response = _selected(option_id) if option_id else CANCELLED_RESPONSE
            success = MSG_DENIED
        try:
            ok = self._requests.respond(pending, response)
        except Exception as exc:
            logger.error(
                "[%s] answering permission request %s failed: %s",
                self.channel_name,
                pending.request_id,
                exc,
            )
            return MSG_FAILED
        return success if ok else MSG_NOT_PENDING

    def cancel_command(
        self,
        msg: InboundMessage,
        target: SessionTarget,
        defer: list[Callable[[], None]] | None = None,
    ) -> CommandHandle:
        if not self.authorized(target):
            reply = MSG_CANCEL_UNAUTHORIZED
            return CommandHandle("cancel", reply, self.send_reply(target, "cancel", reply, defer))
        session_id = self._router.session_for(target)
        run = self._table.active_run(session_id)
        if run is None:
            reply = MSG_NOTHING_RUNNING
            return CommandHandle("cancel", reply, self.send_reply(target, "cancel", reply, defer))

        def submit() -> Future[CommandResult]:
            return self._pool.submit(self._cancel_and_reply, run, target)

        future = submit() if defer is None else later(defer, submit)
        return CommandHandle("cancel", None, future)

    def last_command(
        self, target: SessionTarget, defer: list[Callable[[], None]] | None = None
    ) -> CommandHandle:
        """``/last``: the scope's last answer again (kept for ``last_answer_max_age``),
        or a line saying there is none."""
        answer = self._answers.last(self._router.session_for(target))
        reply = answer if answer else MSG_NO_LAST_ANSWER
        return CommandHandle("last", reply, self.send_reply(target, "last", reply, defer))

    def _cancel_and_reply(self, run: Run, target: SessionTarget) -> CommandResult:
        try:
            ok = self._cancellation.cancel(run, CancellationReason.CANCEL_COMMAND)
        except Exception:
            logger.exception("[%s] /cancel failed for run %s", self.channel_name, run.run_id)
            ok = False
        return self.deliver_reply(target, "cancel", MSG_CANCELLED if ok else MSG_CANCEL_FAILED)


def later(defer: list[Callable[[], None]], submit: Callable[[], Future[_T]]) -> Future[_T]:
    """A Future for work that ``submit()`` hands to the pool once ``defer`` runs."""
    proxy: Future[_T] = Future()

    def copy(inner: Future[_T]) -> None:
        if proxy.done():
            return
        error = inner.exception()
        if error is not None:
            proxy.set_exception(error)
        else:
            proxy.set_result(inner.result())

    def start() -> None:
        try:
            inner = submit()
        except BaseException as exc:
            if not proxy.done():
                proxy.set_exception(exc)
            raise
        inner.add_done_callback(copy)

    defer.append(start)
    return proxy
