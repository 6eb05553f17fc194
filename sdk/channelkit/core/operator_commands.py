"""The conversation and operator chat commands: ``/new``, ``/status`` and ``/stop all``.

Written once on the platform contract: every chat platform gets them through
``ChannelBase.handle_inbound`` (after the access policy admitted the message, so a refused
person cannot use them and, in groups, ``requireMention`` applies as to any message).

* ``/new`` - the caller's conversation (the session scope of the message: one person in
  one chat, the chat, or the thread) starts over: the session router forgets the scope's
  session id, so the next message in that scope gets a new session id and the agent
  bridge a new session. While a run of that conversation is running or queued, ``/new``
  is refused with a line telling the person to ``/cancel`` it (or wait) first: it never
  ends work by surprise, and a queued message never lands in a session other than the one
  its conversation had when it was sent. In shared sessions it obeys
  ``authorized_senders`` as ``/cancel`` does.
* ``/status`` - what runs and what waits: ``Running: 1 (started 12 s ago by you) ·
  Queued: 2``. Anybody admitted may ask; they see their own conversation. A person listed
  in ``access.admins`` sees the whole chat (every person's and every thread's runs).
* ``/stop all`` - only for people listed in ``access.admins`` (with no admins configured
  nobody may use it: it stops other people's work). It withdraws every queued run of the
  chat (each ends ``cancelled`` with reason ``dropped``; a queue notice that can be edited
  says so), then cancels every running run of the chat exactly, as a Stop press does
  (reason ``cancel_command``: its output shows the platform's stopped state), and replies
  with the counts. It runs on the hook pool after the ACK (a cancel waits on the agent).
  Anybody else is refused with a line and nothing changes.
* ``/stop`` alone is ``/cancel`` (the caller's own running run, same rules and replies);
  ``/stop`` with another argument gets a usage line.

Replies go through the chat lane like every command reply (``ChatCommands.send_reply``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future

from channelkit.core.admission import RunAdmission
from channelkit.core.cancellation import RunCancellation
from channelkit.core.catalog import Messages
from channelkit.core.handles import CommandHandle, CommandResult, RunResult
from channelkit.core.runs import Run, RunTable
from channelkit.core.sessions import SessionRouter
from channelkit.core.text import (
    MSG_ADMIN_ONLY,
    MSG_NEW_BUSY,
    MSG_NEW_SESSION,
    MSG_NEW_UNAUTHORIZED,
    MSG_STATUS,
    MSG_STATUS_CHAT,
    MSG_STATUS_IDLE,
    MSG_STATUS_MORE,
    MSG_STATUS_OWN,
    MSG_STATUS_RUN,
    MSG_STATUS_TASK,
    MSG_STATUS_YOU,
    MSG_STOP_ALL,
    MSG_STOP_ALL_NOT_STOPPED,
    MSG_STOP_ALL_NOTHING,
)
from channelkit.core.types import CancellationReason, InboundMessage, SessionTarget
from channelkit.runtime.pool import WorkerPool

__all__ = ["STATUS_MAX_LISTED", "STOP_ALL_ARG", "OperatorCommands"]

logger = logging.getLogger(__name__)

#: ``/stop <arg>``: the argument that stops the whole chat.
STOP_ALL_ARG = "all"
#: Running runs a ``/status`` reply describes one by one (the rest are counted).
STATUS_MAX_LISTED = 3

#: ``reply(target, command, text, defer)``: send a command reply on the chat's lane.
Reply = Callable[
    [SessionTarget, str, str, "list[Callable[[], None]] | None"], Future[CommandResult]
]
#: ``deliver(target, command, text)``: send it now (already on a pool thread).
Deliver = Callable[[SessionTarget, str, str], CommandResult]
#: ``later(defer, submit)``: a Future for work ``submit()`` hands to the pool after the
#: ACK (``channelkit.core.commands.later``).
Later = Callable[
    ["list[Callable[[], None]]", Callable[[], Future[CommandResult]]], Future[CommandResult]
]


class OperatorCommands:
    """``/new``, ``/status`` and ``/stop all`` of one channel; see the module docstring.

    Collaborators: ``table`` (queued and live runs), ``router`` (session scopes),
    ``admission`` (to withdraw queued runs), ``cancellation`` (exact-run cancel),
    ``admins()`` (the current ``access.admins``), ``authorized(target)`` (the shared
    session rule of ``/cancel``), ``reply``/``deliver`` (command replies), ``later`` and
    ``pool`` (work after the ACK), ``texts(person)`` (the catalog texts in the person's
    language, for replies put together from several texts) and ``now`` (the monotonic
    clock the runs' start times are read on).
    """

    def __init__(
        self,
        *,
        channel_name: str,
        table: RunTable,
        router: SessionRouter,
        admission: RunAdmission,
        cancellation: RunCancellation,
        admins: Callable[[], frozenset[str]],
        authorized: Callable[[SessionTarget], bool],
        reply: Reply,
        deliver: Deliver,
        later: Later,
        pool: WorkerPool,
        texts: Callable[[str | None], Messages],
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.channel_name = channel_name
        self._table = table
        self._router = router
        self._admission = admission
        self._cancellation = cancellation
        self._admins = admins
        self._authorized = authorized
        self._reply = reply
        self._deliver = deliver
        self._later = later
        self._texts = texts
        self._pool = pool
        self._now = now

    def is_admin(self, sender_id: str) -> bool:
        """``sender_id`` is listed in ``access.admins`` (nobody is when none are set)."""
        return sender_id in self._admins()

    def _answer(
        self,
        command: str,
        target: SessionTarget,
        text: str,
        defer: list[Callable[[], None]] | None,
    ) -> CommandHandle:
        return CommandHandle(command, text, self._reply(target, command, text, defer))

    # -- /new ---------------------------------------------------------------------------

    def new_command(
        self,
        msg: InboundMessage,
        target: SessionTarget,
        defer: list[Callable[[], None]] | None = None,
    ) -> CommandHandle:
        """Start a fresh agent session for the caller's scope, or say why not."""
        if not self._authorized(target):
            return self._answer("new", target, MSG_NEW_UNAUTHORIZED, defer)
        key = self._router.key_for(target)
        with self._table.lock:  # no run of the scope is queued or started meanwhile
            busy = any(
                self._router.key_for(run.target) == key
                for run in self._table.active_runs() + self._table.queued_runs()
            )
            if not busy:
                old = self._router.session_for(target)
                self._router.forget(old)
        if busy:
            return self._answer("new", target, MSG_NEW_BUSY, defer)
        logger.info(
            "[%s] /new: session %s forgotten; the scope starts over", self.channel_name, old
        )
        return self._answer("new", target, MSG_NEW_SESSION, defer)

    # -- /status ------------------------------------------------------------------------

    def status_command(
        self,
        msg: InboundMessage,
        target: SessionTarget,
        defer: list[Callable[[], None]] | None = None,
    ) -> CommandHandle:
        """What runs and waits in the caller's conversation (an admin: the whole chat)."""
        return self._answer("status", target, self.status_text(msg, target), defer)

    def status_text(self, msg: InboundMessage, target: SessionTarget) -> str:
        """The ``/status`` reply for ``msg`` (read from the run table, nothing waits)."""
        m = self._texts(msg.sender_id)
        whole_chat = self.is_admin(msg.sender_id)
        if whole_chat:
            scope = m.text(MSG_STATUS_CHAT)

            def mine(run: Run) -> bool:
                return run.target.chat_id == target.chat_id

        else:
            scope = m.text(MSG_STATUS_OWN)
            key = self._router.key_for(target)

            def mine(run: Run) -> bool:
                return self._router.key_for(run.target) == key

        running = [r for r in self._table.active_runs() if mine(r) and not r.done]
        queued = [r for r in self._table.queued_runs() if mine(r) and not r.cancelled]
        if not running and not queued:
            return MSG_STATUS_IDLE.format(scope=scope)
        now = self._now()

        def started(run: Run) -> float:
            return run.started_at if run.started_at is not None else run.received_at

        running.sort(key=started)
        parts = [
            m.text(
                MSG_STATUS_RUN,
                seconds=max(0, int(now - started(run))),
                who=self._who(run, msg.sender_id, m),
            )
            for run in running[:STATUS_MAX_LISTED]
        ]
        if len(running) > STATUS_MAX_LISTED:
            parts.append(m.text(MSG_STATUS_MORE, count=len(running) - STATUS_MAX_LISTED))
        details = f" ({'; '.join(parts)})" if parts else ""
        return MSG_STATUS.format(
            scope=scope, running=len(running), details=details, queued=len(queued)
        )

    @staticmethod
    def _who(run: Run, caller: str, m: Messages) -> str:
        if run.owner is None:
            return m.text(MSG_STATUS_TASK, kind=run.kind)
        return m.text(MSG_STATUS_YOU) if run.owner.id == caller else run.owner.id

    # -- /stop all ----------------------------------------------------------------------

    def stop_all_command(
        self,
        msg: InboundMessage,
        target: SessionTarget,
        defer: list[Callable[[], None]] | None = None,
    ) -> CommandHandle:
        """Admins: drop every queued run of the chat and cancel every running one (on the
        pool, after the ACK); anybody else: a refusal, nothing changes."""
        if not self.is_admin(msg.sender_id):
            logger.info("[%s] /stop all refused: the sender is not an admin", self.channel_name)
            text = MSG_ADMIN_ONLY.format(command=f"stop {STOP_ALL_ARG}")
            return self._answer("stop", target, text, defer)
        proxy: Future[CommandResult]
        if defer is None:
            proxy = self._pool.submit(self._stop_all_and_reply, target)
        else:
            proxy = self._later(defer, lambda: self._pool.submit(self._stop_all_and_reply, target))
        return CommandHandle("stop", None, proxy)

    def _stop_all_and_reply(self, target: SessionTarget) -> CommandResult:
        stopped, failed, dropped = self.stop_all(target.chat_id)
        text: str
        if not (stopped or failed or dropped):
            text = MSG_STOP_ALL_NOTHING
        elif not failed:
            text = MSG_STOP_ALL.format(stopped=stopped, dropped=dropped)
        else:  # two catalog texts, each in the admin's language
            m = self._texts(target.sender_id)
            text = m.text(MSG_STOP_ALL, stopped=stopped, dropped=dropped) + m.text(
                MSG_STOP_ALL_NOT_STOPPED, count=failed
            )
        return self._deliver(target, "stop", text)

    def stop_all(self, chat_id: str) -> tuple[int, int, int]:
        """Drop the chat's queued runs, then cancel its running ones (blocks for the
        agent's cancel calls: a pool thread). Returns (stopped, not stopped, dropped)."""
        # withdrawn first, so that a running run's end does not start them
        withdrawn: list[Run] = []
        for run in self._table.queued_runs():
            ticket = run.ticket
            if run.target.chat_id != chat_id or ticket is None:
                continue
            if self._admission.withdraw(ticket):
                self._table.unqueue(run)
                withdrawn.append(run)
        stopped = failed = 0
        for run in self._table.active_runs():
            if run.target.chat_id != chat_id:
                continue
            if self._cancel(run, CancellationReason.CANCEL_COMMAND):
                stopped += 1
            elif not run.done:
                failed += 1
        for run in withdrawn:
            # never started: ends cancelled at once (its queue notice is finalized)
            self._cancel(run, CancellationReason.DROPPED)
            if not run.future.done():
                try:
                    run.future.set_result(RunResult(run.run_id, run.session_id, "cancelled"))
                except Exception:  # resolved meanwhile
                    pass
        logger.info(
            "[%s] /stop all in chat %s: %d stopped, %d not stopped, %d queued dropped",
            self.channel_name,
            chat_id,
            stopped,
            failed,
            len(withdrawn),
        )
        return stopped, failed, len(withdrawn)

    def _cancel(self, run: Run, reason: CancellationReason) -> bool:
        try:
            return self._cancellation.cancel(run, reason)
        except Exception:
            logger.exception(
                "[%s] /stop all: cancelling run %s failed", self.channel_name, run.run_id
            )
            return False
