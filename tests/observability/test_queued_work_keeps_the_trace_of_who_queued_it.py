"""Work handed to another thread keeps the trace of the code that handed it over.

Runs, hooks and retries execute on other threads than the code that queued them. With
tracing on (the SDK's in-memory exporter), a job posted to a serial lane, a task
submitted to the worker pool and a reserved lane slot filled later each run with the
span that was current where they were queued, on a thread of their own; work queued
with no span current runs with none. A final answer retried on the scheduler (429 with
``Retry-After``; the timer fires outside the span that delivered it) makes its second
attempt inside its delivery span, the child of the span that delivered it, and the
platform API calls recorded in both attempts are that delivery's children. Tracing off:
`bind()` returns the function itself.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from channelkit.errors import RateLimited
from channelkit.observability import hub, tracing
from channelkit.platforms.common.delivery import DeliveryChain, DeliveryPath, DeliveryTarget
from channelkit.runtime import FakeClock, Scheduler, WorkerPool
from channelkit.runtime.serial import KeyedSerialQueue, SerialLane

pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

WAIT_S = 10.0


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
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
def pool() -> Iterator[WorkerPool]:
    workers = WorkerPool(2, name="trace-test")
    try:
        yield workers
    finally:
        workers.shutdown(wait=True, timeout=WAIT_S)


class Seen:
    """What a queued job saw: its thread and the span current there (0: none)."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.thread: int | None = None
        self.span_id = -1

    def __call__(self) -> None:
        self.thread = threading.get_ident()
        context = trace.get_current_span().get_span_context()
        self.span_id = context.span_id if context.is_valid else 0
        self.done.set()

    def wait(self) -> None:
        assert self.done.wait(WAIT_S), "the queued job ran"


def test_lane_jobs_pool_tasks_and_filled_slots_run_in_the_span_that_queued_them(
    exporter: InMemorySpanExporter, pool: WorkerPool
) -> None:
    lanes = KeyedSerialQueue(pool, name="trace-lanes")
    slot = SerialLane(pool, name="trace-slot").reserve()  # reserved with no span current
    posted, submitted, filled, outside = Seen(), Seen(), Seen(), Seen()
    with tracing.span("queuing") as scope:
        assert scope.span is not None
        queuing = scope.span.get_span_context().span_id
        lanes.post("chat-a", posted)
        pool.submit(submitted)
    with tracing.span("filling") as scope:
        assert scope.span is not None
        filling = scope.span.get_span_context().span_id
        slot.fill(filled)
    lanes.post("chat-b", outside)
    for seen in (posted, submitted, filled, outside):
        seen.wait()
    main = threading.get_ident()
    assert main not in {posted.thread, submitted.thread, filled.thread}, "on pool threads"
    assert posted.span_id == queuing
    assert submitted.span_id == queuing
    assert filled.span_id == filling, "a slot runs in the span current when it was filled"
    assert outside.span_id == 0, "queued with no span current: none"


def test_a_retried_delivery_attempts_again_inside_its_delivery_span(
    exporter: InMemorySpanExporter,
) -> None:
    clock = FakeClock()
    timers = Scheduler(clock=clock, name="trace-test-timers")
    attempts: list[int] = []
    sent = threading.Event()

    def send() -> None:
        context = trace.get_current_span().get_span_context()
        attempts.append(context.span_id if context.is_valid else 0)
        hub.api_call("telegram", "sendMessage", "429" if len(attempts) == 1 else "200", 0.01)
        if len(attempts) == 1:
            raise RateLimited("slow down", status=429, retry_after=2.0)
        sent.set()

    try:
        chain = DeliveryChain(timers)
        with tracing.span("run") as scope:
            assert scope.span is not None
            run_id = scope.span.get_span_context().span_id
            job = chain.deliver([[DeliveryPath("text", send)]], DeliveryTarget("trace-ch", "c"))
        assert job.state == "pending", "a retry is booked"
        clock.advance(2.0)  # the retry is due: it runs here, outside the "run" span
        assert sent.wait(WAIT_S), "the retry ran"
        assert job.done.wait(WAIT_S)
    finally:
        timers.stop()
    spans = list(exporter.get_finished_spans())
    delivery = [s for s in spans if s.name == tracing.SPAN_DELIVERY]
    assert len(delivery) == 1
    span = delivery[0]
    assert span.context is not None and span.parent is not None
    assert span.parent.span_id == run_id, "the delivery is the child of who delivered"
    assert span.attributes is not None
    assert span.attributes["channelkit.outcome"] == "delivered"
    assert span.attributes["channelkit.attempts"] == 2
    assert attempts == [span.context.span_id, span.context.span_id], "both attempts in it"
    calls = [s for s in spans if s.name == tracing.SPAN_API_CALL]
    assert [(s.attributes or {}).get("channelkit.status") for s in calls] == ["429", "200"]
    assert all(s.parent is not None and s.parent.span_id == span.context.span_id for s in calls)


def test_the_api_without_an_sdk_makes_no_span_and_binds_nothing() -> None:
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        pytest.skip("this process set a global tracer provider")
    before = tracing._otel
    assert tracing.install_tracing()  # the global provider: the API's proxy, no SDK
    try:

        def work() -> None:
            return None

        assert tracing.tracing_enabled()
        assert tracing.start_span(tracing.SPAN_RUN) is None
        with tracing.span(tracing.SPAN_INBOUND) as scope:
            assert scope.span is None
            assert tracing.bind(work) is work
            assert tracing.current() is None
    finally:
        tracing._otel = before


def test_tracing_off_binds_nothing() -> None:
    before = tracing._otel
    tracing.disable_tracing()
    try:

        def work() -> None:
            return None

        assert tracing.bind(work) is work
        assert tracing.current() is None
        assert tracing.log_ids() is None
    finally:
        tracing._otel = before
