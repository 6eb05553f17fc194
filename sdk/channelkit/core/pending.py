"""Pending requests: permission requests and questions waiting on a person.

:class:`PendingRequests` is the channel's registry of live requests (by request id and by
chat), and the flow around them: registration with its expiry timer, native
presentation or the text prompt, the one-shot responder, settlement exactly once, and
the bridge's own resolutions. It shares the channel's lock. A request registered for a
run *parks* that run in the channel's admission while it waits on the person, so people
who take their time do not hold back anyone else's run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from channelkit.agents.base import (
    PermissionRequest,
    PermissionResolved,
    PermissionResponse,
    SessionDied,
)
from channelkit.core.approvals import (
    PermissionHooks,
    PermissionRequestContext,
    overrides_permission_hook,
    present_permission,
)
from channelkit.core.context import SettlementListener, UserInputRequestContext
from channelkit.core.questions import approval_option_id, is_reject_option, normalize_user_questions
from channelkit.core.runs import Run
from channelkit.core.types import (
    OutputSegmentContext,
    SegmentEndReason,
    SessionTarget,
    SettlementReason,
    UserInputPresentationResult,
)
from channelkit.runtime.scheduler import TimerHandle

if TYPE_CHECKING:
    from channelkit.core.channel import ChannelBase

__all__ = ["CANCELLED_RESPONSE", "Pending", "PendingRequests", "PermissionHooks"]

logger = logging.getLogger(__name__)

CANCELLED_RESPONSE: Mapping[str, Any] = {"outcome": {"outcome": "cancelled"}}


class Pending:
    """A pending permission request; settled exactly once (internal)."""

    __slots__ = (
        "answer",
        "channel",
        "chat_key",
        "context",
        "expired",
        "expires_at",
        "listeners",
        "lock",
        "parked",
        "request",
        "request_id",
        "respond_invoked",
        "response_future",
        "run",
        "session_id",
        "settled_reason",
        "target",
        "timer",
        "user_input_presented",
    )

    def __init__(
        self,
        channel: ChannelBase,
        request: PermissionRequest,
        target: SessionTarget,
        run: Run | None,
    ) -> None:
        self.channel = channel
        self.request = request
        self.request_id = request.request_id
        self.session_id = request.session_id
        self.target = target
        self.run = run
        self.chat_key = (target.chat_id, target.thread_id or "")
        self.lock = threading.Lock()
        self.listeners: list[SettlementListener] = []
        self.settled_reason: SettlementReason | None = None
        self.response_future: Future[bool] | None = None
        self.respond_invoked = False
        self.user_input_presented = False
        self.context: UserInputRequestContext | None = None
        self.timer: TimerHandle | None = None
        self.expires_at = 0.0
        self.parked = False  # counted in run.waiting
        self.answer: Mapping[str, Any] | None = None  # the winning answer, once settled
        self.expired = False  # answered cancelled because its lifetime ran out

    def respond(self, response: PermissionResponse) -> bool:
        return self.channel._requests.respond(self, response)

    def subscribe(self, listener: SettlementListener) -> Callable[[], None]:
        with self.lock:
            reason = self.settled_reason
            if reason is None:
                self.listeners.append(listener)
        if reason is not None:
            self._call(listener, reason)
            return lambda: None

        def unsubscribe() -> None:
            with self.lock:
                if listener in self.listeners:
                    self.listeners.remove(listener)

        return unsubscribe

    def settle(self, reason: SettlementReason) -> bool:
        with self.lock:
            if self.settled_reason is not None:
                return False
            self.settled_reason = reason
            listeners = self.listeners
            self.listeners = []
            timer = self.timer
            self.timer = None
        if timer is not None:
            timer.cancel()
        for listener in listeners:
            self._call(listener, reason)
        return True

    def _call(self, listener: SettlementListener, reason: SettlementReason) -> None:
        try:
            listener(reason)
        except Exception as exc:
            logger.error(
                "[%s] user input settlement listener failed for request %s "
                "(session %s run %s): %s",
                self.channel.name,
                self.request_id,
                self.session_id,
                self.run.run_id if self.run is not None else None,
                exc,
                exc_info=True,
            )


class PendingRequests:
    """The channel's live requests and their settlement; see the module docstring."""

    def __init__(self, channel: ChannelBase) -> None:
        self._ch = channel
        self.by_id: dict[str, Pending] = {}  # capped, insertion ordered
        self.by_chat: dict[tuple[str, str], list[str]] = {}

    def dispatch_request(self, request: PermissionRequest) -> None:
        session_id = request.session_id
        evicted: list[Pending] = []
        replaced: Pending | None = None
        pending: Pending | None = None
        with self._ch._lock:
            run = self._ch._active.get(session_id)
            target = run.target if run is not None else self._ch.router.target_for(session_id)
            if not self._ch._closed and target is not None and target.channel_name == self._ch.name:
                pending = Pending(self._ch, request, target, run)
                replaced = self.by_id.get(request.request_id)
                if replaced is not None:
                    self._unindex_locked(replaced)
                while len(self.by_id) >= self._ch.config.max_pending_permissions:
                    oldest = next(iter(self.by_id.values()))
                    self._unindex_locked(oldest)
                    evicted.append(oldest)
                self.by_id[request.request_id] = pending
                self.by_chat.setdefault(pending.chat_key, []).append(request.request_id)
        if replaced is not None:
            replaced.settle(SettlementReason.CANCELLED)
            self._ch._unpark(replaced)
        for old in evicted:
            old.settle(SettlementReason.CANCELLED)
            self._ch._unpark(old)
            self.post_bridge_cancel(old.request_id)
        if pending is None:
            logger.info(
                "[%s] permission request %s for an unknown session; answering cancelled",
                self._ch.name,
                request.request_id,
            )
            self.post_bridge_cancel(request.request_id)
            return
        if run is not None:
            self._ch._park(pending)
        lifetime = self._ch.permission_lifetime()
        pending.expires_at = self._ch.clock.now() + lifetime
        try:
            timer = self._ch.scheduler.call_later(lifetime, self.expire, pending)
        except Exception:
            timer = None
        if timer is not None:
            with pending.lock:
                if pending.settled_reason is None:
                    pending.timer = timer
                else:
                    timer.cancel()

        lane: tuple[str, str] = run.lane if run is not None else ("session", session_id)
        if run is not None and run.attended:
            normalized = normalize_user_questions(request.tool_call)
            submit = approval_option_id(request.options)
            if normalized.ok and submit is not None:
                assert run.owner is not None
                with run.lock:
                    if run.live_locked():
                        preceding = self._ch._events.close_segment_locked(run)
                        context = UserInputRequestContext(
                            pending=pending,
                            channel_name=self._ch.name,
                            request_id=request.request_id,
                            session_id=session_id,
                            run_id=run.run_id,
                            owner=run.owner,
                            target=run.target,
                            questions=normalized.questions,
                            submit_option_id=submit,
                            preceding_segment_id=preceding.segment_id if preceding else None,
                            message_id=run.message_id,
                            expires_at=pending.expires_at,
                        )
                        pending.context = context
                        pending.user_input_presented = True
                        self._ch.lanes.post(lane, self.present, run, pending, context, preceding)
                        return
            elif normalized.kind == "none" and overrides_permission_hook(self._ch):
                assert run.owner is not None
                with run.lock:
                    if run.live_locked():
                        preceding = self._ch._events.close_segment_locked(run)
                        approval = PermissionRequestContext(
                            pending=pending,
                            channel_name=self._ch.name,
                            run_id=run.run_id,
                            owner=run.owner,
                            target=run.target,
                            preceding_segment_id=preceding.segment_id if preceding else None,
                            message_id=run.message_id,
                            expires_at=pending.expires_at,
                        )
                        self._ch.lanes.post(
                            lane, present_permission, self, run, pending, approval, preceding
                        )
                        return
            elif normalized.kind == "malformed":
                logger.warning(
                    "[%s] malformed user question in request %s (%s): %s; using the text prompt",
                    self._ch.name,
                    request.request_id,
                    normalized.source,
                    normalized.problem,
                )
        self._ch.lanes.post(lane, self.send_text, pending)

    def present(
        self,
        run: Run,
        pending: Pending,
        context: UserInputRequestContext,
        preceding: OutputSegmentContext | None,
    ) -> None:
        if preceding is not None:
            self._ch._events.call_segment_end(run, preceding, SegmentEndReason.INPUT_REQUESTED)
        if not self.is_current(pending):
            return
        try:
            raw_result: object = self._ch.present_user_input_request(context)
            result = UserInputPresentationResult(raw_result)
        except Exception as exc:
            logger.error(
                "[%s] user input presentation failed for request %s (session %s run %s): %s",
                self._ch.name,
                pending.request_id,
                run.session_id,
                run.run_id,
                exc,
                exc_info=True,
            )
            result = UserInputPresentationResult.UNSUPPORTED
        if not self.is_current(pending):
            return  # answered or settled meanwhile (e.g. /deny): nothing to fall back to
        if result is UserInputPresentationResult.PRESENTED:
            return
        if result is UserInputPresentationResult.HANDLED:
            if pending.respond_invoked:
                return
            logger.warning(
                "[%s] present_user_input_request returned handled without respond for "
                "request %s; sending the text prompt",
                self._ch.name,
                pending.request_id,
            )
        pending.user_input_presented = False
        self.send_text(pending)

    def send_text(self, pending: Pending) -> None:
        if not self.is_current(pending):
            return
        target = pending.target
        try:
            text = self._ch.format_permission_request(pending.request)
            self._ch.send_message(target.chat_id, text, thread_id=target.thread_id)
        except Exception as exc:
            logger.error(
                "[%s] permission relay failed for request %s (session %s): %s",
                self._ch.name,
                pending.request_id,
                pending.session_id,
                exc,
                exc_info=True,
            )
            if self.remove(pending, SettlementReason.CANCELLED):
                self.respond_bridge_cancelled(pending.request_id)

    def is_current(self, pending: Pending) -> bool:
        with self._ch._lock:
            return self.by_id.get(pending.request_id) is pending

    def respond(self, pending: Pending, response: PermissionResponse) -> bool:
        """The one-shot responder: True for exactly one caller, the one whose response
        reached the agent and was accepted. Every later or concurrent caller gets False
        at once (another surface already won), without waiting for the winner."""
        with pending.lock:
            pending.respond_invoked = True
            if pending.response_future is not None or pending.settled_reason is not None:
                return False
            future: Future[bool] = Future()
            pending.response_future = future
        if not self.is_current(pending):
            future.set_result(False)
            return False
        try:
            ok = bool(self._ch._bridge.respond_to_permission(pending.request_id, response))
        except Exception as exc:
            self.remove(pending, SettlementReason.CANCELLED)
            future.set_exception(exc)
            raise
        outcome = response.get("outcome") if isinstance(response, Mapping) else None
        reason = self.classify(pending, outcome) if ok else SettlementReason.CANCELLED
        if ok:
            with pending.lock:
                pending.answer = response
        self.remove(pending, reason)
        future.set_result(ok)
        return ok

    @staticmethod
    def classify(pending: Pending, outcome: object) -> SettlementReason:
        if isinstance(outcome, Mapping):
            kind = outcome.get("outcome")
            if kind == "cancelled":
                return SettlementReason.CANCELLED
            if kind == "selected":
                option_id = outcome.get("optionId")
                for option in pending.request.options:
                    if option.option_id == option_id:
                        if is_reject_option(option):
                            return SettlementReason.CANCELLED
                        break
                else:
                    if option_id == "cancel":
                        return SettlementReason.CANCELLED
        return SettlementReason.RESOLVED_OUTSIDE_PRESENTER

    def _unindex_locked(self, pending: Pending) -> None:
        if self.by_id.get(pending.request_id) is pending:
            del self.by_id[pending.request_id]
        ids = self.by_chat.get(pending.chat_key)
        if ids is not None:
            try:
                ids.remove(pending.request_id)
            except ValueError:
                pass
            if not ids:
                del self.by_chat[pending.chat_key]

    def remove(self, pending: Pending, reason: SettlementReason) -> bool:
        """Remove ``pending`` if still current and settle it; True if this call did."""
        with self._ch._lock:
            if self.by_id.get(pending.request_id) is not pending:
                return False
            self._unindex_locked(pending)
        pending.settle(reason)
        self._ch._unpark(pending)
        return True

    def remove_for_session(self, session_id: str, reason: SettlementReason) -> None:
        with self._ch._lock:
            pendings = [p for p in self.by_id.values() if p.session_id == session_id]
        for pending in pendings:
            self.remove(pending, reason)

    def expire(self, pending: Pending) -> None:
        if not self.is_current(pending):
            return
        logger.info("[%s] permission request %s expired", self._ch.name, pending.request_id)
        with pending.lock:
            pending.expired = True
        try:
            self.respond(pending, CANCELLED_RESPONSE)
        except Exception as exc:
            logger.warning(
                "[%s] answering expired request %s failed: %s",
                self._ch.name,
                pending.request_id,
                exc,
            )

    def respond_bridge_cancelled(self, request_id: str) -> None:
        try:
            self._ch._bridge.respond_to_permission(request_id, CANCELLED_RESPONSE)
        except Exception as exc:
            logger.warning("[%s] cancelling request %s failed: %s", self._ch.name, request_id, exc)

    def post_bridge_cancel(self, request_id: str) -> None:
        try:
            self._ch.pool.post(self.respond_bridge_cancelled, request_id)
        except Exception:
            self.respond_bridge_cancelled(request_id)

    def dispatch_resolved(self, event: PermissionResolved) -> None:
        with self._ch._lock:
            pending = self.by_id.get(event.request_id)
        if pending is None:
            return
        reason = self.classify(pending, event.outcome)
        with pending.lock:
            if pending.settled_reason is None and pending.answer is None:
                pending.answer = {"outcome": event.outcome}
        run = pending.run  # captured at registration, never rediscovered
        if run is not None:
            with run.lock:
                if run.cancel_pending:
                    # A local run cancellation is in flight: the bridge's collapsed
                    # cancellation must not win over run_cancelled. Decide afterwards.
                    run.deferred.append((pending, reason))
                    return
                if run.cancelled and reason is SettlementReason.CANCELLED:
                    # The cancel already succeeded and its run_cancelled settlement is
                    # on its way (_finish_cancellation): the collapsed cancellation the
                    # bridge reports for it is that same cancellation.
                    reason = SettlementReason.RUN_CANCELLED
        self.remove(pending, reason)

    def dispatch_session_died(self, event: SessionDied) -> None:
        logger.info("[%s] session %s died: %s", self._ch.name, event.session_id, event.reason)
        self.remove_for_session(event.session_id, SettlementReason.CANCELLED)
        # The route keeps its session id: the bridge restores the conversation when its
        # agent can (ACP session/load) and says so in the chat when it cannot.
