"""Token caching through the generated DingTalk and Feishu clients.

50 threads calling at once cause exactly one token request; expiry (on an injected clock)
triggers a refresh; an auth failure triggers one invalidate-and-retry, and a second one is
raised. The clients make their calls through requests-mock; nothing sleeps.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import pytest
import requests_mock as rm
from channelkit.clients.dingtalk import DingtalkClient
from channelkit.clients.feishu import FeishuClient
from channelkit.errors import AuthError
from channelkit.http.auth import DingTalkTokenProvider, FeishuTokenProvider
from channelkit.http.retry import RetryPolicy
from spec_driver import build_call, snake

THREADS = 50


@dataclass(frozen=True)
class Platform:
    name: str
    client: type[Any]
    provider: type[Any]
    token_url: str
    operation_id: str
    auth_header: str
    prefix: str

    def token_response(self, token: str, expire: int = 7200) -> dict[str, Any]:
        if self.name == "dingtalk":
            return {"accessToken": token, "expireIn": expire}
        return {"code": 0, "msg": "ok", "tenant_access_token": token, "expire": expire}

    def ok_response(self) -> dict[str, Any]:
        return {"success": True} if self.name == "dingtalk" else {"code": 0, "msg": "ok"}


PLATFORMS = [
    Platform(
        "dingtalk",
        DingtalkClient,
        DingTalkTokenProvider,
        "https://api.dingtalk.com/v1.0/oauth2/accessToken",
        "updateCardInstance",
        "x-acs-dingtalk-access-token",
        "",
    ),
    Platform(
        "feishu",
        FeishuClient,
        FeishuTokenProvider,
        "https://open.feishu.cn/open-apis/auth/v3/tenant_access_token/internal",
        "deleteMessage",
        "Authorization",
        "Bearer ",
    ),
]
IDS = [p.name for p in PLATFORMS]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _setup(platform: Platform, provider: Any) -> tuple[Any, Any, dict[str, Any]]:
    info, kwargs, _, _, _ = build_call(platform.name, platform.operation_id)
    client = platform.client(
        token_provider=provider, retry=RetryPolicy.never(), max_workers=THREADS
    )
    return client, info, kwargs


@pytest.mark.parametrize("platform", PLATFORMS, ids=IDS)
def test_fifty_threads_at_once_cause_exactly_one_token_request(platform: Platform) -> None:
    entered = 0
    lock = threading.Lock()
    all_in = threading.Event()
    release = threading.Event()

    class Gated(platform.provider):  # type: ignore[name-defined,misc]
        def get_token(self) -> str:
            nonlocal entered
            with lock:
                entered += 1
                if entered == THREADS:
                    all_in.set()
            return str(super().get_token())

    def token_reply(request: Any, context: Any) -> dict[str, Any]:
        # Hold the one fetch open until every thread is asking for a token.
        assert release.wait(timeout=5)
        return platform.token_response("t-1")

    client, info, kwargs = _setup(platform, Gated("app", "secret-value"))
    errors: list[BaseException] = []
    barrier = threading.Barrier(THREADS)

    def worker() -> None:
        try:
            barrier.wait(timeout=5)
            getattr(client, snake(platform.operation_id))(**kwargs)
        except BaseException as exc:  # reported below
            errors.append(exc)

    with rm.Mocker() as mocker:
        token = mocker.post(platform.token_url, json=token_reply)
        api = mocker.register_uri(info["method"], info["url"], json=platform.ok_response())
        threads = [threading.Thread(target=worker) for _ in range(THREADS)]
        for t in threads:
            t.start()
        assert all_in.wait(timeout=5)
        release.set()
        for t in threads:
            t.join(timeout=10)
    assert not errors
    assert token.call_count == 1
    assert api.call_count == THREADS
    assert {r.headers[platform.auth_header] for r in api.request_history} == {
        platform.prefix + "t-1"
    }


@pytest.mark.parametrize("platform", PLATFORMS, ids=IDS)
def test_expiry_on_the_injected_clock_triggers_a_refresh(platform: Platform) -> None:
    clock = FakeClock()
    provider = platform.provider("app", "secret-value", clock=clock)
    client, info, kwargs = _setup(platform, provider)
    call = getattr(client, snake(platform.operation_id))
    with rm.Mocker() as mocker:
        token = mocker.post(
            platform.token_url,
            [{"json": platform.token_response("t-1")}, {"json": platform.token_response("t-2")}],
        )
        api = mocker.register_uri(info["method"], info["url"], json=platform.ok_response())
        call(**kwargs)
        clock.now += 3600  # well inside the token's 7200 s
        call(**kwargs)
        assert token.call_count == 1
        clock.now += 3601  # past expiry
        call(**kwargs)
        assert token.call_count == 2
    sent = [r.headers[platform.auth_header] for r in api.request_history]
    assert sent == [platform.prefix + t for t in ("t-1", "t-1", "t-2")]


@pytest.mark.parametrize("platform", PLATFORMS, ids=IDS)
def test_auth_error_invalidates_and_retries_exactly_once(platform: Platform) -> None:
    provider = platform.provider("app", "secret-value", clock=FakeClock())
    client, info, kwargs = _setup(platform, provider)
    call = getattr(client, snake(platform.operation_id))
    rejected = {"status_code": 401, "json": {"code": "InvalidAuthentication", "message": "x"}}
    with rm.Mocker() as mocker:
        token = mocker.post(
            platform.token_url,
            [{"json": platform.token_response(t)} for t in ("t-1", "t-2", "t-3")],
        )
        api = mocker.register_uri(
            info["method"], info["url"], [rejected, {"json": platform.ok_response()}]
        )
        call(**kwargs)
        assert token.call_count == 2
        assert [r.headers[platform.auth_header] for r in api.request_history] == [
            platform.prefix + "t-1",
            platform.prefix + "t-2",
        ]
        # Rejected again after the refresh: raised, not retried a second time.
        api = mocker.register_uri(info["method"], info["url"], [rejected, rejected, rejected])
        with pytest.raises(AuthError):
            call(**kwargs)
        assert api.call_count == 2
        assert token.call_count == 3
