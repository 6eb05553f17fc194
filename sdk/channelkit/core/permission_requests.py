"""Pending requests: the registry of permission requests and questions waiting on a
person, and the flow around them.

`PendingRequests` keeps the channel's live requests (by request id and by chat)
and runs their flow: registration with its expiry timer, native presentation (a
structured question through ``present_user_input_request``, an ordinary tool permission
through ``present_permission_request``) or the text prompt, the one-shot responder,
settlement exactly once, and the bridge's own resolutions. Its indexes share the
`RunTable`'s lock, so a request registers atomically with
the look-up of its run and the closed check. A request registered for a run *parks*
that run in the channel's `RunAdmission` while it waits
on the person, so people who take their time do not hold back anyone else's run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from concurrent.futures import Future

from channelkit.agents.base import (
    AgentBridge,
    PermissionRequest,
    PermissionResolved,
    PermissionResponse,
    SessionDied,
)
from channelkit.core.admission import RunAdmission
from channelkit.core.approvals import PermissionRequestContext, overrides_permission_hook
from channelkit.core.config import ChannelConfig
from channelkit.core.context import UserInputRequestContext
from channelkit.core.hooks import ChannelHooks
from channelkit.core.pending import CANCELLED_RESPONSE, Pending
from channelkit.core.questions import approval_option_id, is_reject_option, normalize_user_questions
from channelkit.core.run_events import RunEvents
from channelkit.core.runs import Run, RunTable
from channelkit.core.sessions import SessionRouter
from channelkit.core.types import (
    OutputSegmentContext,
    SegmentEndReason,
    SettlementReason,
    UserInputPresentationResult,
)
from channelkit.observability import hub
from channelkit.runtime.clock import Clock
from channelkit.runtime.pool import WorkerPool
from channelkit.runtime.scheduler import Scheduler
from channelkit.runtime.serial import KeyedSerialQueue

__all__ = ["PendingRequests"]

logger = logging.getLogger("channelkit.core.pending")


class PendingRequests:
    """The channel's live requests and their settlement; see the module docstring.

    Built by ``ChannelBase`` from its collaborators: ``table`` (runs and the shared
    lock), ``admission`` (parking), ``router`` (the target of a session without a live
    run), ``events`` (segments and hook calls), ``hooks`` (the channel's public hooks),
    ``bridge`` (returns the current agent bridge), and the channel's clock, scheduler,
    lanes and pool.
    """

    def __init__(
        self,
        *,
        config: ChannelConfig,
        table: RunTable,
        admission: RunAdmission,
        router: SessionRouter,
        events: RunEvents,
        hooks: ChannelHooks,
        bridge: Callable[[], AgentBridge],
        clock: Clock,
        scheduler: Scheduler,
        lanes: KeyedSerialQueue,
        pool: WorkerPool,
    ) -> None:
        self.channel_name = config.name
        self._config = config
        self._table = table
        self._admission = admission
        self._router = router
        self._events = events
        self._hooks = hooks
        self._bridge = bridge
        self._clock = clock
        self._scheduler = scheduler
        self._lanes = lanes
        self._pool = pool
        self._by_id: dict[str, Pending] = {}  # capped, insertion ordered
        self._by_chat: dict[tuple[str, str], list[str]] = {}
        # requests whose answer is on its way to the agent (`respond` running), indexed
        # or not: `remove` takes a request out of the index before it settles it, and
        # the run's end must still wait for that settlement. One entry per running
        # responder (`respond` is one-shot per request); each leaves when it returns.
        self._answering: set[Pending] = set()

    # -- queries ----------------------------------------------------------------------

    def get(self, request_id: str) -> Pending | None:
        """The live request ``request_id``, if any."""
        with self._table.lock:
            return self._by_id.get(request_id)

    def in_chat(self, chat_id: str, thread_id: str | None) -> list[Pending]:
        """The live requests of a chat (thread), oldest first."""
        with self._table.lock:
            ids = self._by_chat.get((chat_id, thread_id or ""), [])
            return [self._by_id[i] for i in ids if i in self._by_id]

    def live(self, session_id: str | None = None) -> list[Pending]:
        """Every live request (optionally of one session), oldest first."""
        with self._table.lock:
            return [
                p for p in self._by_id.values() if session_id is None or p.session_id == session_id
            ]

    def is_current(self, pending: Pending) -> bool:
        with self._table.lock:
            return self._by_id.get(pending.request_id) is pending

    # -- registration -----------------------------------------------------------------

    def dispatch_request(self, request: PermissionRequest) -> None:
        session_id = request.session_id
        evicted: list[Pending] = []
        replaced: Pending | None = None
        pending: Pending | None = None
        with self._table.lock:
            run = self._table.active_run(session_id)
            target = run.target if run is not None else self._router.target_for(session_id)
            if (
                not self._table.closed
                and target is not None
                and target.channel_name == self.channel_name
            ):
                pending = Pending(
                    request, target, run, channel_name=self.channel_name, responder=self.respond
                )
                replaced = self._by_id.get(request.request_id)
                if replaced is not None:
                    self._unindex_locked(replaced)
                while len(self._by_id) >= self._config.max_pending_permissions:
                    oldest = next(iter(self._by_id.values()))
                    self._unindex_locked(oldest)
                    evicted.append(oldest)
                self._by_id[request.request_id] = pending
                self._by_chat.setdefault(pending.chat_key, []).append(request.request_id)
                hub.pending_questions(self.channel_name, 1)
        if replaced is not None:
            replaced.settle(SettlementReason.CANCELLED)
            self.unpark(replaced)
        for old in evicted:
            old.settle(SettlementReason.CANCELLED)
            self.unpark(old)
            self.post_bridge_cancel(old.request_id)
        if pending is None:
            logger.info(
                "[%s] permission request %s for an unknown session; answering cancelled",
                self.channel_name,
                request.request_id,
            )
            self.post_bridge_cancel(request.request_id)
            return
        if run is not None:
            self.park(pending)
        lifetime = self._hooks.permission_lifetime()
        pending.expires_at = self._clock.now() + lifetime
        try:
            timer = self._scheduler.call_later(lifetime, self.expire, pending)
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
                        preceding = self._events.close_segment_locked(run)
                        context = UserInputRequestContext(
                            pending=pending,
                            channel_name=self.channel_name,
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
                        pending.user_input_presented = True
                        self._lanes.post(lane, self.present, run, pending, context, preceding)
                        return
            elif normalized.kind == "none" and overrides_permission_hook(self._hooks):
                assert run.owner is not None
                with run.lock:
                    if run.live_locked():
                        preceding = self._events.close_segment_locked(run)
                        approval = PermissionRequestContext(
                            pending=pending,
                            channel_name=self.channel_name,
                            run_id=run.run_id,
                            owner=run.owner,
                            target=run.target,
                            preceding_segment_id=preceding.segment_id if preceding else None,
                            message_id=run.message_id,
                            expires_at=pending.expires_at,
                        )
                        self._lanes.post(
                            lane, self.present_permission, run, pending, approval, preceding
                        )
                        return
            elif normalized.kind == "malformed":
                logger.warning(
                    "[%s] malformed user question in request %s (%s): %s; using the text prompt",
                    self.channel_name,
                    request.request_id,
                    normalized.source,
                    normalized.problem,
                )
        self._lanes.post(lane, self.send_text, pending)

    # -- presentation (on the run's lane) ---------------------------------------------

    def present(
        self,
        run: Run,
        pending: Pending,
        context: UserInputRequestContext,
        preceding: OutputSegmentContext | None,
    ) -> None:
        """Offer a structured question to the adapter, else send the text prompt."""
        self._offer(
            run,
            pending,
            preceding,
            "present_user_input_request",
            "user input",
            lambda: self._hooks.present_user_input_request(context),
        )

    def present_permission(
        self,
        run: Run,
        pending: Pending,
        context: PermissionRequestContext,
        preceding: OutputSegmentContext | None,
    ) -> None:
        """Offer an ordinary permission's options to the adapter, else the text prompt."""
        self._offer(
            run,
            pending,
            preceding,
            "present_permission_request",
            "permission",
            lambda: self._hooks.present_permission_request(context),
        )

    def _offer(
        self,
        run: Run,
        pending: Pending,
        preceding: OutputSegmentContext | None,
        hook: str,
        what: str,
        call: Callable[[], object],
    ) -> None:
        """End the preceding segment (input requested), ask the adapter's ``hook`` to
        present the request natively, and fall back to the text prompt unless it did;
        a hook that raises counts as unsupported."""
        if preceding is not None:
            self._events.call_segment_end(run, preceding, SegmentEndReason.INPUT_REQUESTED)
        if not self.is_current(pending):
            return
        try:
            result = UserInputPresentationResult(call())
        except Exception as exc:
            logger.error(
                "[%s] %s presentation failed for request %s (session %s run %s): %s",
                self.channel_name,
                what,
                pending.request_id,
                run.session_id,
                run.run_id,
                exc,
                exc_info=True,
            )
            result = UserInputPresentationResult.UNSUPPORTED
        self._fall_back_unless_presented(pending, result, hook)

    def _fall_back_unless_presented(
        self, pending: Pending, result: UserInputPresentationResult, hook: str
    ) -> None:
        if not self.is_current(pending):
            return  # answered or settled meanwhile (e.g. /deny): nothing to fall back to
        if result is UserInputPresentationResult.PRESENTED:
            return
        if result is UserInputPresentationResult.HANDLED:
            if pending.respond_invoked:
                return
            logger.warning(
                "[%s] %s returned handled without respond for request %s; "
                "sending the text prompt",
                self.channel_name,
                hook,
                pending.request_id,
            )
        pending.user_input_presented = False
        self.send_text(pending)

    def send_text(self, pending: Pending) -> None:
        """Send the text permission prompt (the request is cancelled if that fails)."""
        if not self.is_current(pending):
            return
        target = pending.target
        try:
            text = self._hooks.format_permission_request(pending.request)
            self._hooks.send_message(target.chat_id, text, thread_id=target.thread_id)
        except Exception as exc:
            logger.error(
                "[%s] permission relay failed for request %s (session %s): %s",
                self.channel_name,
                pending.request_id,
                pending.session_id,
                exc,
                exc_info=True,
            )
            if self.remove(pending, SettlementReason.CANCELLED):
                self.respond_bridge_cancelled(pending.request_id)

    # -- answering and settlement -----------------------------------------------------

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
        with self._table.lock:
            current = self._by_id.get(pending.request_id) is pending
            if current:
                self._answering.add(pending)  # await_answers finds it until it returns
        if not current:
            future.set_result(False)
            return False
        try:
            ok = bool(self._bridge().respond_to_permission(pending.request_id, response))
        except Exception as exc:
            self.remove(pending, SettlementReason.CANCELLED)
            future.set_exception(exc)
            raise
        else:
            outcome = response.get("outcome") if isinstance(response, Mapping) else None
            reason = self.classify(pending, outcome) if ok else SettlementReason.CANCELLED
            if ok:
                with pending.lock:
                    pending.answer = response
            self.remove(pending, reason)
            future.set_result(ok)
            return ok
        finally:
            with self._table.lock:
                self._answering.discard(pending)

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
        if self._by_id.get(pending.request_id) is pending:
            del self._by_id[pending.request_id]
            hub.pending_questions(self.channel_name, -1)
        ids = self._by_chat.get(pending.chat_key)
        if ids is not None:
            try:
                ids.remove(pending.request_id)
            except ValueError:
                pass
            if not ids:
                del self._by_chat[pending.chat_key]

    def remove(self, pending: Pending, reason: SettlementReason) -> bool:
        """Remove ``pending`` if still current and settle it; True if this call did."""
        with self._table.lock:
            if self._by_id.get(pending.request_id) is not pending:
                return False
            self._unindex_locked(pending)
        pending.settle(reason)
        self.unpark(pending)
        return True

    def await_answers(self, run: Run, timeout: float) -> None:
        """Wait, bounded by ``timeout`` seconds, for every answer to ``run``'s requests
        that is on its way to the agent to settle.

        An answer reaches the agent before its settlement is recorded, so the agent can
        end its turn in between. The run calls this when its turn returns, before it
        posts its terminal state: a question answered or denied at the turn's last
        moment then shows the answer's state, never the run end's "expired".
        """
        with self._table.lock:
            live = [p for p in self._by_id.values() if p.run is run]
            # an answer whose settlement is under way: out of the index already, its
            # settlement listeners (the form's own state) not yet called
            live.extend(p for p in self._answering if p.run is run and p not in live)
        for pending in live:
            with pending.lock:
                future = pending.response_future
            if future is None:
                continue
            try:
                future.result(timeout)
            except Exception:  # timed out, or the responder failed: settled meanwhile
                pass

    def remove_for_session(self, session_id: str, reason: SettlementReason) -> None:
        for pending in self.live(session_id):
            self.remove(pending, reason)

    def expire(self, pending: Pending) -> None:
        if not self.is_current(pending):
            return
        logger.info("[%s] permission request %s expired", self.channel_name, pending.request_id)
        with pending.lock:
            pending.expired = True
        try:
            self.respond(pending, CANCELLED_RESPONSE)
        except Exception as exc:
            logger.warning(
                "[%s] answering expired request %s failed: %s",
                self.channel_name,
                pending.request_id,
                exc,
            )

    def respond_bridge_cancelled(self, request_id: str) -> None:
        try:
            self._bridge().respond_to_permission(request_id, CANCELLED_RESPONSE)
        except Exception as exc:
            logger.warning(
                "[%s] cancelling request %s failed: %s", self.channel_name, request_id, exc
            )

    def post_bridge_cancel(self, request_id: str) -> None:
        try:
            self._pool.post(self.respond_bridge_cancelled, request_id)
        except Exception:
            self.respond_bridge_cancelled(request_id)

    # -- the bridge's own resolutions -------------------------------------------------

    def dispatch_resolved(self, event: PermissionResolved) -> None:
        pending = self.get(event.request_id)
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
                    deferred_reason = reason
                    run.deferred.append(lambda: self.remove(pending, deferred_reason))
                    return
                if run.cancelled and reason is SettlementReason.CANCELLED:
                    # The cancel already succeeded and its run_cancelled settlement is
                    # on its way (RunCancellation.finish): the collapsed cancellation the
                    # bridge reports for it is that same cancellation.
                    reason = SettlementReason.RUN_CANCELLED
        self.remove(pending, reason)

    def dispatch_session_died(self, event: SessionDied) -> None:
        logger.info("[%s] session %s died: %s", self.channel_name, event.session_id, event.reason)
        self.remove_for_session(event.session_id, SettlementReason.CANCELLED)
        # The route keeps its session id: the bridge restores the conversation when its
        # agent can (ACP session/load) and says so in the chat when it cannot.

    # -- waiting on a person (a pending request parks its run) ------------------------

    def park(self, pending: Pending) -> None:
        """The run waits on a person: its admission slot goes to the next run."""
        run = pending.run
        if run is None:
            return
        with pending.lock:
            if pending.parked or pending.settled_reason is not None:
                return
            pending.parked = True
        with run.lock:
            run.waiting += 1
            first = run.waiting == 1
            ticket = run.ticket
        if first and ticket is not None:
            self._admission.park(ticket)

    def unpark(self, pending: Pending) -> None:
        """The person answered: the run counts as active again."""
        run = pending.run
        if run is None:
            return
        with pending.lock:
            if not pending.parked:
                return
            pending.parked = False
        with run.lock:
            run.waiting -= 1
            last = run.waiting == 0
            ticket = run.ticket
        if last and ticket is not None:
            self._admission.unpark(ticket)
