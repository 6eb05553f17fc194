"""Slack uploads (issue 25, outbound): ``files.getUploadURLExternal`` with the file's
name and length, the bytes POSTed to the returned URL as a multipart ``filename`` part
without the bot token, then ``files.completeUploadExternal`` sharing the file id in the
channel's thread with the caption; an upload URL on another host is refused before a
byte is sent; a 5xx from the upload URL is a retryable error."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests_mock
from channelkit.attachments import outbound_source
from channelkit.core import SessionTarget
from channelkit.errors import AttachmentRefused, ServerError
from channelkit.http import RetryPolicy
from channelkit.platforms.slack.api import SlackApi
from channelkit.platforms.slack.files import upload
from channelkit.playground.bot_files import parse_multipart

API = "https://slack.test/api"
TOKEN = "xoxb-test-token"
PDF = b"%PDF-1.7\n" + b"slack " * 500


def _api() -> SlackApi:
    return SlackApi(TOKEN, base_url=API, retry=RetryPolicy(max_attempts=1))


def _mock(mock: requests_mock.Mocker, upload_url: str, status: int = 200) -> dict[str, Any]:
    routes = {
        "url": mock.post(
            f"{API}/files.getUploadURLExternal",
            json={"ok": True, "upload_url": upload_url, "file_id": "F0123"},
        ),
        "complete": mock.post(
            f"{API}/files.completeUploadExternal", json={"ok": True, "files": [{"id": "F0123"}]}
        ),
    }
    if upload_url.startswith("https://files.slack.com"):
        routes["bytes"] = mock.post(upload_url, status_code=status, text="OK")
    return routes


def test_the_three_steps_carry_the_name_length_bytes_and_the_share() -> None:
    file = outbound_source(PDF, ".", name="report.pdf")
    target = SessionTarget("sl", "U1", "C42", "1700000000.000100", is_group=True)
    with requests_mock.Mocker() as mock:
        routes = _mock(mock, "https://files.slack.com/upload/v1/abc")
        assert upload(_api(), target, file, caption="Q3 report") == "F0123"  # type: ignore[arg-type]
    assert routes["url"].last_request.json() == {"filename": "report.pdf", "length": len(PDF)}
    sent = routes["bytes"].last_request
    assert "Authorization" not in sent.headers  # the pre-signed URL gets no token
    data = sent.body.read() if hasattr(sent.body, "read") else sent.body
    _, parts = parse_multipart(data, sent.headers["Content-Type"])
    assert parts["filename"].name == "report.pdf" and parts["filename"].data == PDF
    assert routes["complete"].last_request.json() == {
        "files": [{"id": "F0123", "title": "report.pdf"}],
        "channel_id": "C42",
        "thread_ts": "1700000000.000100",
        "initial_comment": "Q3 report",
    }
    assert json.loads(routes["complete"].last_request.body)["channel_id"] == "C42"


def test_an_upload_url_on_another_host_is_refused_before_the_bytes_go() -> None:
    file = outbound_source(PDF, ".", name="report.pdf")
    with requests_mock.Mocker() as mock:
        routes = _mock(mock, "https://attacker.example/upload")
        with pytest.raises(AttachmentRefused):
            upload(_api(), SessionTarget("sl", "U1", "C42"), file)  # type: ignore[arg-type]
        assert routes["complete"].call_count == 0
        assert [r.url for r in mock.request_history] == [f"{API}/files.getUploadURLExternal"]


def test_a_server_error_from_the_upload_url_is_retryable() -> None:
    file = outbound_source(PDF, ".", name="report.pdf")
    with requests_mock.Mocker() as mock:
        routes = _mock(mock, "https://files.slack.com/upload/v1/abc", status=503)
        with pytest.raises(ServerError) as raised:
            upload(_api(), SessionTarget("sl", "U1", "C42"), file)  # type: ignore[arg-type]
        assert raised.value.retryable
        assert routes["complete"].call_count == 0
