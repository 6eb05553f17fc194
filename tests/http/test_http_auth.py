"""Token providers: caching, one refresh for many threads, expiry, advisory refresh, invalidate."""

from __future__ import annotations

import threading

import pytest
import requests_mock as rm
from channelkit.errors import AuthError, ConfigurationError, TransportError
from channelkit.http.auth import (
    DingTalkTokenProvider,
    FeishuTokenProvider,
    RefreshingTokenProvider,
    StaticTokenProvider,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Counting(RefreshingTokenProvider):
    def __init__(self, clock: FakeClock, lifetime: float = 7200.0, **kw: object) -> None:
        super().__init__(clock=clock, **kw)  # type: ignore[arg-type]
        self.calls = 0
        self.lifetime = lifetime
        self.gate: threading.Event | None = None
        self.fail = False

    def fetch(self) -> tuple[str, float]:
        self.calls += 1
        if self.gate is not None:
            self.gate.wait(timeout=5)
        if self.fail:
            raise TransportError("down")
        return f"tok-{self.calls}", self.lifetime


def test_fifty_threads_cause_exactly_one_fetch() -> None:
    provider = Counting(FakeClock())
    provider.gate = threading.Event()
    barrier = threading.Barrier(50)
    seen: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        barrier.wait(timeout=5)
        token = provider.get_token()
        with lock:
            seen.append(token)

    threads = [threading.Thread(target=worker) for _ in range(50)]
    for t in threads:
        t.start()
    provider.gate.set()
    for t in threads:
        t.join(timeout=10)
    assert provider.calls == 1
    assert seen == ["tok-1"] * 50


def test_cached_until_the_refresh_window_then_refreshed() -> None:
    clock = FakeClock()
    provider = Counting(clock, advisory_refresh=300, mandatory_refresh=60)
    assert provider.get_token() == "tok-1"
    clock.now += 7200 - 301
    assert provider.get_token() == "tok-1" and provider.calls == 1
    clock.now += 2  # inside the advisory window: refreshed early
    assert provider.get_token() == "tok-2"
    clock.now += 7200 + 1  # expired: mandatory refresh
    assert provider.get_token() == "tok-3"


def test_failed_advisory_refresh_keeps_the_valid_token() -> None:
    clock = FakeClock()
    provider = Counting(clock, advisory_refresh=300, mandatory_refresh=60)
    provider.get_token()
    provider.fail = True
    clock.now += 7200 - 200
    assert provider.get_token() == "tok-1"
    clock.now += 150  # mandatory window: a failure is raised
    with pytest.raises(TransportError):
        provider.get_token()


def test_invalidate_only_drops_the_rejected_token() -> None:
    provider = Counting(FakeClock())
    assert provider.get_token() == "tok-1"
    provider.invalidate("some-older-token")
    assert provider.get_token() == "tok-1"
    provider.invalidate("tok-1")
    assert provider.get_token() == "tok-2"
    provider.invalidate()
    assert provider.get_token() == "tok-3"


def test_dingtalk_provider_request_and_errors() -> None:
    clock = FakeClock()
    provider = DingTalkTokenProvider("ak", "sk", base_url="http://127.0.0.1:1", clock=clock)
    with rm.Mocker() as m:
        token = m.post(
            "http://127.0.0.1:1/v1.0/oauth2/accessToken",
            json={"accessToken": "at", "expireIn": 7200},
        )
        assert provider.get_token() == "at"
        assert provider.get_token() == "at"
        assert token.call_count == 1
        assert token.last_request.timeout == (3.05, 10.0)
        clock.now += 7200
        provider.get_token()
        assert token.call_count == 2
        m.post(
            "http://127.0.0.1:1/v1.0/oauth2/accessToken",
            status_code=400,
            json={"code": "invalidClientIdOrSecret", "message": "bad"},
        )
        provider.invalidate()
        with pytest.raises(AuthError) as caught:
            provider.get_token()
    assert caught.value.code == "invalidClientIdOrSecret"
    assert "sk" not in repr(provider)


def test_feishu_provider_business_code_is_auth_error() -> None:
    provider = FeishuTokenProvider("cli", "sec", base_url="http://127.0.0.1:1", clock=FakeClock())
    with rm.Mocker() as m:
        m.post(
            "http://127.0.0.1:1/open-apis/auth/v3/tenant_access_token/internal",
            json={"code": 10014, "msg": "app secret invalid"},
        )
        with pytest.raises(AuthError):
            provider.get_token()
        m.post(
            "http://127.0.0.1:1/open-apis/auth/v3/tenant_access_token/internal",
            json={"code": 0, "msg": "ok", "tenant_access_token": "t-1", "expire": 5400},
        )
        assert provider.get_token() == "t-1"


def test_static_and_bad_credentials() -> None:
    assert StaticTokenProvider("abc").get_token() == "abc"
    with pytest.raises(ConfigurationError) as caught:
        StaticTokenProvider("")
    assert caught.value.path == "token"
    with pytest.raises(ConfigurationError) as caught:
        DingTalkTokenProvider("ak", "")
    assert caught.value.path == "app_secret"
