from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests_mock
from channelkit.clients.feishu import FeishuClient
from channelkit.http.retry import RetryPolicy
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.runtime import FakeClock, KeyedSerialQueue, Scheduler, WorkerPool
from feishu_helpers import BASE_URL, FakeFeishu


class Runtime:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.pool = WorkerPool(8, name="feishu-test")
        self.scheduler = Scheduler(self.pool, clock=self.clock)
        self.serial = KeyedSerialQueue(self.pool)

    def settle(self) -> None:
        assert self.pool.wait_idle(5.0)

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.settle()

    def close(self) -> None:
        self.scheduler.stop(1.0)
        self.pool.shutdown(wait=True, timeout=2.0)


@pytest.fixture
def rt() -> Iterator[Runtime]:
    runtime = Runtime()
    yield runtime
    runtime.close()


@pytest.fixture
def fake(rt: Runtime) -> Iterator[FakeFeishu]:
    server = FakeFeishu(clock=rt.clock)
    with requests_mock.Mocker() as mocker:
        server.install(mocker)
        yield server
    if server.gate is not None:
        server.gate.set()


@pytest.fixture
def api(fake: FakeFeishu) -> FeishuApi:
    client = FeishuClient(token="t-test", base_url=BASE_URL, retry=RetryPolicy(max_attempts=1))
    return FeishuApi(client)
