"""Slack Events API ingress: signatures, url_verification, retries, which events run."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import requests_mock as rm
from channelkit.testing import ScriptedBridge, chunk

from tests.platforms.slack.slack_env import CHANNEL, SECRET, Env, called, mock_web_api


@pytest.fixture
def env(rt) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    with rm.Mocker() as m:
        mock_web_api(m)
        e = Env(rt, m, ScriptedBridge([chunk("ok"), called(m, "chat.startStream")]))
        yield e
        e.channel.close(2.0)


def test_url_verification_is_answered_with_its_challenge(env: Env) -> None:
    body = json.dumps({"type": "url_verification", "challenge": "c-123"}).encode()
    response = env.respond(env.request(body))
    assert response.status == 200
    assert json.loads(response.body) == {"challenge": "c-123"}


def test_wrong_secret_stale_timestamp_and_missing_signature_are_refused(env: Env) -> None:
    body = env.event_body("hello")
    now = int(env.rt.clock.time())
    assert env.respond(env.request(body, secret="not-the-secret")).status == 401
    assert env.respond(env.request(body, timestamp=now - 301)).status == 401
    assert env.respond(env.request(body, timestamp=now + 301)).status == 401
    unsigned = env.request(body)
    del_headers = {k: v for k, v in unsigned.headers.items() if k != "X-Slack-Signature"}
    from channelkit.ingress import Headers, IngressRequest

    bare = IngressRequest("POST", unsigned.path, Headers(del_headers), body)
    assert env.respond(bare).status == 401
    env.settle()
    assert env.bridge.prompts == []


def test_a_signature_is_accepted_once(env: Env) -> None:
    request = env.request(env.event_body("hello"))
    assert env.post(request).status == 200
    assert env.respond(request).status == 401  # the same signed request again
    env.settle()
    assert len(env.bridge.prompts) == 1


def test_body_tampered_after_signing_is_refused(env: Env) -> None:
    request = env.request(env.event_body("hello"))
    from channelkit.ingress import IngressRequest

    forged = IngressRequest("POST", request.path, request.headers, request.body + b" ")
    assert env.respond(forged).status == 401


def test_retries_of_one_event_id_start_one_run(env: Env) -> None:
    body = env.event_body("hello", event_id="Ev42")
    first = env.post(env.request(body))
    env.rt.clock.advance(1)  # a retry is signed again, at its own time
    retry = env.post(env.request(body, extra={"X-Slack-Retry-Num": "1"}))
    assert first.status == retry.status == 200
    env.settle()
    assert [text for _, text in env.bridge.prompts] == ["hello"]


def test_the_ack_comes_before_any_work(env: Env) -> None:
    response = env.respond(env.request(env.event_body("hello")))
    assert response.status == 200
    env.settle()
    assert env.bridge.prompts == [] and env.calls() == []  # nothing until after the ACK
    response.run_after()
    env.settle()
    assert [text for _, text in env.bridge.prompts] == ["hello"]


def test_bot_messages_subtypes_and_unmentioned_channel_messages_start_nothing(env: Env) -> None:
    def envelope(event: dict[str, object], n: int) -> bytes:
        return json.dumps({"type": "event_callback", "event_id": f"Ex{n}", "event": event}).encode()

    base = {"type": "message", "user": "U1", "text": "hi", "channel": "D1", "ts": "1.1"}
    events = [
        {**base, "bot_id": "B1"},
        {**base, "subtype": "message_changed"},
        {**base, "channel": CHANNEL, "channel_type": "channel"},  # no mention
        {**base, "text": ""},
    ]
    for n, event in enumerate(events):
        assert env.post(env.request(envelope(event, n))).status == 200
    env.settle()
    assert env.bridge.prompts == []


def test_a_channel_mention_runs_without_the_mention_in_a_new_thread(env: Env) -> None:
    env.message("what is up", channel=CHANNEL)
    env.settle()
    assert [text for _, text in env.bridge.prompts] == ["what is up"]
    started = env.bodies("chat.startStream")
    assert started and started[0]["thread_ts"].startswith("1699999999.")
    assert started[0]["recipient_user_id"] == "U0OWNER"
    assert started[0]["recipient_team_id"] == "T0TEAM"


def test_signing_secret_never_appears_in_logs(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG")
    env.respond(env.request(env.event_body("x"), secret="wrong"))
    env.message("hello")
    env.settle()
    assert SECRET not in caplog.text and "xoxb-test-token" not in caplog.text
