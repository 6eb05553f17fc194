"""Traces (the ``otel`` extra): one conversation, one linked span tree.

With the OpenTelemetry SDK's in-memory exporter, one person's message through the
playground (the Telegram and DingTalk emulators, each over its own ingress: long
polling, stream connection) yields: the inbound message's span; the run's span, its
child (the run executes on another thread than the ingress); the agent turn, the run's
child; the platform API calls below the run; on Telegram the final answer's delivery,
the run's child, with its ``sendMessage`` call below it. Every span of the run shares
the inbound message's trace id, and no attribute holds the chat id, the user id, the
person's text or the answer. The run's JSON log lines carry that trace id.

Without OpenTelemetry (its import made to fail), the same conversation completes and
channelkit makes no span; a fresh interpreter building the core imports no
OpenTelemetry module until a channel exists.
"""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import channelkit
import pytest
import requests
from channelkit.agents.function import FunctionAgent, Turn
from channelkit.core import InboundMessage, RunHandle
from channelkit.observability import tracing
from channelkit.observability.logs import JsonFormatter
from channelkit.playground import Playground
from channelkit.testing import wait_until

pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

SDK = Path(channelkit.__file__).resolve().parents[1]

QUESTION = "where is invoice 4711-private"
ANSWER = "in the drawer marked confidential-7"

#: every attribute key a channelkit span may carry (none names a person or holds text)
ALLOWED_KEYS = {
    "channelkit.platform",
    "channelkit.channel",
    "channelkit.operation",
    "channelkit.status",
    "channelkit.outcome",
    "channelkit.run_id",
    "channelkit.run_kind",
    "channelkit.attempts",
}


def _answer(turn: Turn) -> str:
    turn.say("Looking. ")
    return ANSWER


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    """channelkit's spans go to an in-memory exporter for the test (tracing as it was
    afterwards)."""
    before = tracing._otel
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    assert tracing.install_tracing(provider)
    try:
        yield memory
    finally:
        tracing._otel = before
        provider.shutdown()


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    """The INFO lines of ``channelkit.observability`` written by `JsonFormatter`."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    events = logging.getLogger("channelkit.observability")
    level = events.level
    events.addHandler(handler)
    events.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        events.removeHandler(handler)
        events.setLevel(level)


class Conversation:
    """A playground whose channel records the messages and run handles it saw."""

    def __init__(self, platform: str) -> None:
        self.pg = Playground(platform=platform, agent=FunctionAgent(_answer))
        self.seen: list[InboundMessage] = []
        self.handles: list[RunHandle] = []
        handle_inbound = self.pg.channel.handle_inbound

        def recording(message: InboundMessage, **kwargs: Any) -> Any:
            self.seen.append(message)
            handle = handle_inbound(message, **kwargs)
            if isinstance(handle, RunHandle):
                self.handles.append(handle)
            return handle

        self.pg.channel.handle_inbound = recording  # type: ignore[method-assign]

    def send(self, text: str) -> RunHandle:
        response = requests.post(f"{self.pg.url}/_emulator/send", json={"text": text}, timeout=10)
        assert response.status_code == 200, response.text
        wait_until(lambda: self.handles, timeout=20, what="the channel took the message")
        result = self.handles[0].result(timeout=30)
        assert result.status == "completed", result
        return self.handles[0]


def _children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


def _descendants(spans: list[ReadableSpan], root: ReadableSpan) -> list[ReadableSpan]:
    found: list[ReadableSpan] = []
    todo = [root]
    while todo:
        for child in _children(spans, todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def _one(spans: list[ReadableSpan], name: str, **attributes: Any) -> ReadableSpan:
    matching = [
        s
        for s in spans
        if s.name == name and all((s.attributes or {}).get(k) == v for k, v in attributes.items())
    ]
    assert len(matching) == 1, (name, attributes, [s.name for s in spans])
    return matching[0]


@pytest.mark.parametrize("platform", ["telegram", "dingtalk"])
def test_a_message_yields_inbound_run_turn_and_api_calls_linked_without_ids_or_text(
    platform: str, exporter: InMemorySpanExporter, json_lines: io.StringIO
) -> None:
    conversation = Conversation(platform)
    with conversation.pg:
        run_id = conversation.send(QUESTION).run_id

        def tree() -> list[ReadableSpan] | None:
            spans = list(exporter.get_finished_spans())
            runs = [s for s in spans if s.name == tracing.SPAN_RUN]
            if not runs:
                return None
            below = _descendants(spans, runs[0])
            calls = [s for s in below if s.name == tracing.SPAN_API_CALL]
            delivered = [s for s in below if s.name == tracing.SPAN_DELIVERY]
            if not calls or (platform == "telegram" and not delivered):
                return None
            return spans

        spans = wait_until(tree, timeout=30, what=f"the run's span tree on {platform}")
        assert isinstance(spans, list)

    inbound = _one(spans, tracing.SPAN_INBOUND, **{"channelkit.run_id": run_id})
    assert inbound.attributes is not None
    assert inbound.attributes["channelkit.outcome"] == "accepted"
    assert inbound.attributes["channelkit.platform"] == platform
    run = _one(spans, tracing.SPAN_RUN, **{"channelkit.run_id": run_id})
    assert run.parent is not None and inbound.context is not None and run.context is not None
    assert run.parent.span_id == inbound.context.span_id, "the run is the inbound's child"
    assert run.context.trace_id == inbound.context.trace_id
    assert run.attributes is not None and run.attributes["channelkit.outcome"] == "completed"
    turns = [s for s in _children(spans, run) if s.name == tracing.SPAN_AGENT_TURN]
    assert len(turns) == 1, "one agent turn, the run's child"
    below = _descendants(spans, run)
    calls = [s for s in below if s.name == tracing.SPAN_API_CALL]
    assert calls, "the run's platform API calls are below it"
    for call in calls:
        assert call.attributes is not None
        assert call.attributes["channelkit.platform"] == platform
        assert call.attributes["channelkit.status"] == "200"
        assert call.attributes["channelkit.operation"]
    if platform == "telegram":
        deliveries = [s for s in _children(spans, run) if s.name == tracing.SPAN_DELIVERY]
        assert len(deliveries) == 1, "the final answer's delivery is the run's child"
        delivery = deliveries[0]
        assert delivery.attributes is not None
        assert delivery.attributes["channelkit.outcome"] == "delivered"
        sends = [
            (s.attributes or {}).get("channelkit.operation") for s in _children(spans, delivery)
        ]
        assert "sendMessage" in sends, sends

    # no attribute names the person or holds the text (run ids are random hex: the ids
    # are compared whole, the texts searched for)
    people = {m.chat_id for m in conversation.seen} | {m.sender_id for m in conversation.seen}
    people |= {m.thread_id for m in conversation.seen if m.thread_id}
    people.discard("")
    assert people, "the channel saw who wrote"
    for span in spans:
        for key, value in (span.attributes or {}).items():
            assert key in ALLOWED_KEYS, (span.name, key)
            assert str(value) not in people, (span.name, key, value)
            assert QUESTION not in str(value) and ANSWER not in str(value), (span.name, key)

    # the run's JSON log lines carry its trace id (and the id of a span of that trace)
    trace_id = f"{run.context.trace_id:032x}"
    ids = {f"{s.context.span_id:016x}" for s in spans if s.context is not None}
    lines = [json.loads(line) for line in json_lines.getvalue().splitlines()]
    started = [d for d in lines if d.get("event") == "run_start" and d.get("run_id") == run_id]
    assert len(started) == 1, lines
    assert started[0]["trace_id"] == trace_id
    assert started[0]["span_id"] in ids
    received = [d for d in lines if d.get("event") == "inbound" and d.get("run_id") == run_id]
    assert received and received[0]["trace_id"] == trace_id


def test_without_opentelemetry_the_conversation_completes_and_no_span_is_made(
    monkeypatch: pytest.MonkeyPatch, json_lines: io.StringIO
) -> None:
    for module in ("opentelemetry", "opentelemetry.trace", "opentelemetry.context"):
        monkeypatch.setitem(sys.modules, module, None)  # import fails
    monkeypatch.setattr(tracing, "_otel", tracing._UNRESOLVED)

    def work() -> str:
        return "done"

    assert not tracing.tracing_enabled()
    assert not tracing.install_tracing()
    assert tracing.current() is None
    assert tracing.bind(work) is work, "no wrapper without tracing"
    assert tracing.span(tracing.SPAN_RUN) is tracing.span(tracing.SPAN_INBOUND)
    assert tracing.start_span(tracing.SPAN_RUN) is None
    conversation = Conversation("telegram")
    with conversation.pg:
        handle = conversation.send(QUESTION)
    lines = [json.loads(line) for line in json_lines.getvalue().splitlines()]
    started = [d for d in lines if d.get("event") == "run_start"]
    assert [d["run_id"] for d in started] == [handle.run_id]
    assert all("trace_id" not in d for d in lines)


def test_building_the_core_imports_no_opentelemetry_module() -> None:
    code = (
        "import sys\n"
        "import channelkit, channelkit.core, channelkit.observability\n"
        "import channelkit.platforms.common.inbound, channelkit.platforms.common.delivery\n"
        "import channelkit.state.memory\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(SDK),
        env={**os.environ, "PYTHONPATH": str(SDK)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
