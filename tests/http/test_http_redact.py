"""Secrets and tokens stay out of logs."""

from __future__ import annotations

import logging

from channelkit.http.redact import (
    RedactingFilter,
    redact_fields,
    redact_headers,
    redact_text,
    redact_url,
)


def test_headers_fields_and_urls() -> None:
    headers = redact_headers(
        {"Authorization": "Bearer x", "x-acs-dingtalk-access-token": "t", "Accept": "a"},
        extra=["X-Mine"],
    )
    assert headers == {"Authorization": "***", "x-acs-dingtalk-access-token": "***", "Accept": "a"}
    body = redact_fields(
        {"appKey": "k", "appSecret": "s", "nested": [{"app_secret": "s2", "ok": 1}]}
    )
    assert body == {"appKey": "***", "appSecret": "***", "nested": [{"app_secret": "***", "ok": 1}]}
    assert (
        redact_url("https://api.telegram.org/bot123:ABC/sendMessage")
        == "https://api.telegram.org/bot***/sendMessage"
    )
    assert (
        redact_url("https://oapi.dingtalk.com/gettoken?appkey=k&appsecret=s")
        == "https://oapi.dingtalk.com/gettoken?appkey=k&appsecret=***"
    )
    assert redact_text("token abcd1234 twice abcd1234", ["abcd1234"]) == "token *** twice ***"


def test_filter_scrubs_registered_values() -> None:
    flt = RedactingFilter(maxsize=2)
    flt.add("first-secret")
    flt.add("second-secret")
    flt.add("third-secret")  # the oldest is forgotten: the filter is bounded
    record = logging.LogRecord(
        "x", logging.INFO, __file__, 1, "got %s and %s", ("second-secret", "third-secret"), None
    )
    assert flt.filter(record)
    assert record.getMessage() == "got *** and ***"
