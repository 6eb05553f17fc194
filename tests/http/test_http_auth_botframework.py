"""Microsoft Teams: the Bot Framework client-credentials token provider and its client."""

from __future__ import annotations

import logging
import threading
from urllib.parse import parse_qs

import pytest
import requests_mock as rm
from channelkit.clients.msteams import MsteamsClient
from channelkit.errors import AuthError, ConfigurationError, DeserializationError
from channelkit.http.auth import BotFrameworkTokenProvider
from channelkit.http.redact import REDACTOR

LOGIN = "https://login.microsoftonline.com/botframework.com/oauth2/v2.0/token"
SERVICE = "https://smba.trafficmanager.net/teams"
SEND = f"{SERVICE}/v3/conversations/19%3Aabc%40thread.tacv2/activities"


class FakeClock:
    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


def _token(value: str, expires_in: object = 3599) -> dict[str, object]:
    return {
        "token_type": "Bearer",
        "expires_in": expires_in,
        "ext_expires_in": expires_in,
        "access_token": value,
    }


def _form(request: object) -> dict[str, list[str]]:
    return parse_qs(request.text)  # type: ignore[attr-defined]


def test_client_credentials_request_and_cached_token() -> None:
    clock = FakeClock()
    provider = BotFrameworkTokenProvider("app-1", "s3cret-pw", clock=clock)
    with rm.Mocker() as mock:
        login = mock.post(LOGIN, json=_token("tok-a"))
        assert provider.get_token() == "tok-a"
        assert provider.get_token() == "tok-a"
        assert login.call_count == 1
        sent = login.last_request
        assert sent.headers["Content-Type"] == "application/x-www-form-urlencoded"
        assert _form(sent) == {
            "grant_type": ["client_credentials"],
            "client_id": ["app-1"],
            "client_secret": ["s3cret-pw"],
            "scope": ["https://api.botframework.com/.default"],
        }
        # expires_in drives the refresh: inside the mandatory window a new token is fetched
        login = mock.post(LOGIN, json=_token("tok-b"))
        clock.now += 3599 - 59
        assert provider.get_token() == "tok-b"
    assert "s3cret-pw" not in repr(provider)
    record = logging.LogRecord(
        "x", logging.INFO, __file__, 1, "pw=%s tok=%s", ("s3cret-pw", "tok-b"), None
    )
    REDACTOR.filter(record)
    assert "s3cret-pw" not in record.getMessage() and "tok-b" not in record.getMessage()


def test_single_tenant_and_login_url_override() -> None:
    provider = BotFrameworkTokenProvider(
        "app-1", "pw", tenant="contoso.onmicrosoft.com", login_url="http://127.0.0.1:9/"
    )
    assert provider.token_url == "http://127.0.0.1:9/contoso.onmicrosoft.com/oauth2/v2.0/token"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"app_id": "", "app_password": "pw"}, "app_id"),
        ({"app_id": "a", "app_password": ""}, "app_password"),
        ({"app_id": "a", "app_password": "pw", "tenant": "x/y"}, "tenant"),
        ({"app_id": "a", "app_password": "pw", "scope": ""}, "scope"),
    ],
)
def test_bad_arguments_name_the_field(kwargs: dict[str, str], field: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        BotFrameworkTokenProvider(**kwargs)
    assert info.value.path == field


def test_rejected_credentials_are_auth_errors_with_azure_details() -> None:
    provider = BotFrameworkTokenProvider("app-1", "wrong")
    body = {
        "error": "invalid_client",
        "error_description": "AADSTS7000215: Invalid client secret provided.",
        "error_codes": [7000215],
        "correlation_id": "corr-42",
    }
    with rm.Mocker() as mock:
        mock.post(LOGIN, status_code=401, json=body)
        with pytest.raises(AuthError) as info:
            provider.get_token()
    error = info.value
    assert error.code == "invalid_client"
    assert "AADSTS7000215" in error.message
    assert error.request_id == "corr-42"
    # a 400 (invalid_request, unknown tenant...) is still a credentials problem
    with rm.Mocker() as mock:
        mock.post(LOGIN, status_code=400, json={**body, "error": "invalid_request"})
        with pytest.raises(AuthError, match="invalid_request|AADSTS"):
            provider.get_token()


def test_malformed_token_answers() -> None:
    provider = BotFrameworkTokenProvider("app-1", "pw")
    with rm.Mocker() as mock:
        mock.post(LOGIN, json={"token_type": "Bearer"})
        with pytest.raises(DeserializationError) as info:
            provider.get_token()
        assert info.value.path == "access_token"
        mock.post(LOGIN, json=_token("t", expires_in=True))
        with pytest.raises(DeserializationError) as info:
            provider.get_token()
        assert info.value.path == "expires_in"
        mock.post(LOGIN, json=_token("t", expires_in="3599"))  # v1 endpoints send a string
        assert provider.get_token() == "t"


def test_client_fetches_once_for_many_threads_and_renews_after_a_401() -> None:
    client = MsteamsClient(app_id="app-1", app_password="pw")
    assert isinstance(client.token_provider, BotFrameworkTokenProvider)
    # the Bot Connector base URL is not where tokens come from
    assert client.token_provider.token_url == LOGIN
    tokens = iter(["tok-1", "tok-2"])
    with rm.Mocker() as mock:
        login = mock.post(LOGIN, json=lambda req, ctx: _token(next(tokens)))
        send = mock.post(SEND, status_code=201, json={"id": "act-1"})
        barrier = threading.Barrier(16)
        errors: list[BaseException] = []

        def worker() -> None:
            try:
                barrier.wait(timeout=5)
                client.send_to_conversation(
                    conversation_id="19:abc@thread.tacv2", body={"type": "message", "text": "hi"}
                )
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert errors == [] and send.call_count == 16
        assert login.call_count == 1
        assert {r.headers["Authorization"] for r in send.request_history} == {"Bearer tok-1"}
        # the connector rejects the token: the client drops it, fetches a new one, retries once
        mock.post(
            SEND,
            [
                {"status_code": 401, "json": {"error": {"code": "Unauthorized", "message": "x"}}},
                {"status_code": 201, "json": {"id": "act-2"}},
            ],
        )
        client.send_to_conversation(
            conversation_id="19:abc@thread.tacv2", body={"type": "message", "text": "again"}
        )
        assert login.call_count == 2
        assert mock.request_history[-1].headers["Authorization"] == "Bearer tok-2"


def test_fixed_token_still_works() -> None:
    client = MsteamsClient(token="fixed")
    with rm.Mocker() as mock:
        send = mock.post(SEND, status_code=201, json={"id": "act-1"})
        client.send_to_conversation(
            conversation_id="19:abc@thread.tacv2", body={"type": "message", "text": "hi"}
        )
        assert send.last_request.headers["Authorization"] == "Bearer fixed"
