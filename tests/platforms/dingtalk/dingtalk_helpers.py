"""Test doubles and harnesses of the DingTalk adapter tests (imported by the tests)."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from channelkit.errors import ServerError
from channelkit.platforms.dingtalk.output import DingtalkPresenter
from channelkit.runtime import FakeClock, Scheduler
from channelkit.testing import wait_until


class FakeCardApi:
    """Records Card OpenAPI calls; ``fail[op]`` = exception (or callable) to raise."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.fail: dict[str, Any] = {}
        self.gates: dict[str, threading.Event] = {}
        self.lock = threading.Lock()
        self.latency = 0.0  # seconds each call takes, like a real Card API round trip

    def _record(self, op: str, **kw: Any) -> None:
        if self.latency:
            threading.Event().wait(self.latency)
        with self.lock:
            self.calls.append((op, kw))
        gate = self.gates.get(op)
        if gate is not None:
            assert gate.wait(5)
        err = self.fail.get(op)
        if callable(err) and not isinstance(err, BaseException):
            err = err(kw)
        if err is not None:
            raise err

    def create_and_deliver(self, template_id, out_track_id, target, card_param_map):
        self._record(
            "create",
            template_id=template_id,
            out_track_id=out_track_id,
            target=target,
            params=dict(card_param_map),
        )

    def stream(self, out_track_id, key, content, *, finalize=False, is_error=False):
        self._record(
            "stream",
            out_track_id=out_track_id,
            key=key,
            content=content,
            finalize=finalize,
            is_error=is_error,
        )

    def update_instance(self, out_track_id, card_param_map):
        self._record("update", out_track_id=out_track_id, params=dict(card_param_map))

    # helpers
    def ops(self, op: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        with self.lock:
            return [c for c in self.calls if op is None or c[0] == op]

    def names(self) -> list[str]:
        with self.lock:
            return [c[0] for c in self.calls]

    def finals(self) -> list[tuple[str, dict[str, Any]]]:
        """Every write that put a card in a terminal state (``flowStatus`` 3), in order:
        an update of a card shown before, or the creation of a card that a final
        response without chunks gets already finished."""
        return [
            c
            for c in self.ops()
            if c[0] in ("create", "update") and c[1]["params"].get("flowStatus") == 3
        ]


@dataclass(frozen=True)
class Owner:
    id: str
    kind: str = "channel_user"


@dataclass(frozen=True)
class Target:
    channel_name: str
    sender_id: str
    chat_id: str
    thread_id: str | None = None
    is_group: bool = True


@dataclass(frozen=True)
class Segment:
    channel_name: str
    session_id: str
    run_id: str
    segment_id: str
    owner: Owner
    target: Target
    message_id: str | None = None


@dataclass(frozen=True)
class Option:
    label: str
    description: str = ""


@dataclass(frozen=True)
class Question:
    answer_key: str
    header: str
    question: str
    options: tuple[Option, ...]
    multi_select: bool = False


QUESTIONS = (
    Question("0", "Region", "Which region?", (Option("Beijing"), Option("Shanghai"))),
    Question("1", "Signals", "Which signals?", (Option("Logs"), Option("Metrics")), True),
)


@dataclass
class Ctx:
    request_id: str
    session_id: str
    run_id: str
    owner: Owner
    target: Target
    questions: tuple[Question, ...] = QUESTIONS
    submit_option_id: str = "proceed_once"
    respond_result: Any = True
    responses: list[Any] = field(default_factory=list)
    listeners: list[Any] = field(default_factory=list)
    settled: str | None = None
    respond_gate: threading.Event | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def respond(self, response):
        if self.respond_gate is not None:
            assert self.respond_gate.wait(5)
        with self.lock:
            self.responses.append(response)
        if isinstance(self.respond_result, BaseException):
            raise self.respond_result
        if self.respond_result:
            cancelled = response["outcome"]["outcome"] == "cancelled"
            self.settle("cancelled" if cancelled else "resolved_outside_presenter")
        else:
            self.settle("cancelled")  # like ChannelBase: a refused response cancels
        return self.respond_result

    def on_settled(self, listener):
        if self.settled is not None:
            listener(self.settled)
            return lambda: None
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener) if listener in self.listeners else None

    def settle(self, reason: str) -> None:
        if self.settled is not None:
            return
        self.settled = reason
        for listener in list(self.listeners):
            listener(reason)


class Harness:
    """A presenter on the runtime's FakeClock and Scheduler, without a pool.

    ``submit`` defaults to running the job at once on the calling thread (each run's
    ProjectionQueue keeps re-entrant jobs in order), and the scheduler has no pool, so
    ``advance(seconds)`` fires due timers on the test thread: every projection happens
    synchronously and the test reads the recorded Card API calls right away.
    """

    def __init__(
        self,
        *,
        status=True,
        questions=True,
        model=None,
        timeout=270.0,
        submit=None,
        texts_for=None,
    ):
        self.clock = FakeClock()
        self.scheduler = Scheduler(None, clock=self.clock)
        self.api = FakeCardApi()
        self.fallbacks: list[tuple[str, str, str]] = []
        self.cancel_calls: list[tuple[str, str]] = []
        self.cancel_result = True
        self.presenter = DingtalkPresenter(
            self.api,
            clock=self.clock,
            scheduler=self.scheduler,
            submit=submit or (lambda fn: fn()),
            send_fallback=lambda chat, text, sid: self.fallbacks.append((chat, text, sid)),
            cancel_run=self._cancel,
            status_cards=status,
            question_cards=questions,
            model=model,
            question_timeout=timeout,
            texts_for=texts_for,
        )
        self._seg = 0
        self._req = 0

    def advance(self, seconds):
        """Move the fake clock; due timers fire on this thread before it returns."""
        self.clock.advance(seconds)

    def close(self):
        self.scheduler.stop(1)

    def _cancel(self, session_id, run_id):
        self.cancel_calls.append((session_id, run_id))
        return self.cancel_result

    def run(self, run_id="run-1", session="session-1", owner="owner-1", chat="cid-1", group=True):
        self.presenter.register_run(run_id, session, owner, chat, group)
        return run_id

    def segment(
        self,
        run_id="run-1",
        session="session-1",
        owner="owner-1",
        chat="cid-1",
        group=True,
        segment_id=None,
    ):
        self._seg += 1
        return Segment(
            "dingtalk",
            session,
            run_id,
            segment_id or f"segment-{self._seg}",
            Owner(owner),
            Target("dingtalk", owner, chat, None, group),
        )

    def ctx(
        self,
        run_id="run-1",
        session="session-1",
        owner="owner-1",
        chat="cid-1",
        group=True,
        request_id=None,
        **kw,
    ):
        self._req += 1
        return Ctx(
            request_id or f"request-{self._req}",
            session,
            run_id,
            Owner(owner),
            Target("dingtalk", owner, chat, None, group),
            **kw,
        )

    def status_track(self, index=0):
        return self.api.ops("create")[index][1]["out_track_id"]


def error_5xx():
    return ServerError("busy", status=500, code="system.busy")


# ----------------------------------------------------------------------------------------
# adapter-level helpers (real ChannelBase, real pool, fake clock, fake Card API)
# ----------------------------------------------------------------------------------------
class FakeDingtalkApi(FakeCardApi):
    """FakeCardApi plus the robot/emotion/webhook calls the adapter makes."""

    def send_group_markdown(self, open_conversation_id, title, text):
        self._record("group", chat_id=open_conversation_id, title=title, text=text)

    def send_direct_markdown(self, user_ids, title, text):
        self._record("direct", user_ids=list(user_ids), title=title, text=text)

    def send_webhook_markdown(self, webhook_url, title, text, at_user_ids=()):
        self._record("webhook", url=webhook_url, title=title, text=text)

    def reply_emotion(self, open_msg_id, open_conversation_id):
        self._record("emotion_reply", msg_id=open_msg_id, chat_id=open_conversation_id)

    def recall_emotion(self, open_msg_id, open_conversation_id):
        self._record("emotion_recall", msg_id=open_msg_id, chat_id=open_conversation_id)

    def texts(self):
        return [c[1]["text"] for c in self.ops() if c[0] in ("group", "direct", "webhook")]


QWEN_QUESTIONS = [
    {
        "header": "Region",
        "question": "Which region?",
        "multiSelect": False,
        "options": [
            {"label": "Beijing", "description": ""},
            {"label": "Shanghai", "description": ""},
        ],
    },
    {
        "header": "Signals",
        "question": "Which signals?",
        "multiSelect": True,
        "options": [{"label": "Logs", "description": ""}, {"label": "Metrics", "description": ""}],
    },
]


class ScriptBridge:
    """An AgentBridge whose turns are test functions ``script(bridge, session_id, text, sink)``."""

    def __init__(self, script=None):
        self.script = script
        self.responses: list[tuple[str, Any]] = []
        self.answered: dict[str, threading.Event] = {}
        self.cancelled: list[str] = []
        self.cancel_events: dict[str, threading.Event] = {}
        self.respond_gate: threading.Event | None = None
        self.respond_started = threading.Event()
        self.respond_result = True
        self.lock = threading.Lock()
        self.cards: FakeCardApi | None = None  # the harness's Card API (AdapterHarness)
        #: hold turns in `until_cards` (tests of a running card's stream and updates)
        self.hold_for_cards = False

    def prompt(self, session_id, text, sink):
        return self.script(self, session_id, text, sink) if self.script else f"echo {text}"

    def cancel_session(self, session_id):
        self.cancelled.append(session_id)
        self.cancel_events.setdefault(session_id, threading.Event()).set()
        return True

    def respond_to_permission(self, request_id, response):
        self.respond_started.set()
        if self.respond_gate is not None:
            assert self.respond_gate.wait(5)
        with self.lock:
            self.responses.append((request_id, response))
        self.answered.setdefault(request_id, threading.Event()).set()
        return self.respond_result

    def close(self):
        pass

    # script helpers
    def ask(self, sink, session_id, request_id, wait=True):
        from channelkit.agents.base import PermissionOption, PermissionRequest

        event = self.answered.setdefault(request_id, threading.Event())
        sink.response_boundary(session_id)
        sink.permission_request(
            PermissionRequest(
                request_id,
                session_id,
                {
                    "toolCallId": "t-" + request_id,
                    "kind": "other",
                    "title": "Ask user",
                    "_meta": {
                        "toolName": "ask_user_question",
                        "qwenInteractionKind": "user_question",
                        "qwenQuestions": QWEN_QUESTIONS,
                    },
                },
                (
                    PermissionOption("proceed_once", "Submit", "allow_once"),
                    PermissionOption("cancel", "Cancel", "reject_once"),
                ),
            )
        )
        if wait:
            assert event.wait(5), "question never answered"

    def until_cards(self, count: int, timeout: float = 5.0) -> None:
        """With ``hold_for_cards``: hold the turn (bounded) until ``count`` card creations
        were asked for, so that the segment's card goes out running and streams. (A
        segment that ends before its card went out gets the card created once, already
        finished, with no stream and no update to fail.)"""
        if not self.hold_for_cards or self.cards is None:
            return
        deadline = time.monotonic() + timeout
        while len(self.cards.ops("create")) < count and time.monotonic() < deadline:
            threading.Event().wait(0.005)

    def wait_cancel(self, session_id, timeout=5):
        return self.cancel_events.setdefault(session_id, threading.Event()).wait(timeout)


class AdapterHarness:
    def __init__(
        self,
        script=None,
        *,
        cards=None,
        block_streaming=False,
        secret=None,
        bridge=None,
        channel_config=None,
        pool_size=16,
        run_pool_size=32,
    ):
        from channelkit.platforms.dingtalk import DingtalkChannel, DingtalkConfig
        from channelkit.runtime import FakeClock, Scheduler, WorkerPool

        self.clock = FakeClock()
        self.pool = WorkerPool(pool_size)
        self.run_pool = WorkerPool(run_pool_size)
        self.scheduler = Scheduler(self.pool, clock=self.clock)
        self.api = FakeDingtalkApi()
        self.bridge = bridge if bridge is not None else ScriptBridge(script)
        if isinstance(self.bridge, ScriptBridge):
            self.bridge.cards = self.api
        self.config = DingtalkConfig(
            client_id="ding-robot",
            client_secret="app-secret",
            model="qwen3.7-max",
            block_streaming=block_streaming,
            interactive_cards={} if cards is None else cards,
            card_callback_secret=secret,
            ingress="http",
            card_callback_route_key="channelkit",
        )
        self.channel = DingtalkChannel(
            self.config,
            self.bridge,
            api=self.api,
            channel_config=channel_config,
            executor=self.pool,
            run_executor=self.run_pool,
            scheduler=self.scheduler,
            clock=self.clock,
        )
        self._msg = 0

    def close(self):
        self.channel.close(timeout=5)
        self.scheduler.stop(2)
        self.run_pool.shutdown(wait=True, timeout=5)
        self.pool.shutdown(wait=True, timeout=5)

    def robot_payload(self, text, *, sender="staff-1", chat="cid-group-1", group=True, msg_id=None):
        self._msg += 1
        return {
            "msgId": msg_id or f"msg-{self._msg}",
            "msgtype": "text",
            "text": {"content": text},
            "conversationId": chat,
            "conversationType": "2" if group else "1",
            "senderId": "$:LWCP_v1:$" + sender,
            "senderStaffId": sender,
            "senderNick": sender,
        }

    def robot_request(self, payload, *, secret="app-secret", ts=None, body=None, after=True):
        """Call the robot handler like the web layer: ACK, then its deferred work.

        ``after=False`` returns the response with its deferred work not yet run.
        """
        from channelkit.ingress import Headers, IngressRequest
        from channelkit.platforms.dingtalk import robot_signature

        if ts is None:  # each request is signed at its own millisecond (signatures are one-use)
            self._signed = max(int(self.clock.time() * 1000), getattr(self, "_signed", 0) + 1)
            ts = str(self._signed)
        raw = body if body is not None else json.dumps(payload).encode()
        headers = Headers({"timestamp": ts, "sign": robot_signature(ts, secret)})
        response = self.channel.handle_robot_request(
            IngressRequest("POST", "/dingtalk/robot", headers, raw)
        )
        if after:
            response.run_after()
        return response

    def send(self, text, **kw):
        resp = self.robot_request(self.robot_payload(text, **kw))
        assert resp.status == 200
        return resp

    def card_request(self, payload, headers=None, body=None, after=True):
        """Call the card handler like the web layer: ACK, then its deferred work."""
        from channelkit.ingress import Headers, IngressRequest

        raw = body if body is not None else json.dumps(payload).encode()
        response = self.channel.handle_card_request(
            IngressRequest("POST", "/dingtalk/card", Headers(headers or {}), raw)
        )
        if after:
            response.run_after()
        return response

    def idle(self, timeout=5.0):
        from tests.platforms._shared import settle_pools

        settle_pools(self.run_pool, self.pool, timeout=timeout)

    def handed_to_pool(self, fn):
        """Call ``fn()`` and return (its result, the pool hand-offs made meanwhile)."""
        from tests.platforms._shared import handed_to_pool

        return handed_to_pool(self.pool, fn)

    def advance(self, seconds):
        self.clock.advance(seconds)
        self.idle()

    def wait_for(self, predicate, timeout=5.0):
        """:func:`channelkit.testing.wait_until`: the predicate's truthy value, or an
        AssertionError once ``timeout`` passes (never a quiet False)."""
        return wait_until(predicate, timeout, interval=0.002)

    def question_tracks(self):
        from channelkit.platforms.dingtalk import QUESTION_CARD_TEMPLATE_ID

        return [
            c[1]["out_track_id"]
            for c in self.api.ops("create")
            if c[1]["template_id"] == QUESTION_CARD_TEMPLATE_ID
        ]

    def status_tracks(self):
        from channelkit.platforms.dingtalk import STATUS_CARD_TEMPLATE_ID

        return [
            c[1]["out_track_id"]
            for c in self.api.ops("create")
            if c[1]["template_id"] == STATUS_CARD_TEMPLATE_ID
        ]


def submit_payload(track, actor="staff-1", form=None):
    return {
        "type": "actionCallback",
        "outTrackId": track,
        "userId": actor,
        "content": json.dumps(
            {
                "cardPrivateData": {
                    "actionIds": ["submit"],
                    "params": {"form": form or {"0": "Beijing", "1": ["Logs", "Metrics"]}},
                }
            }
        ),
    }


def stop_payload(track, actor="staff-1"):
    return {"userId": actor, "value": json.dumps({"outTrackId": track, "actionValue": "btn_stop"})}
