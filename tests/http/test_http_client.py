"""BaseClient behaviour through the generated fixture client (tests/codegen/fixtures/acme.json)."""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from email.utils import format_datetime
from types import ModuleType
from typing import Any

import pytest
import requests
import requests_mock as rm
from channelkit.errors import (
    ConfigurationError,
    DeserializationError,
    RateLimited,
    ServerError,
    TransportError,
)
from channelkit.http.retry import RetryPolicy

API = "https://api.acme.test"
NOW = 1_800_000_000.0
BODY = {"outTrackId": "t1", "cardData": {"cardParamMap": {"k": "v"}}}


class Sleeps(list):  # type: ignore[type-arg]
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def _client(acme: ModuleType, sleeps: Sleeps | None = None, **kw: Any) -> Any:
    policy = RetryPolicy(
        max_attempts=kw.pop("max_attempts", 4),
        sleep=sleeps if sleeps is not None else Sleeps(),
        clock=lambda: NOW,
        jitter=lambda: 0.0,
    )
    kw.setdefault("token", "tok")
    return acme.AcmeClient(retry=policy, **kw)


def test_get_request_shape(acme: ModuleType) -> None:
    client = _client(acme)
    with rm.Mocker() as m:
        get = m.get(API + "/v1.0/cards/c%2F1", json={"cardId": "c/1", "color": "purple", "new": 1})
        card = client.get_card(
            card_id="c/1", view=acme.GetCardView.BRIEF, page_size=5, verbose=False, x_trace="tr"
        )
    req = get.last_request
    assert req.qs == {"view": ["brief"], "pagesize": ["5"], "verbose": ["false"]}
    assert req.headers["x-trace"] == "tr" and req.headers["x-acme-token"] == "tok"
    assert req.timeout == (3.05, 10.0)
    assert card.card_id == "c/1" and card.color == "purple" and card.extra_fields == {"new": 1}


def test_5xx_is_retried_with_backoff_for_idempotent_calls(acme: ModuleType) -> None:
    sleeps = Sleeps()
    client = _client(acme, sleeps)
    with rm.Mocker() as m:
        put = m.put(
            API + "/v1.0/cards/c1",
            [{"status_code": 503}, {"status_code": 502}, {"json": {"success": True}}],
        )
        assert client.update_card(card_id="c1", body={"cardId": "c1"}).success is True
    assert put.call_count == 3
    assert sleeps == [0.25, 0.5]


def test_gives_up_after_max_attempts(acme: ModuleType) -> None:
    sleeps = Sleeps()
    client = _client(acme, sleeps, max_attempts=3)
    with rm.Mocker() as m:
        put = m.put(
            API + "/v1.0/cards/c1", status_code=500, json={"code": "Oops", "message": "down"}
        )
        with pytest.raises(ServerError) as caught:
            client.update_card(card_id="c1", body={"cardId": "c1"})
    assert put.call_count == 3 and len(sleeps) == 2
    assert caught.value.code == "Oops"


def test_retry_after_http_date_uses_the_injected_clock(acme: ModuleType) -> None:
    sleeps = Sleeps()
    client = _client(acme, sleeps)
    when = format_datetime(datetime.fromtimestamp(NOW + 4, tz=timezone.utc), usegmt=True)
    with rm.Mocker() as m:
        m.post(
            API + "/v1.0/cards/c1/ping",
            [{"status_code": 429, "headers": {"Retry-After": when}}, {"json": {}}],
        )
        client.ping_card(card_id="c1")
    assert sleeps == [4.0]


def test_retry_after_beyond_the_cap_is_raised_not_slept(acme: ModuleType) -> None:
    sleeps = Sleeps()
    client = _client(acme, sleeps)
    with rm.Mocker() as m:
        ping = m.post(API + "/v1.0/cards/c1/ping", status_code=429, headers={"Retry-After": "3600"})
        with pytest.raises(RateLimited) as caught:
            client.ping_card(card_id="c1")
    assert ping.call_count == 1 and sleeps == [] and caught.value.retry_after == 3600.0


def test_post_without_idempotent_mark_is_never_retried(acme: ModuleType) -> None:
    sleeps = Sleeps()
    client = _client(acme, sleeps)
    with rm.Mocker() as m:
        for failure in (
            {"status_code": 503},
            {"status_code": 429, "headers": {"Retry-After": "1"}},
            {"exc": requests.ConnectionError},
            {"exc": requests.ReadTimeout},
        ):
            deliver = m.post(API + "/v1.0/cards/deliver", [failure])
            with pytest.raises((ServerError, RateLimited, TransportError)):
                client.deliver_card(body=BODY)
            assert deliver.call_count == 1
    assert sleeps == []


def test_connection_errors_are_retried_and_mapped(acme: ModuleType) -> None:
    sleeps = Sleeps()
    client = _client(acme, sleeps)
    with rm.Mocker() as m:
        get = m.get(
            API + "/v1.0/cards/c1",
            [
                {"exc": requests.ConnectionError},
                {"exc": requests.ConnectTimeout},
                {"json": {"cardId": "c1"}},
            ],
        )
        assert client.get_card(card_id="c1", view="full").card_id == "c1"
        assert get.call_count == 3
        m.get(API + "/v1.0/cards/c1", exc=requests.ReadTimeout)
        with pytest.raises(TransportError) as caught:
            client.get_card(card_id="c1", view="full")
    assert caught.value.timeout is True
    assert "read timeout" in str(caught.value)


def test_missing_or_wrong_typed_parameter_fails_before_the_network(acme: ModuleType) -> None:
    client = _client(acme)
    with rm.Mocker() as m:
        with pytest.raises(TypeError, match="card_id"):
            client.get_card(view="full")
        with pytest.raises(ConfigurationError) as caught:
            client.get_card(card_id="c1", view="full", page_size="ten")
        assert caught.value.path == "page_size"
        with pytest.raises(ConfigurationError) as caught:
            client.get_card(card_id=7, view="full")
        assert caught.value.path == "card_id"
        with pytest.raises(ConfigurationError) as caught:
            client.deliver_card(
                body=acme.DeliverRequest(out_track_id=5, card_data=acme.CardData(card_param_map={}))
            )
        assert caught.value.path == "body.outTrackId"
        with pytest.raises(ConfigurationError) as caught:
            client.deliver_card(body=None)
        assert caught.value.path == "body"
        with pytest.raises(ConfigurationError) as caught:
            client.deliver_card(body=["not", "a", "dict"])
        assert caught.value.path == "body"
        assert m.call_count == 0


def test_validate_checks_the_body_against_the_schema(acme: ModuleType) -> None:
    client = _client(acme, validate=True)
    with rm.Mocker() as m:
        m.post(API + "/v1.0/cards/deliver", json={"success": True})
        with pytest.raises(ConfigurationError) as caught:
            client.deliver_card(body={"outTrackId": "t"})
        assert "cardData" in str(caught.value)
        with pytest.raises(ConfigurationError) as caught:
            client.deliver_card(body={**BODY, "outTrackId": "x" * 65})
        assert caught.value.path == "body.outTrackId"
        with pytest.raises(ConfigurationError) as caught:
            client.deliver_card(body={**BODY, "cardData": {"cardParamMap": {"k": 1}}})
        assert caught.value.path == "body.cardData.cardParamMap.k"
        assert m.call_count == 0
        client.deliver_card(body={**BODY, "note": None, "legacyNote": None})
        assert m.last_request.json()["note"] is None


def test_unset_is_not_sent_but_none_is(acme: ModuleType) -> None:
    client = _client(acme)
    body = acme.DeliverRequest(
        out_track_id="t", card_data=acme.CardData(card_param_map={}), note=None, from_="me"
    )
    with rm.Mocker() as m:
        m.post(API + "/v1.0/cards/deliver", json={})
        client.deliver_card(body=body)
        assert m.last_request.json() == {
            "outTrackId": "t",
            "cardData": {"cardParamMap": {}},
            "note": None,
            "from": "me",
        }


def test_response_that_breaks_the_schema_names_the_path(acme: ModuleType) -> None:
    client = _client(acme)
    with rm.Mocker() as m:
        m.post(
            API + "/v1.0/cards/deliver",
            json={"result": {"outTrackId": "t", "deliverResults": [{"success": "yes"}]}},
        )
        with pytest.raises(DeserializationError) as caught:
            client.deliver_card(body=BODY)
        assert caught.value.path == "result.deliverResults[0].success"
        m.post(API + "/v1.0/cards/deliver", text="<html>oops</html>")
        with pytest.raises(DeserializationError):
            client.deliver_card(body=BODY)


def test_base_url_server_urls_and_timeout_overrides(acme: ModuleType) -> None:
    local = _client(acme, base_url="http://127.0.0.1:8080/acme/", timeout=(1.0, 2.0))
    legacy = _client(acme, server_urls={"legacy": "http://127.0.0.1:9"})
    with rm.Mocker() as m:
        a = m.get("http://127.0.0.1:8080/acme/v1.0/cards/c1", json={"cardId": "c1"})
        local.get_card(card_id="c1", view="full")
        local.get_card(card_id="c1", view="full", timeout=0.5)
        b = m.get("http://127.0.0.1:9/gettoken", json={"errcode": 0, "access_token": "x"})
        legacy.get_legacy_token(appkey="k", appsecret="s")
        c = m.get("https://api.acme.test/v1.0/cards/c1", json={"cardId": "c1"})
        legacy.get_card(card_id="c1", view="full")
    assert [r.timeout for r in a.request_history] == [(1.0, 2.0), (0.5, 0.5)]
    assert b.call_count == 1 and "x-acme-token" not in b.last_request.headers
    assert c.call_count == 1
    with pytest.raises(ConfigurationError) as caught:
        _client(acme, server_urls={"nope": "http://x"})
    assert caught.value.path == "server_urls.nope"
    with pytest.raises(ConfigurationError):
        _client(acme, timeout=(0, 5))


def test_missing_credentials_are_named(acme: ModuleType) -> None:
    client = acme.AcmeClient()
    with pytest.raises(ConfigurationError) as caught:
        client.get_card(card_id="c1", view="full")
    assert caught.value.path == "app_key"
    with pytest.raises(ConfigurationError) as caught:
        acme.AcmeClient(app_key="only")
    assert caught.value.path == "app_secret"


def test_shared_session_pool_is_sized_to_workers(acme: ModuleType) -> None:
    client = acme.AcmeClient(token="t", max_workers=32)
    adapter = client._transport.session.get_adapter("https://api.acme.test")
    assert adapter._pool_maxsize == 32
    shared = requests.Session()
    other = acme.AcmeClient(token="t", session=shared)
    assert other._transport.session is shared
    other.close()
    client.close()


def test_logs_never_contain_tokens(acme: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    client = _client(acme, token="SUPERSECRETTOKEN")
    caplog.set_level(logging.DEBUG, logger="channelkit")
    with rm.Mocker() as m:
        m.get(API + "/v1.0/cards/c1", [{"status_code": 503}, {"json": {"cardId": "c1"}}])
        client.get_card(card_id="c1", view="full")
        m.get("https://oapi.acme.test/gettoken", json={"errcode": 0})
        client.get_legacy_token(appkey="k", appsecret="TOPSECRETVALUE")
    assert caplog.records
    assert "SUPERSECRETTOKEN" not in caplog.text and "TOPSECRETVALUE" not in caplog.text
