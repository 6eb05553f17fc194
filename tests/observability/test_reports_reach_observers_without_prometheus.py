"""What the shared places report to an observer, and ``/metrics`` without prometheus_client.

* the delivery chain reports ``delivered``, ``retried``, ``alternate_path``, ``lost`` and
  ``uncertain`` under the channel's platform (`PrometheusObserver` counts them in
  ``channelkit_deliveries_total``);
* the generated clients' base reports each API call attempt with the platform, the
  operation id and the HTTP status (``timeout`` when no answer came);
* the ingress claims report a copy they refuse as ``replay`` under the platform (the
  shared dedup: a copy this instance saw, or one another instance claimed first); a
  guard without a scope (signature replays) reports nothing;
* the shared inbound hand-off reports each message ``accepted``, ``busy`` or
  ``refused`` (the access policy) with a hashed chat, never the chat id;
* a failing observer never breaks the work that reported;
* without prometheus_client, ``GET /metrics`` answers 503 naming what to install.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests_mock
from channelkit.errors import ApiError, RateLimited, ReadTimeout
from channelkit.ingress import IngressRequest
from channelkit.observability import hub
from channelkit.observability.metrics import MISSING_MESSAGE, metrics_route
from channelkit.observability.observer import Observer
from channelkit.platforms.common.delivery import DeliveryChain, DeliveryPath, DeliveryTarget
from channelkit.runtime.clock import FakeClock
from channelkit.runtime.scheduler import Scheduler


class Recorder(Observer):
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.deliveries: list[tuple[str, str]] = []
        self.calls: list[tuple[str, str, str]] = []
        self.ingresses: list[tuple[str, str]] = []
        self.inbounds: list[tuple[str, str, str, str, str]] = []
        self.changed = threading.Condition(self.lock)

    def delivery(self, channel: str, outcome: str) -> None:
        with self.changed:
            self.deliveries.append((channel, outcome))
            self.changed.notify_all()

    def api_call(self, platform: str, operation: str, status: str, seconds: float) -> None:
        with self.lock:
            self.calls.append((platform, operation, status))

    def inbound(self, platform: str, channel: str, chat: str, outcome: str, run_id: str) -> None:
        with self.lock:
            self.inbounds.append((platform, channel, chat, outcome, run_id))

    def ingress(self, platform: str, outcome: str) -> None:
        with self.lock:
            self.ingresses.append((platform, outcome))


class Exploding(Observer):
    def delivery(self, channel: str, outcome: str) -> None:
        raise RuntimeError("observer bug")


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    observer = Recorder()
    hub.add_observer(observer)
    try:
        yield observer
    finally:
        hub.remove_observer(observer)


@pytest.fixture
def scheduler() -> Iterator[Scheduler]:
    timers = Scheduler(clock=FakeClock(), name="observability-test-timers")
    try:
        yield timers
    finally:
        timers.stop()


def _fails(*errors: Exception) -> Any:
    left = list(errors)

    def send() -> None:
        if left:
            raise left.pop(0)

    return send


def _outcomes(recorder: Recorder, channel: str) -> list[str]:
    with recorder.lock:
        return [o for c, o in recorder.deliveries if c == channel]


def test_the_delivery_chain_reports_each_outcome(recorder: Recorder, scheduler: Scheduler) -> None:
    chain = DeliveryChain(scheduler)
    refused = ApiError("bad request", status=400)
    unknown = ReadTimeout("no answer")

    chain.deliver([[DeliveryPath("text", _fails())]], DeliveryTarget("obs-ok", "c"))
    assert _outcomes(recorder, "obs-ok") == ["delivered"]

    paths = [DeliveryPath("card", _fails(refused)), DeliveryPath("text", _fails())]
    chain.deliver([paths], DeliveryTarget("obs-alt", "c"))
    assert _outcomes(recorder, "obs-alt") == ["alternate_path", "delivered"]

    chain.deliver([[DeliveryPath("text", _fails(refused))]], DeliveryTarget("obs-lost", "c"))
    assert _outcomes(recorder, "obs-lost") == ["lost"]

    chain.deliver([[DeliveryPath("text", _fails(unknown))]], DeliveryTarget("obs-unk", "c"))
    assert _outcomes(recorder, "obs-unk") == ["uncertain"]

    limited = RateLimited("slow down", status=429, retry_after=2.0)
    chain.deliver([[DeliveryPath("text", _fails(limited))]], DeliveryTarget("obs-retry", "c"))
    assert _outcomes(recorder, "obs-retry") == ["retried"]
    clock = scheduler.clock
    assert isinstance(clock, FakeClock)
    clock.advance(2.0)  # the booked retry is due: the scheduler hands it on
    with recorder.changed:
        recorder.changed.wait_for(lambda: len(_outcomes_locked(recorder, "obs-retry")) == 2, 10)
    assert _outcomes(recorder, "obs-retry") == ["retried", "delivered"]


def _outcomes_locked(recorder: Recorder, channel: str) -> list[str]:
    return [o for c, o in recorder.deliveries if c == channel]


def test_a_failing_observer_never_breaks_the_delivery(scheduler: Scheduler) -> None:
    broken = Exploding()
    hub.add_observer(broken)
    try:
        sent: list[str] = []
        job = DeliveryChain(scheduler).deliver(
            [[DeliveryPath("text", lambda: sent.append("x"))]], DeliveryTarget("obs-x", "c")
        )
    finally:
        hub.remove_observer(broken)
    assert sent == ["x"] and job.state == "delivered"


def test_api_call_attempts_are_reported_with_operation_and_status(recorder: Recorder) -> None:
    from channelkit.clients.telegram import TelegramClient

    client = TelegramClient(token="123:abc", base_url="http://telegram.test")
    with requests_mock.Mocker() as mock:
        mock.post(
            "http://telegram.test/bot123:abc/getMe",
            json={"ok": True, "result": {"id": 1, "is_bot": True, "first_name": "b"}},
        )
        client.get_me()
        mock.post(
            "http://telegram.test/bot123:abc/getMe",
            status_code=401,
            json={"ok": False, "error_code": 401, "description": "Unauthorized"},
        )
        with pytest.raises(ApiError):
            client.get_me()
    with recorder.lock:
        calls = list(recorder.calls)
    assert calls == [("telegram", "getMe", "200"), ("telegram", "getMe", "401")]
    assert "abc" not in repr(calls)


def test_metrics_without_prometheus_client_answer_503_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    route = metrics_route()
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # import fails
    response = route.handler(IngressRequest("GET", "/metrics", {}, b""))  # type: ignore[arg-type]
    assert response.status == 503
    assert response.body.decode() == MISSING_MESSAGE
    assert "channelkit[metrics]" in MISSING_MESSAGE


def test_a_refused_copy_is_reported_as_a_replay_of_its_platform(recorder: Recorder) -> None:
    from channelkit.platforms.common.replay import ReplayGuard
    from channelkit.platforms.common.shared_dedup import SharedDedup
    from channelkit.state import MemoryStore

    clock = FakeClock()
    store = MemoryStore(clock=clock)
    here = SharedDedup(clock.time, ttl=60.0, scope="telegram-update", store=store)
    there = SharedDedup(clock.time, ttl=60.0, scope="telegram-update", store=store)
    assert here.first(1) is True
    assert here.first(1) is False  # the same copy again, here
    assert there.first(1) is False  # another instance claimed it first
    signatures = ReplayGuard(clock.time)
    assert signatures.first("sig") is True and signatures.first("sig") is False
    with recorder.lock:
        assert recorder.ingresses == [("telegram", "replay"), ("telegram", "replay")]


def test_the_inbound_hand_off_reports_accepted_busy_and_refused(recorder: Recorder) -> None:
    from concurrent.futures import Future

    from channelkit.core import CommandHandle, InboundMessage, RunHandle
    from channelkit.core.access import ACCESS_COMMAND
    from channelkit.core.handles import CommandResult, RunResult
    from channelkit.platforms.common.inbound import hand_inbound

    class Stub:
        name = "obs-stub"

        def __init__(self, handle: Any) -> None:
            self.handle = handle

        def handle_inbound(self, message: Any, *, defer: Any = None) -> Any:
            return self.handle

    running: Future[RunResult] = Future()
    rejected: Future[RunResult] = Future()
    rejected.set_result(RunResult("r2", "s", "rejected"))
    notice: Future[CommandResult] = Future()
    notice.set_result(CommandResult(ACCESS_COMMAND, "", False))
    # not hexadecimal: the salted chat hash (hex digits) may hold "8812" by chance
    message = InboundMessage("obs-stub", "chat-XQ8812", "user-XQ7734", "hi")
    for handle in (
        RunHandle("r1", "s", running),
        RunHandle("r2", "s", rejected),
        CommandHandle(ACCESS_COMMAND, None, notice),
    ):
        assert hand_inbound(Stub(handle), message)[0] == "accepted"  # type: ignore[arg-type]
    with recorder.lock:
        seen = list(recorder.inbounds)
    assert [(o, r) for _, _, _, o, r in seen] == [
        ("accepted", "r1"),
        ("busy", "r2"),
        ("refused", ""),
    ]
    assert {chat for _, _, chat, _, _ in seen} != {"chat-XQ8812"}
    assert all("XQ8812" not in chat and "XQ7734" not in chat for _, _, chat, _, _ in seen)
    assert len({chat for _, _, chat, _, _ in seen}) == 1  # one chat, one hash
