from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests_mock
from channelkit.clients.feishu import FeishuClient
from channelkit.http.retry import RetryPolicy
from channelkit.platforms.feishu.api import FeishuApi
from feishu_helpers import BASE_URL, FakeFeishu

from tests.platforms import _shared
from tests.platforms._shared import Runtime

rt = _shared.rt  # the shared runtime fixture


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
