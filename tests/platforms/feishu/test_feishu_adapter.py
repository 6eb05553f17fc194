"""FeishuChannel end to end: ChannelBase + FunctionAgent + ingress + fake Feishu API."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from channelkit.agents.function import FunctionAgent, Question, Turn
from channelkit.core import ChannelConfig, InboundMessage, LifecycleEvent, LifecycleType
from channelkit.platforms.common import EXPIRY_MARGIN
from channelkit.platforms.feishu import FeishuChannel
from channelkit.platforms.feishu import cards as feishu_cards
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.testing import wait_until
from feishu_helpers import (
    ENCRYPT_KEY,
    FakeFeishu,
    acking_like_the_web_layer,
    card_action,
    challenge,
    channel_on,
    message_event,
    request,
)

from tests.platforms._shared import handed_to_pool

OWNER = "ou_owner"
NOW = 1_700_000_000.0


class Script:
    """A controllable agent function."""

    def __init__(self) -> None:
        self.calls = 0
        self.answers: list[Any] = []
        self.release = threading.Event()
        self.behaviour: Callable[[Turn], str | None] = lambda turn: "hello world"

    def __call__(self, turn: Turn) -> str | None:
        self.calls += 1
        return self.behaviour(turn)


@pytest.fixture
def script() -> Script:
    return Script()


def build(rt: Any, api: FeishuApi, script: Script, **overrides: Any) -> FeishuChannel:
    bridge = FunctionAgent(script, question_timeout=600.0, scheduler=rt.scheduler)
    return acking_like_the_web_layer(channel_on(rt, api, bridge, **overrides))


@pytest.fixture
def channel(rt: Any, api: FeishuApi, script: Script) -> Iterator[FeishuChannel]:
    ch = build(rt, api, script)
    yield ch
    script.release.set()
    ch.close(timeout=2.0)


def inbound(
    ch: FeishuChannel, text: str = "hi", sender: str = OWNER, message_id: str = "om_in1"
) -> Any:
    return ch.handle_inbound(
        InboundMessage("feishu", "oc_chat", sender, text, message_id=message_id)
    )


def finals(fake: FakeFeishu) -> list[tuple[str, str]]:
    """(content, label) of every terminal output-card write, in order.

    A terminal write is a CardKit full update, a PATCH, or a card sent already
    terminal (a segment that ended before its card was opened)."""
    out = []
    for call in fake.calls:
        card = call.card
        if not card or call.op not in ("update_card", "patch", "send"):
            continue
        elements = card["body"]["elements"]
        if len(elements) < 2 or elements[1].get("element_id") != "ck_status":
            continue
        if any(e.get("tag") == "button" for e in elements):
            continue  # a running card
        out.append((elements[0]["content"], elements[1]["content"]))
    return out


def labels(fake: FakeFeishu) -> list[str]:
    return [label for _, label in finals(fake)]


def finished(rt: Any, handle: Any) -> Any:
    result = handle.result(5.0)
    rt.settle()
    return result


# --- lifecycle mapping -----------------------------------------------------------------


def test_started_adds_reaction_and_no_card(
    rt: Any, fake: FakeFeishu, channel: FeishuChannel, script: Script
) -> None:
    started = threading.Event()

    def behaviour(turn: Turn) -> str:
        started.set()
        assert script.release.wait(5.0)
        return ""

    script.behaviour = behaviour
    handle = inbound(channel)
    assert started.wait(5.0)
    wait_until(lambda: bool(fake.ops("react")))
    assert [c.op for c in fake.calls] == ["react"]
    assert fake.calls[0].path.endswith("/messages/om_in1/reactions")
    assert fake.calls[0].body == {"reaction_type": {"emoji_type": "OnIt"}}
    script.release.set()
    finished(rt, handle)
    assert fake.ops("unreact") and fake.ops("unreact")[0].path.endswith("/om_in1/reactions/re_1")
    assert not fake.ops("create_card", "send")


def test_text_streams_into_one_card_per_segment_and_completes(
    rt: Any, fake: FakeFeishu, channel: FeishuChannel, script: Script
) -> None:
    def behaviour(turn: Turn) -> str:
        turn.say("Hello ")
        turn.tool_call("read file")  # tool calls add no UI
        turn.say("world")
        turn.boundary()
        turn.say("second")
        return ""

    script.behaviour = behaviour
    result = finished(rt, inbound(channel))
    assert result.status == "completed"
    assert finals(fake) == [("Hello \n\nworld", "*已完成*"), ("second", "*已完成*")]
    ops = {c.op for c in fake.calls}
    assert ops <= {"react", "unreact", "create_card", "send", "stream", "settings", "update_card"}


def test_lifecycle_hook_ignores_text_chunk_and_tool_call(
    rt: Any, fake: FakeFeishu, channel: FeishuChannel
) -> None:
    for kind in (LifecycleType.TEXT_CHUNK, LifecycleType.TOOL_CALL):
        channel.on_task_lifecycle(
            LifecycleEvent(kind, "feishu", "oc_chat", "s", "run-x", None, "om_1", chunk="text")
        )
    rt.settle()
    assert fake.calls == []


def test_text_chunk_lifecycle_leaves_the_streaming_card_running(
    rt: Any, fake: FakeFeishu, channel: FeishuChannel, script: Script
) -> None:
    """Later text_chunk (and tool_call) lifecycle events reach a live card: they must not
    project anything; only the run's end gives the card its label."""
    opened = threading.Event()
    spoke = threading.Event()

    def behaviour(turn: Turn) -> str:
        turn.say("a")
        assert opened.wait(5.0)
        turn.tool_call("read file")
        turn.say("b")
        spoke.set()
        assert script.release.wait(5.0)
        return ""

    script.behaviour = behaviour
    handle = inbound(channel)
    wait_until(lambda: any(c.message_id for c in channel.output.live_cards()))
    opened.set()
    assert spoke.wait(5.0)
    wait_until(lambda: "b" in (channel.output.live_cards()[0].writer.content or ""))  # type: ignore[union-attr]
    rt.pool.wait_idle(0.2)
    assert labels(fake) == [] and len(channel.output.live_cards()) == 1
    assert not fake.ops("settings", "update_card", "patch")
    script.release.set()
    assert finished(rt, handle).status == "completed"
    assert finals(fake) == [("a\n\nb", "*已完成*")]  # a paragraph break after the tool call


def test_tool_call_only_run_adds_no_ui(
    rt: Any, fake: FakeFeishu, channel: FeishuChannel, script: Script
) -> None:
    script.behaviour = lambda turn: (turn.tool_call("read file"), "")[1]
    assert finished(rt, inbound(channel)).status == "completed"
    assert sorted(c.op for c in fake.calls) == ["react", "unreact"]


def test_final_response_without_streaming_is_one_completed_card(
    rt: Any, fake: FakeFeishu, channel: FeishuChannel
) -> None:
    from channelkit.core import ChannelPromptOwner, OutputSegmentContext, SessionTarget

    segment = OutputSegmentContext(
        "feishu",
        "s1",
        "run-z",
        "seg-z",
        ChannelPromptOwner(OWNER),
        SessionTarget("feishu", OWNER, "oc_chat"),
    )
    channel.on_response_complete("oc_chat", "final answer", "s1", segment)
    sends = fake.ops("send")
    assert len(sends) == 1 and sends[0].card["body"]["elements"][0]["content"] == "final answer"
    assert sends[0].card["body"]["elements"][1]["content"] == "*已完成*"


@pytest.mark.parametrize(
    ("language", "completed", "cancelled", "failed"),
    [
        ("zh", "已完成", "已取消", "已失败，请重试"),
        ("en", "Completed", "Cancelled", "Failed, please retry"),
        ("de", "Abgeschlossen", "Abgebrochen", "Fehlgeschlagen, bitte erneut versuchen"),
    ],
    ids=["zh", "en", "de"],
)
def test_terminal_labels_in_three_languages(
    rt: Any,
    fake: FakeFeishu,
    api: FeishuApi,
    script: Script,
    language: str,
    completed: str,
    cancelled: str,
    failed: str,
) -> None:
    running = {"zh": "运行中...", "en": "Running...", "de": "Läuft..."}[language]
    ch = build(rt, api, script, language=language)
    try:
        script.behaviour = lambda turn: (turn.say("a"), "")[1]
        finished(rt, inbound(ch))

        def fail(turn: Turn) -> str:
            turn.say("b")
            raise RuntimeError("boom")

        script.behaviour = fail
        assert finished(rt, inbound(ch)).status == "failed"

        spoke = threading.Event()

        def hang(turn: Turn) -> str:
            turn.say("c")
            spoke.set()
            wait_until(lambda: turn.cancelled)
            return ""

        script.behaviour = hang
        handle = inbound(ch)
        assert spoke.wait(5.0)
        wait_until(lambda: len(fake.ops("stream", "send")) >= 1 and ch.output.live_cards())
        wait_until(lambda: all(c.message_id for c in ch.output.live_cards()))
        assert ch.handle_inbound(InboundMessage("feishu", "oc_chat", OWNER, "/cancel")).result(5.0)
        finished(rt, handle)
        entities = [c.card["body"]["elements"][1]["content"] for c in fake.ops("create_card")]
        assert entities and set(entities) == {f"*{running}*"}
        assert labels(fake) == [f"*{completed}*", f"*{failed}*", f"*{cancelled}*"]
    finally:
        ch.close(timeout=2.0)


@pytest.mark.parametrize(
    ("kind", "label"),
    [
        (LifecycleType.COMPLETED, "*Completed*"),
        (LifecycleType.CANCELLED, "*Cancelled*"),
        (LifecycleType.FAILED, "*Failed, please retry*"),
    ],
    ids=["completed", "cancelled", "failed"],
)
def test_terminal_lifecycle_labels_a_card_still_live(
    rt: Any, fake: FakeFeishu, api: FeishuApi, script: Script, kind: LifecycleType, label: str
) -> None:
    """The lifecycle hook labels any card of the run that no segment end finished."""
    from channelkit.core import ChannelPromptOwner, OutputSegmentContext, SessionTarget

    ch = build(rt, api, script, language="en")
    try:
        owner = ChannelPromptOwner(OWNER)
        target = SessionTarget("feishu", OWNER, "oc_chat")
        segment = OutputSegmentContext("feishu", "s1", "run-l", "seg-l", owner, target)
        ch.on_response_chunk("oc_chat", "partial", "s1", segment)
        rt.settle()
        event = LifecycleEvent(kind, "feishu", "oc_chat", "s1", "run-l", owner, None)
        ch.on_task_lifecycle(event)
        ch.on_task_lifecycle(event)  # repeated terminal events are idempotent
        rt.settle()
        assert finals(fake) == [("partial", label)]
        assert ch.output.live_cards() == []
    finally:
        ch.close(timeout=2.0)


# --- Stop ------------------------------------------------------------------------------


def _streaming_run(
    rt: Any,
    fake: FakeFeishu,
    channel: FeishuChannel,
    script: Script,
    text: str = "working...",
    message_id: str = "om_in1",
) -> tuple[Any, Any]:
    """Start a run that streams ``text`` and works until cancelled or released; return
    its handle, the Stop value of its card and a state dict (``cancelled`` once done)."""
    spoke = threading.Event()
    state: dict[str, Any] = {}

    def behaviour(turn: Turn) -> str:
        turn.say(text)
        spoke.set()
        wait_until(lambda: turn.cancelled or script.release.is_set())
        state["cancelled"] = turn.cancelled
        return ""

    script.behaviour = behaviour
    handle = inbound(channel, message_id=message_id)
    assert spoke.wait(5.0)
    wait_until(
        lambda: bool(channel.output.live_cards())
        and bool(channel.output.live_cards()[0].message_id)
    )
    # The working reaction on the inbound message is added on the pool too; wait for it
    # so callers that count calls from here on see only what they provoke themselves.
    wait_until(lambda: bool(fake.ops("react")))
    entity = fake.ops("create_card")[-1].card
    stop = entity["body"]["elements"][2]["behaviors"][0]["value"]
    state["message_id"] = channel.output.live_cards()[0].message_id
    return handle, (stop, state)


def test_stop_by_owner_cancels_exact_run_and_closes_streaming_first(
    rt: Any, fake: FakeFeishu, channel: FeishuChannel, script: Script
) -> None:
    handle, (stop, state) = _streaming_run(rt, fake, channel, script)
    message_id = state.pop("message_id")
    response = channel.handle_card_request(request(card_action(stop, message_id=message_id)))
    assert response.status == 200
    assert json.loads(response.body)["toast"]["type"] == "info"
    result = finished(rt, handle)
    assert result.status == "cancelled" and state["cancelled"] is True
    ops = [c.op for c in fake.calls if c.op in ("settings", "update_card")]
    assert ops == ["settings", "update_card"]  # streaming closed before the Stopped projection
    assert labels(fake) == ["*已停止生成*"]


def test_duplicate_stop_cancels_once(
    rt: Any, fake: FakeFeishu, channel: FeishuChannel, script: Script
) -> None:
    handle, (stop, state) = _streaming_run(rt, fake, channel, script)
    cancels: list[str] = []
    original = channel.cancel_run

    def counting(session_id: str, run_id: str, reason: Any = "cancel_command") -> bool:
        cancels.append(run_id)
        return original(session_id, run_id, reason)

    channel.cancel_run = counting  # type: ignore[method-assign]
    tap = request(card_action(stop, message_id=state.pop("message_id")))
    bodies = [json.loads(channel.handle_card_request(tap).body) for _ in range(3)]
    assert finished(rt, handle).status == "cancelled"
    assert len(cancels) == 1
    assert [b.get("toast", {}).get("type") for b in bodies] == ["info", None, None]
    assert labels(fake) == ["*已停止生成*"]


def test_stop_by_foreign_user_cancels_nothing(
    rt: Any, fake: FakeFeishu, channel: FeishuChannel, script: Script
) -> None:
    handle, (stop, state) = _streaming_run(rt, fake, channel, script)
    message_id = state.pop("message_id")
    response = channel.handle_card_request(
        request(card_action(stop, open_id="ou_intruder", message_id=message_id))
    )
    assert json.loads(response.body)["toast"]["type"] == "warning"
    no_operator = card_action(stop, message_id=message_id)
    del no_operator["event"]["operator"]["open_id"]
    channel.handle_card_request(request(no_operator))
    rt.pool.wait_idle(0.2)
    assert not state
    script.release.set()
    result = finished(rt, handle)
    assert result.status == "completed" and state["cancelled"] is False
    assert labels(fake) == ["*已完成*"]


def test_stop_on_historical_card_cannot_cancel_newer_run(
    rt: Any, fake: FakeFeishu, channel: FeishuChannel, script: Script
) -> None:
    handle, (stop, first) = _streaming_run(rt, fake, channel, script)
    script.release.set()
    finished(rt, handle)
    script.release.clear()
    handle2, (_, state2) = _streaming_run(rt, fake, channel, script, "again", "om_in2")
    channel.handle_card_request(request(card_action(stop, message_id=first["message_id"])))
    rt.pool.wait_idle(0.2)
    assert "cancelled" not in state2
    script.release.set()
    assert finished(rt, handle2).status == "completed"


# --- forms -----------------------------------------------------------------------------


def _ask(script: Script, questions: list[Question] | None = None) -> None:
    qs = questions or [
        Question("Which region?", ["Beijing", "Shanghai"], header="Region"),
        Question("What?", ["Logs", "Metrics", "Traces"], header="Signals", multi_select=True),
    ]

    def behaviour(turn: Turn) -> str:
        turn.say("Let me ask. ")
        try:
            script.answers.append(turn.ask(qs))
        except Exception as exc:
            script.answers.append(type(exc).__name__)
        turn.say("Thanks.")
        return ""

    script.behaviour = behaviour


def _form_message(fake: FakeFeishu, channel: FeishuChannel) -> tuple[str, str]:
    """(request id, message id) of the form card, once the form accepts answers."""
    wait_until(
        lambda: any(
            c.card and c.card["body"]["elements"][0].get("tag") == "form" for c in fake.ops("send")
        )
    )
    for index, call in enumerate(fake.calls):
        if (
            call.op == "send"
            and call.card
            and call.card["body"]["elements"][0].get("tag") == "form"
        ):
            buttons = [
                e for e in call.card["body"]["elements"][0]["elements"] if e["tag"] == "button"
            ]
            rid = buttons[0]["behaviors"][0]["value"]["request"]
            # the card is sent before the presenter marks it pending: wait for that too
            record = channel.questions.get(rid)
            assert record is not None
            wait_until(lambda r=record: r.cell.state != "reserved")
            return rid, f"om_{index + 1}"
    raise AssertionError("no form")


def test_form_submit_exact_answers_and_new_segment_after(
    rt: Any, fake: FakeFeishu, channel: FeishuChannel, script: Script
) -> None:
    _ask(script)
    handle = inbound(channel)
    rid, message = _form_message(fake, channel)
    # the pre-question output card was completed before the form was created
    first_final = next(
        i for i, c in enumerate(fake.calls) if c.card and finals(FakeFeishu(calls=[c]))
    )
    form_send = next(
        i
        for i, c in enumerate(fake.calls)
        if c.card and c.card["body"]["elements"][0].get("tag") == "form"
    )
    assert first_final < form_send
    body = card_action(
        {"action": "ck_submit", "request": rid},
        form_value={"0": "0", "1": ["0", "1"]},
        message_id=message,
    )
    response = channel.handle_card_request(request(body))
    assert json.loads(response.body)["toast"]["type"] == "success"
    assert finished(rt, handle).status == "completed"
    assert script.answers == [{"0": "Beijing", "1": "Logs, Metrics"}]
    patches = [c for c in fake.ops("patch") if c.path.endswith(message)]
    assert patches and "*已提交*" in json.dumps(patches[-1].card, ensure_ascii=False)
    assert finals(fake) == [("Let me ask. ", "*已完成*"), ("Thanks.", "*已完成*")]


def test_continuation_card_shows_only_its_own_segment_text(
    rt: Any, fake: FakeFeishu, channel: FeishuChannel, script: Script
) -> None:
    """on_response_complete gets the whole run's text ("Before.After."); each segment's
    card must finish with its own streamed text only."""

    def behaviour(turn: Turn) -> str:
        turn.say("Before.")
        script.answers.append(turn.ask([Question("Which region?", ["Beijing", "Shanghai"])]))
        turn.say("After.")
        return ""

    script.behaviour = behaviour
    handle = inbound(channel)
    rid, message = _form_message(fake, channel)
    body = card_action(
        {"action": "ck_submit", "request": rid}, form_value={"0": "1"}, message_id=message
    )
    channel.handle_card_request(request(body))
    assert finished(rt, handle).status == "completed"
    assert script.answers == [{"0": "Shanghai"}]
    assert finals(fake) == [("Before.", "*已完成*"), ("After.", "*已完成*")]
    writes = [json.dumps(c.body, ensure_ascii=False) for c in fake.calls if c.body]
    second = [w for w in writes if "After." in w]
    assert second and not any("Before." in w for w in second)


def test_duplicate_submit_one_responder_call(
    rt: Any, fake: FakeFeishu, channel: FeishuChannel, script: Script
) -> None:
    _ask(script)
    handle = inbound(channel)
    rid, message = _form_message(fake, channel)
    calls: list[Any] = []
    original = channel.bridge.respond_to_permission

    def counting(request_id: str, response: Any) -> bool:
        calls.append(request_id)
        return original(request_id, response)

    channel.bridge.respond_to_permission = counting  # type: ignore[method-assign]

    def body() -> dict[str, Any]:  # 16 clicks: 16 callbacks, each with its own event_id
        return card_action(
            {"action": "ck_submit", "request": rid},
            form_value={"0": "1", "1": ["2"]},
            message_id=message,
        )

    responses = []
    threads = [
        threading.Thread(
            target=lambda: responses.append(channel.handle_card_request(request(body())))
        )
        for _ in range(16)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5.0)
    assert finished(rt, handle).status == "completed"
    assert len(calls) == 1
    assert script.answers == [{"0": "Shanghai", "1": "Traces"}]
    toasts = [json.loads(r.body)["toast"]["type"] for r in responses]
    assert toasts.count("success") == 1 and toasts.count("warning") == 15
    texts = {json.loads(r.body)["toast"]["content"] for r in responses}
    assert feishu_cards.strings("zh")["toast_already_answered"] in texts  # not "expired"
    assert feishu_cards.strings("zh")["toast_stale"] not in texts


def test_ack_before_responder(
    rt: Any, fake: FakeFeishu, channel: FeishuChannel, script: Script
) -> None:
    _ask(script)
    handle = inbound(channel)
    rid, message = _form_message(fake, channel)
    gate = threading.Event()
    entered = threading.Event()
    original = channel.bridge.respond_to_permission

    def slow(request_id: str, response: Any) -> bool:
        entered.set()
        assert gate.wait(5.0)
        return original(request_id, response)

    channel.bridge.respond_to_permission = slow  # type: ignore[method-assign]
    body = card_action(
        {"action": "ck_submit", "request": rid},
        form_value={"0": "0", "1": ["0"]},
        message_id=message,
    )
    response = channel.handle_card_request(request(body))
    assert response.status == 200  # returned while the responder is still blocked
    assert entered.wait(5.0)
    gate.set()
    assert finished(rt, handle).status == "completed"


def test_form_expiry_projects_before_responder(
    rt: Any, fake: FakeFeishu, channel: FeishuChannel, script: Script
) -> None:
    _ask(script)
    handle = inbound(channel)
    _, message = _form_message(fake, channel)
    events: list[str] = []
    original_patch = channel.api.patch_card
    original_respond = channel.bridge.respond_to_permission

    def patch(message_id: str, card: Any) -> None:
        events.append("patch")
        original_patch(message_id, card)

    def respond(request_id: str, response: Any) -> bool:
        events.append("respond")
        return original_respond(request_id, response)

    channel.api.patch_card = patch  # type: ignore[method-assign]
    channel.bridge.respond_to_permission = respond  # type: ignore[method-assign]
    rt.clock.advance(270.0)
    assert finished(rt, handle).status == "completed"
    assert events[:2] == ["patch", "respond"]
    assert script.answers == ["QuestionCancelled"]
    assert "*已过期*" in json.dumps(fake.ops("patch")[-1].card, ensure_ascii=False)


def test_forms_disabled_streams_and_uses_text_prompt(
    rt: Any, fake: FakeFeishu, api: FeishuApi, script: Script
) -> None:
    ch = build(rt, api, script, forms={"enabled": False})
    try:
        _ask(script, [Question("Which region?", ["Beijing", "Shanghai"], header="Region")])
        handle = inbound(ch)
        wait_until(lambda: any(c.body.get("msg_type") == "text" for c in fake.ops("send")))
        texts = [
            json.loads(c.body["content"])["text"]
            for c in fake.ops("send")
            if c.body.get("msg_type") == "text"
        ]
        assert "ask_user_question" in texts[0] and "/deny" in texts[0]  # the shared text prompt
        assert not any(
            c.card and c.card["body"]["elements"][0].get("tag") == "form" for c in fake.ops("send")
        )
        assert ch.handle_inbound(InboundMessage("feishu", "oc_chat", OWNER, "/deny")).result(5.0)
        assert finished(rt, handle).status == "completed"
        # streaming output still used cards (before and after the question)
        assert finals(fake) == [("Let me ask. ", "*已完成*"), ("Thanks.", "*已完成*")]
    finally:
        ch.close(timeout=2.0)


# --- ingress -----------------------------------------------------------------------------


@pytest.fixture
def secure(rt: Any, api: FeishuApi, script: Script) -> Iterator[FeishuChannel]:
    rt.clock.advance(NOW - rt.clock.time())
    ch = build(rt, api, script, encrypt_key=ENCRYPT_KEY)
    yield ch
    ch.close(timeout=2.0)


def ts() -> str:
    return str(int(NOW))


def test_routes(channel: FeishuChannel) -> None:
    routes = {r.path: r for r in channel.ingress_routes()}
    assert set(routes) == {"/feishu/events", "/feishu/card"}
    assert all(r.methods == ("POST",) for r in routes.values())


def test_challenge_plain_and_encrypted(channel: FeishuChannel, secure: FeishuChannel) -> None:
    response = channel.handle_event_request(request(challenge()))
    assert json.loads(response.body) == {"challenge": "ch-1"}
    response = secure.handle_card_request(request(challenge(value="x"), encrypt_key=ENCRYPT_KEY))
    assert json.loads(response.body) == {"challenge": "x"}


def test_signed_encrypted_message_starts_one_run_despite_redelivery(
    rt: Any, fake: FakeFeishu, secure: FeishuChannel, script: Script
) -> None:
    req = request(message_event("hello"), encrypt_key=ENCRYPT_KEY, timestamp=ts())
    assert secure.handle_event_request(req).status == 200
    # Feishu retry: the same event in a new request (signed anew); a copy of the first
    # request itself is a replay and is refused
    retry = request(message_event("hello"), encrypt_key=ENCRYPT_KEY, timestamp=ts(), nonce="n-2")
    assert secure.handle_event_request(retry).status == 200
    assert secure.handle_event_request(req).status == 403
    wait_until(lambda: script.calls == 1)
    secure.wait_idle(5.0)
    assert script.calls == 1
    assert finals(fake) == [("hello world", "*已完成*")]


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(
            lambda: request(
                message_event(), encrypt_key=ENCRYPT_KEY, timestamp=ts(), signature="f" * 64
            ),
            id="forged-signature",
        ),
        pytest.param(
            lambda: request(message_event(token="wrong"), encrypt_key=ENCRYPT_KEY, timestamp=ts()),
            id="wrong-token",
        ),
        pytest.param(
            lambda: request(
                None,
                raw=b'{"encrypt":"bm90IGEgcmVhbCBjaXBoZXJ0ZXh0IGF0IGFsbCEhISE="}',
                encrypt_key=ENCRYPT_KEY,
                timestamp=ts(),
            ),
            id="bad-ciphertext",
        ),
        pytest.param(
            lambda: request(challenge(), encrypt_key=ENCRYPT_KEY, timestamp=str(int(NOW) - 7200)),
            id="stale-challenge",
        ),
        pytest.param(
            lambda: request(challenge(token="wrong"), encrypt_key=ENCRYPT_KEY),
            id="challenge-wrong-token",
        ),
        pytest.param(
            lambda: request(
                message_event(), encrypt_key=ENCRYPT_KEY, timestamp=str(int(NOW) - 7200)
            ),
            id="stale-event",
        ),
        pytest.param(lambda: request(message_event()), id="plaintext-when-encrypted"),
    ],
)
def test_rejected_requests_mutate_nothing(
    rt: Any, fake: FakeFeishu, secure: FeishuChannel, script: Script, make: Any
) -> None:
    req = make()
    for handler in (secure.handle_event_request, secure.handle_card_request):
        response = handler(req)
        assert response.status in (400, 401)
        assert "challenge" not in json.loads(response.body)
    secure.wait_idle(2.0)
    assert script.calls == 0 and fake.calls == []


def test_rejected_stop_mutates_nothing(
    rt: Any, fake: FakeFeishu, api: FeishuApi, script: Script
) -> None:
    rt.clock.advance(NOW - rt.clock.time())
    ch = build(rt, api, script, encrypt_key=ENCRYPT_KEY)
    try:
        handle, (stop, state) = _streaming_run(rt, fake, ch, script)
        mid = state.pop("message_id")
        before = len(fake.calls)
        forged = request(
            card_action(stop, message_id=mid),
            encrypt_key=ENCRYPT_KEY,
            timestamp=ts(),
            signature="0" * 64,
        )
        assert ch.handle_card_request(forged).status == 401
        wrong = request(
            card_action(stop, message_id=mid, token="nope"), encrypt_key=ENCRYPT_KEY, timestamp=ts()
        )
        assert ch.handle_card_request(wrong).status == 401
        rt.pool.wait_idle(0.2)
        assert not state and len(fake.calls) == before
        good = request(card_action(stop, message_id=mid), encrypt_key=ENCRYPT_KEY, timestamp=ts())
        assert ch.handle_card_request(good).status == 200
        assert finished(rt, handle).status == "cancelled"
    finally:
        ch.close(timeout=2.0)


def test_group_messages_need_a_mention_and_bots_are_ignored(
    rt: Any, fake: FakeFeishu, channel: FeishuChannel, script: Script
) -> None:
    channel.handle_event_request(request(message_event(chat_type="group", event_id="e1")))
    bot = message_event(event_id="e2")
    bot["event"]["sender"]["sender_type"] = "app"
    channel.handle_event_request(request(bot))
    channel.wait_idle(2.0)
    assert script.calls == 0
    mention = message_event("@_user_1 hi", chat_type="group", event_id="e3")
    mention["event"]["message"]["mentions"] = [{"key": "@_user_1", "name": "bot"}]
    channel.handle_event_request(request(mention))
    wait_until(lambda: script.calls == 1)


# --- deferred ACK work ---------------------------------------------------------------------


def test_message_event_starts_the_run_only_after_the_ack(
    rt: Any, fake: FakeFeishu, channel: FeishuChannel, script: Script
) -> None:
    raw = FeishuChannel.handle_event_request  # the handler itself, without the web layer
    response, handed = handed_to_pool(
        rt.pool, lambda: raw(channel, request(message_event(event_id="ev-defer")))
    )
    assert response.status == 200 and handed == [] and len(response.after) == 1
    rt.settle()
    assert script.calls == 0 and fake.calls == []
    response.run_after()
    response.run_after()
    wait_until(lambda: script.calls == 1)
    rt.settle()
    assert script.calls == 1 and labels(fake) == ["*已完成*"]


def test_form_submit_and_stop_call_nothing_before_the_ack(
    rt: Any, fake: FakeFeishu, channel: FeishuChannel, script: Script
) -> None:
    _ask(script)
    handle = inbound(channel)
    rid, message = _form_message(fake, channel)
    raw = FeishuChannel.handle_card_request
    body = card_action(
        {"action": "ck_submit", "request": rid},
        form_value={"0": "0", "1": ["0"]},
        message_id=message,
    )
    writes = len(fake.calls)
    response, handed = handed_to_pool(rt.pool, lambda: raw(channel, request(body)))
    assert json.loads(response.body)["toast"]["type"] == "success"
    assert handed == [] and channel.questions.get(rid).cell.state == "claimed"
    assert script.answers == [] and len(fake.calls) == writes
    response.run_after()
    assert finished(rt, handle).status == "completed"
    assert script.answers == [{"0": "Beijing", "1": "Logs"}]


def test_stop_cancels_only_after_the_ack(
    rt: Any, fake: FakeFeishu, channel: FeishuChannel, script: Script
) -> None:
    handle, (stop, state) = _streaming_run(rt, fake, channel, script)
    raw = FeishuChannel.handle_card_request
    tap = request(card_action(stop, message_id=state.pop("message_id")))
    response, handed = handed_to_pool(rt.pool, lambda: raw(channel, tap))
    assert json.loads(response.body)["toast"]["type"] == "info"
    assert handed == [] and "cancelled" not in state
    response.run_after()
    assert finished(rt, handle).status == "cancelled"
    assert state["cancelled"] is True


def test_form_expires_before_cores_deadline(
    rt: Any, fake: FakeFeishu, api: FeishuApi, script: Script
) -> None:
    """forms.timeout_ms longer than the host lifetime: the card ends EXPIRY_MARGIN before
    core's own timer, shown expired (never the neutral cancelled of core's timer)."""
    ch = build(rt, api, script)
    ch.config = ChannelConfig(name="feishu", permission_timeout=30.0)
    try:
        _ask(script)
        handle = inbound(ch)
        rid, _message = _form_message(fake, ch)
        record = ch.questions.get(rid)
        pending = ch._requests.get(rid)
        assert record is not None and record.deadline == pending.expires_at - EXPIRY_MARGIN
        rt.clock.advance(30.0 - EXPIRY_MARGIN - 0.01)
        assert ch.questions.get(rid) is record and record.cell.state == "pending"
        rt.clock.advance(0.01)
        assert finished(rt, handle).status == "completed"
        assert script.answers == ["QuestionCancelled"]
        assert "*已过期*" in json.dumps(fake.ops("patch")[-1].card, ensure_ascii=False)
    finally:
        ch.close(timeout=2.0)
