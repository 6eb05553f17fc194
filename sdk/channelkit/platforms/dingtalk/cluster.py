"""DingTalk across several processes: run and card records, routed callbacks, recovery.

With a state store (see `channelkit.platforms.common.cluster`) each instance
mirrors into the store, in order on the run's projection queue (so a card's record is
there before the card is delivered):

* ``<channel>:run:<run id>``: instance, owner, session, chat of a live run;
* ``<channel>:card:<outTrackId>``: kind (status / question), run, request id, owner,
  chat, instance and, for a question card, its form (keys, option labels); for a
  status card also ``text``, the visible text of its last successful write (at most
  20,000 characters, rewritten after each write);
* ``<channel>:tomb:<outTrackId>``: the terminal state of an ended card (TTL 10 min);
* the same ``card`` key, kind ``queue``, for a queue notice card while its run waits
  for a slot (removed when the run starts or ends): a queued run the instance could not
  start (it died, or closed with the run still queued) gets its card ended with
  `INTERRUPTED_TEXT` by the survivor (or the restarted instance), and its owner
  is told once.

A card callback is acknowledged at once (DingTalk's card ACK is ``{}`` whatever the
outcome, so nothing that waits on the store runs before it); after the ACK, on the pool,
whichever instance received it correlates and authorizes it from the card record, then
claims it with one atomic ``add`` of ``<channel>:claim:<track>`` (carrying the
instance's fencing token): exactly one instance wins. The owner's Stop of a status card
is read, matched and claimed in one script (`Cluster.claim_record()`, one round trip);
other actions read the record, then claim (two). The instance that owns the run applies
the action at once (its local presenter takes its own claim too); another instance
pushes the claimed action to the owner's inbox, whose consumer applies it exactly like a
local callback. A foreign user gets one notice per card across instances
(``<channel>:notice:<track>:<user>``). A card without a store record (written while
the store was down) is handled by the instance that holds it, as without a store.

When the store cannot be reached a callback is acknowledged and changes nothing (one
error logged per outage); runs go on and their answers are delivered as usual.

Recovery: an instance finalizes the cards of every instance whose lease expired (and,
at start-up, of its own previous incarnation by ``instanceName``): a status card ends
``Failed`` showing the last text the store knew followed by `INTERRUPTED_TEXT`
(bounded at 20,000 characters), a question card ends ``expired``, a tombstone
is written and the run's owner is told once. ``<channel>:recover:<track>`` and
``<channel>:told:<run>`` make each step happen once across survivors.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from channelkit.core.catalog import Messages, en, messages
from channelkit.errors import ChannelKitError
from channelkit.platforms.common.cluster import Cluster
from channelkit.platforms.common.contract import Decision
from channelkit.platforms.common.store_watch import unavailable_notice, watch_of
from channelkit.platforms.common.text import bound_text
from channelkit.platforms.dingtalk.api import CardTarget
from channelkit.platforms.dingtalk.ingress import CardCallback
from channelkit.platforms.dingtalk.markdown import option_label
from channelkit.platforms.dingtalk.output import (
    STOP_ACTION_ID,
    DingtalkPresenter,
    final_param_map,
    status_line,
)
from channelkit.platforms.dingtalk.questions import (
    FormSpec,
    forbidden_decision,
    terminal_param_map,
)
from channelkit.state.base import CLAIM_MISMATCH, GUARD_EXISTS, GUARD_WRITTEN

if TYPE_CHECKING:
    from channelkit.platforms.dingtalk.api import CardApi
    from channelkit.runtime.clock import Clock

__all__ = [
    "INTERRUPTED_TEXT",
    "INTERRUPTED_TITLE",
    "DingtalkCluster",
    "interrupted_content",
    "queue_card_params",
]

logger = logging.getLogger(__name__)

#: A status card of a run whose instance died ends Failed with this text; the owner is
#: told the same once.
INTERRUPTED_TEXT = en("notice.interrupted")
INTERRUPTED_TITLE = en("status.interrupted")

#: live run and card records remembered for writing them again (`reregister`)
_MAX_LIVE = 4_000

_RUNS = "dingtalk-runs"
_STATUS = "dingtalk-status"
_QUESTIONS = "dingtalk-questions"


@dataclass(frozen=True)
class _StoredQuestion:
    """A question card's form, rebuilt from its store record (`FormSpec` input)."""

    answer_key: str
    header: str
    question: str
    options: tuple[str, ...]
    multi_select: bool


def _form(card: dict[str, Any]) -> FormSpec:
    return FormSpec(
        [
            _StoredQuestion(
                str(q["key"]), "", "", tuple(str(o) for o in q["options"]), bool(q["multi"])
            )
            for q in card.get("questions", ())
        ]
    )


def queue_card_params(
    text: str, *, final: bool, status_line: str | None = None, texts: Messages | None = None
) -> dict[str, object]:
    """The status-card variables of a queue notice: the notice as the card's text, in
    progress (``flowStatus`` 2, "Queued") until the run starts (3, "Starting now", or
    ``status_line``: a dead instance's queued run ends "Interrupted"); the status words
    in the locale of ``texts`` (default English)."""
    m = texts or messages()
    block = json.dumps([{"type": 0, "markdown": text}], ensure_ascii=False, separators=(",", ":"))
    return {
        "blockList": block,
        "content": text,
        "copy_content": text,
        "flowStatus": 3 if final else 2,
        "statusLine": status_line or m.get("status.starting" if final else "status.queued"),
        "hasAction": "false",
        "stop_action": "false",
    }


def interrupted_content(card: dict[str, Any]) -> str:
    """The final content of a dead instance's status card: the text it last showed (as
    the store knew it) and the interrupted line, within the segment bound."""
    shown = card.get("text")
    if not isinstance(shown, str) or not shown.strip():
        return INTERRUPTED_TEXT
    return bound_text(f"{shown.rstrip()}\n\n{INTERRUPTED_TEXT}")


class DingtalkCluster:
    """The DingTalk side of one instance; see the module docstring.

    Doubles as the `RegistryObserver`
    of the presenter's registry. ``notify(chat_id, owner, is_group, text)`` sends a
    Markdown message; ``submit`` hands work to the pool.
    """

    def __init__(
        self,
        cluster: Cluster,
        *,
        api: CardApi,
        clock: Clock,
        submit: Callable[[Callable[[], Any]], Any],
        notify: Callable[[str, str, bool, str], None],
        model: str | None,
    ) -> None:
        self.cluster = cluster
        self.store = cluster.store
        self._api = api
        self._clock = clock
        self._submit = submit
        self._notify = notify
        self._model = model
        self.presenter: DingtalkPresenter | None = None
        self._lock = threading.Lock()
        self._queues: dict[str, Any] = {}  # outTrackId -> the run's projection queue
        self._records: dict[str, dict[str, Any]] = {}  # outTrackId -> live status record
        # store key -> (projection queue, value) of every live run and card record this
        # instance wrote: written again when the store comes back empty (bounded)
        self._live: OrderedDict[str, tuple[Any, dict[str, Any]]] = OrderedDict()
        cluster.on_reacquired = self.reregister

    # -- records (observer; called under registry locks: queue only) --------------------
    def added(self, kind: str, key: Hashable, record: Any, index: dict[str, Hashable]) -> None:
        c = self.cluster
        base = {"instance": c.instance_id, "name": c.name or "", "at": self._clock.time()}
        if kind == _RUNS:
            value = {
                **base,
                "run": record.run_id,
                "session": record.session_id,
                "owner": record.owner_key,
                "chat": record.chat_id,
                "group": record.is_group,
            }
            self._write(record.queue, c.key("run", record.run_id), value)
            return
        if kind not in (_STATUS, _QUESTIONS):
            return
        value = {
            **base,
            "kind": "status" if kind == _STATUS else "question",
            "run": record.run_id,
            "session": record.session_id,
            "owner": record.owner_key,
            "chat": record.chat_id,
            "target": record.target.chat_id,
            "group": record.target.is_group,
        }
        if kind == _QUESTIONS:
            value["request"] = record.request_id
            value["questions"] = [
                {
                    "key": q.answer_key,
                    "options": [option_label(o) for o in q.options],
                    "multi": bool(q.multi_select),
                }
                for q in record.questions
            ]
        with self._lock:
            self._queues[record.out_track_id] = record.queue
            if kind == _STATUS:
                self._records[record.out_track_id] = value
        self._write(record.queue, c.key("card", record.out_track_id), value)

    def queue_card_shown(
        self, track: str, *, run_id: str, owner: str, chat: str, group: bool
    ) -> None:
        """A queue notice card was delivered (on the run's lane): record it, so that a
        survivor ends it if this instance dies before the run starts."""
        c = self.cluster
        value = {
            "instance": c.instance_id,
            "name": c.name or "",
            "at": self._clock.time(),
            "kind": "queue",
            "run": run_id,
            "owner": owner,
            "chat": chat,
            "group": group,
        }
        c.write("queue card", c.key("card", track), value)

    def queue_card_done(self, track: str) -> None:
        """The queued run started or ended: its queue card is no one's to recover."""
        self.cluster.write("queue card", self.cluster.key("card", track), None)

    def card_text(self, track: str, text: str) -> None:
        """A status card showed ``text`` (called on its run's projection queue, after
        the record's own write): kept with the card record, bounded, so a survivor
        finalizes the card with it."""
        with self._lock:
            value = self._records.get(track)
            if value is None:
                return  # not recorded here, or already buried
            value = self._records[track] = {**value, "text": bound_text(text)}
            key = self.cluster.key("card", track)
            if key in self._live:
                self._live[key] = (self._live[key][0], value)
        self.cluster.write("card text", key, value)

    def removed(self, kind: str, key: Hashable, record: Any) -> None:
        if kind == _RUNS:
            run_key = self.cluster.key("run", record.run_id)
            with self._lock:
                self._live.pop(run_key, None)
            job = lambda: self.cluster.write("run record", run_key, None)  # noqa: E731
            record.queue.enqueue(job)

    def buried(self, kind: str, key: Hashable, tombstone: Any) -> None:
        if kind not in (_STATUS, _QUESTIONS):
            return
        track = str(key)
        with self._lock:
            queue = self._queues.pop(track, None)
            self._records.pop(track, None)
            self._live.pop(self.cluster.key("card", track), None)
        job = lambda: self.cluster.call("tombstone", lambda: self._bury(track, tombstone.state))  # noqa: E731
        if queue is not None:
            queue.enqueue(job)
        else:
            self._submit(job)

    def _write(self, queue: Any, key: str, value: dict[str, Any]) -> None:
        with self._lock:
            self._live[key] = (queue, value)
            self._live.move_to_end(key)
            while len(self._live) > _MAX_LIVE:
                self._live.popitem(last=False)
        queue.enqueue(lambda: self.cluster.write("record", key, value))

    def reregister(self) -> None:
        """Write every live run and card record again (the store came back empty), each
        on its run's projection queue, in order with that run's other writes."""
        with self._lock:
            live = list(self._live.items())
        for key, (queue, _) in live:

            def again(key: str = key) -> None:
                with self._lock:
                    entry = self._live.get(key)
                if entry is not None:  # still live when its turn comes
                    self.cluster.write("record", key, entry[1])

            queue.enqueue(again)
        logger.info("[%s] %d live records written again", self.cluster.channel, len(live))

    def _del(self, key: str) -> bool:
        return self.store.delete(key)

    def _bury(self, track: str, state: str) -> None:
        c = self.cluster
        ttl = c.options.tombstone_ttl_s
        c.guarded(c.key("tomb", track), {"state": state}, ttl_s=ttl)
        c.guarded(c.key("card", track), None)

    def live_runs(self) -> list[tuple[str, str]]:
        """``(session_id, run_id)`` of the runs whose status cards this instance shows."""
        with self._lock:
            records = list(self._records.values())
        return [(str(r["session"]), str(r["run"])) for r in records]

    # -- callbacks -----------------------------------------------------------------------
    def route(self, callback: CardCallback) -> Decision:
        """The ACK of ``callback`` at once (DingTalk's card ACK is ``{}`` whatever the
        outcome), with `decide()` and the work it decides as the work after the ACK: the
        web thread (or the Stream connection) never waits on the store."""
        return Decision.ack().then(partial(self._decide_and_run, callback))

    def _decide_and_run(self, callback: CardCallback) -> None:
        self.decide(callback).run_after()  # already on the pool, in the ACK's one job

    def decide(self, callback: CardCallback) -> Decision:
        """Correlate, authorize and claim ``callback`` from the store (see module doc);
        the work its outcome calls for. Runs after the ACK (`route()`)."""
        presenter = self.presenter
        assert presenter is not None
        c = self.cluster
        if not c.holds_lease():  # fenced: a survivor owns these cards now
            return Decision.ignored()
        track, actor = callback.out_track_id, callback.actor_id
        try:
            claim = c.key("claim", track)
            won: str | None = None
            if callback.action_id == STOP_ACTION_ID and actor:
                # the owner's Stop of a status card: correlated, authorized and claimed
                # in one round trip; anything else is read and judged below
                card, outcome = c.claim_record(
                    c.key("card", track),
                    {"kind": "status", "owner": actor},
                    claim,
                    {"by": c.instance_id},
                    ttl_s=c.options.claim_ttl_s,
                )
                won = None if outcome == CLAIM_MISMATCH else outcome
            else:
                card = self.store.get(c.key("card", track))
            if card is None:
                c.reachable()
                return presenter.route_callback(callback)  # a local-only card, or none
            target = CardTarget(str(card["target"]), bool(card["group"]))
            if actor != card["owner"]:
                notice = c.key("notice", track, actor)
                if not self.store.add(notice, {"at": 1}, ttl_s=c.options.tombstone_ttl_s):
                    return Decision.ignored()
                return forbidden_decision(presenter.notify_forbidden, target, actor)
            if won is None:
                if not self._valid(card, callback):
                    return Decision.ignored()
                won = c.guarded(
                    claim, {"by": c.instance_id}, ttl_s=c.options.claim_ttl_s, only_if_absent=True
                )
        except Exception as exc:
            c.unavailable("card action claim", exc)  # fail closed: ACK, change nothing
            watch_of(self.store).failed(exc)
            tell = unavailable_notice(  # once per outage: a direct message, after the ACK
                self.store,
                channel=c.channel,
                person=actor,
                send=partial(self._notify, actor, actor, False),  # in the actor's language
                post=self._submit,
            )
            return Decision.ignored() if tell is None else Decision.ignored().then(tell)
        c.reachable()
        watch_of(self.store).answered()
        if won != GUARD_WRITTEN:  # taken already, or this instance's token is stale
            return Decision.ignored()
        owner = str(card["instance"])
        if owner == c.instance_id:
            return self._local(callback, claim)
        message = {
            "type": "card_action",
            "track": track,
            "action": callback.action_id,
            "actor": actor,
            "form": dict(callback.form_data),
            "business": callback.has_business_payload,
            "cancel": callback.is_cancel,
            "claim": claim,
        }

        def forward() -> None:
            if not c.forward(owner, message):
                c.call("claim release", lambda: self._del(claim))

        return Decision.ack().then(forward)

    def _valid(self, card: dict[str, Any], callback: CardCallback) -> bool:
        if card.get("kind") == "status":
            return callback.action_id == STOP_ACTION_ID
        if callback.action_id == STOP_ACTION_ID or not callback.has_business_payload:
            return False
        if callback.is_cancel or callback.action_id == "cancel":
            return True
        if callback.action_id not in ("submit", card.get("request")):
            return False
        return _form(card).parse(callback.form_data) is not None

    def _local(self, callback: CardCallback, claim: str) -> Decision:
        """Apply a claimed action on the owner (its local presenter claims again)."""
        presenter = self.presenter
        assert presenter is not None
        decision = presenter.route_callback(callback)
        if decision.outcome != "accepted" or callback.action_id != STOP_ACTION_ID:
            return decision

        def release_retryable() -> None:
            # after the Stop's own work: a Stop whose cancellation failed on a
            # still-current run is retryable
            status = presenter.status
            record = status.by_track(callback.out_track_id) if status is not None else None
            if record is not None and not record.terminal and not record.stop_claim.claimed:
                self.cluster.call("claim release", lambda: self._del(claim))

        return decision.then(release_retryable)

    def apply(self, message: dict[str, Any]) -> None:
        """A forwarded, already claimed action (the inbox consumer): handed to the pool
        at once, so the consumer pops the next one while this one's store write (the
        settlement) and its work run (`apply_forwarded()`)."""
        if message.get("type") != "card_action":
            return
        try:
            self._submit(partial(self.apply_forwarded, message))
        except RuntimeError:  # the pool stopped: the channel is closing, its runs with it
            logger.debug("forwarded action on %s dropped: closing", message.get("track"))

    def apply_forwarded(self, message: dict[str, Any]) -> None:
        """Settle a forwarded action under this instance's token, then apply it like a
        local callback, its work right here (on the pool)."""
        if not self.cluster.holds_lease():
            return
        # settled only while this instance's token is current (checked in the store); a
        # store that does not answer leaves the lease trusted, as everywhere
        settled = self.cluster.key("settled", str(message["track"]))
        outcome = self.cluster.write(
            "settle",
            settled,
            {"by": self.cluster.instance_id},
            ttl_s=self.cluster.options.tombstone_ttl_s,
        )
        if outcome not in (GUARD_WRITTEN, GUARD_EXISTS, None):
            logger.debug("forwarded action on %s dropped: token stale", message["track"])
            return
        callback = CardCallback(
            out_track_id=str(message["track"]),
            action_id=str(message["action"]),
            actor_id=str(message["actor"]),
            form_data=dict(message.get("form") or {}),
            has_business_payload=bool(message.get("business")),
            is_cancel=bool(message.get("cancel")),
        )
        decision = self._local(callback, str(message["claim"]))
        if decision.outcome == "accepted":
            decision.run_after()  # a forwarded action's work, in this pool job

    # -- recovery (pool) ----------------------------------------------------------------
    def sweep(self, first: bool) -> None:
        """Finalize what dead instances (and, when ``first``, this instance's previous
        incarnation) left behind."""
        c = self.cluster
        dead: dict[str, bool] = {}

        def gone(record: dict[str, Any]) -> bool:
            instance = str(record.get("instance", ""))
            if instance == c.instance_id:
                return False
            if first and c.name and record.get("name") == c.name:
                if instance not in dead:
                    dead[instance] = c.take_over(instance, force=True)  # our past life
                return True
            if instance not in dead:
                # atomically: fenced only if its lease expired (it never writes again)
                dead[instance] = c.take_over(instance)
            return dead[instance]

        for key in self.store.scan(c.key("card", "")):
            card = self.store.get(key)
            if card is None or not gone(card):
                continue
            track = key.rsplit(":", 1)[1]
            ttl = c.options.tombstone_ttl_s
            if not self.store.add(c.key("recover", track), {"by": c.instance_id}, ttl_s=ttl):
                continue
            state = self._finalize(track, card)
            self._bury(track, state)
            self._tell(card)
        for key in self.store.scan(c.key("run", "")):
            run = self.store.get(key)
            if run is not None and gone(run):
                self._tell(run)
                self.store.delete(key)
        c.reachable()

    def _finalize(self, track: str, card: dict[str, Any]) -> str:
        try:
            if card.get("kind") == "queue":
                params = queue_card_params(
                    INTERRUPTED_TEXT, final=True, status_line=INTERRUPTED_TITLE
                )
                self._api.update_instance(track, params)
                return "Failed"
            if card.get("kind") == "question":
                self._api.update_instance(track, terminal_param_map("expired"))
                return "expired"
            try:
                self._api.stream(track, "content", "", finalize=True, is_error=True)
            except ChannelKitError:
                logger.debug("interrupted status card %s: stream close failed", track)
            elapsed = self._clock.time() - float(card.get("at", self._clock.time()))
            line = status_line("Failed", self._model, elapsed)
            self._api.update_instance(track, final_param_map(interrupted_content(card), line))
        except ChannelKitError as exc:
            logger.warning("finalizing interrupted card %s failed: %s", track, exc)
        return "Failed"

    def _tell(self, record: dict[str, Any]) -> None:
        c = self.cluster
        told = c.key("told", str(record.get("run")))
        if not self.store.add(told, {"by": c.instance_id}, ttl_s=c.options.tombstone_ttl_s):
            return
        try:
            self._notify(
                str(record["chat"]), str(record["owner"]), bool(record["group"]), INTERRUPTED_TEXT
            )
        except Exception:
            logger.exception("interrupted-run notice failed")


class FencedCardApi:
    """The card calls of ``api`` (create, stream, update) made only while
    ``holds_lease()``: an instance a survivor fenced never writes to a card again (the
    call is skipped and logged at debug level; the fencing itself is logged once by
    `Cluster`). Every other attribute is ``api``'s."""

    def __init__(self, api: Any, holds_lease: Callable[[], bool]) -> None:
        self._api = api
        self._holds_lease = holds_lease

    def _allowed(self, what: str, track: str) -> bool:
        if self._holds_lease():
            return True
        logger.debug("card %s of %s skipped: this instance lost its lease", what, track)
        return False

    def create_and_deliver(
        self,
        template_id: str,
        out_track_id: str,
        target: CardTarget,
        card_param_map: Mapping[str, Any],
    ) -> None:
        if self._allowed("create", out_track_id):
            self._api.create_and_deliver(template_id, out_track_id, target, card_param_map)

    def stream(
        self,
        out_track_id: str,
        key: str,
        content: str,
        *,
        finalize: bool = False,
        is_error: bool = False,
    ) -> None:
        if self._allowed("stream", out_track_id):
            self._api.stream(out_track_id, key, content, finalize=finalize, is_error=is_error)

    def update_instance(self, out_track_id: str, card_param_map: Mapping[str, Any]) -> None:
        if self._allowed("update", out_track_id):
            self._api.update_instance(out_track_id, card_param_map)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)
