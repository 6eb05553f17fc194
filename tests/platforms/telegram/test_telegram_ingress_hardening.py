"""Hostile input on the Telegram webhook: JSON, redeliveries, fuzzing."""

from __future__ import annotations

import json
from typing import Any

from channelkit.ingress import Headers, IngressRequest
from channelkit.platforms.telegram.ingress import SECRET_HEADER, TelegramWebhook
from channelkit.testing import ScriptedBridge, final
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.platforms.telegram.tg_env import CHAT, OWNER, SECRET, Env

FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _request(body: bytes, headers: dict[str, str]) -> IngressRequest:
    return IngressRequest("POST", "/telegram/webhook", Headers(headers), body)


def test_deeply_nested_json_is_400_not_an_exception() -> None:
    seen: list[Any] = []
    hook = TelegramWebhook("right", lambda update: seen.append(update))
    for body in (b"[" * 100_000 + b"]" * 100_000, b'{"update_id":' * 50_000, b"\xff\xfe"):
        assert hook(_request(body, {SECRET_HEADER: "right"})).status == 400
    assert seen == []


def test_a_redelivered_update_runs_once(rt, mock) -> None:  # type: ignore[no-untyped-def]
    bridge = ScriptedBridge([final("ok")])
    env = Env(rt, mock, bridge)
    update = {
        "update_id": 777,
        "message": {
            "message_id": 5,
            "date": 0,
            "chat": {"id": CHAT, "type": "private"},
            "from": {"id": OWNER, "is_bot": False, "first_name": "o"},
            "text": "hello",
        },
    }
    assert env.post(update) == 200
    assert bridge.wait_prompt(1)
    env.settle()
    assert env.post(update) == 200  # Telegram redelivers when it missed the ACK
    env.settle()
    assert len(bridge.prompts) == 1


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=20,
)
_updates = st.fixed_dictionaries(
    {"update_id": st.integers(min_value=0, max_value=10**6)},
    optional={
        "message": _json,
        "callback_query": st.fixed_dictionaries(
            {"id": st.text(max_size=5), "from": _json}, optional={"data": _json, "message": _json}
        ),
    },
)
_bodies = st.one_of(
    st.binary(max_size=300),
    _json.map(lambda v: json.dumps(v).encode()),
    _updates.map(lambda v: json.dumps(v).encode()),
)
_secrets = st.one_of(st.none(), st.text(max_size=30), st.just(SECRET + "x"), st.just(SECRET[:-1]))


def test_fuzz_webhook_never_fails_and_a_wrong_secret_changes_nothing(rt, mock) -> None:  # type: ignore[no-untyped-def]
    bridge = ScriptedBridge([])
    env = Env(rt, mock, bridge)

    @FUZZ
    @given(body=_bodies, secret=_secrets)
    def wrong_secret(body: bytes, secret: str | None) -> None:
        headers = {} if secret is None else {SECRET_HEADER: secret}
        response = env.route.handler(_request(body, headers))
        assert response.status == 401 and not response.after
        assert len(env.channel._seen_updates) == 0 and not mock.request_history

    @FUZZ
    @given(body=_bodies)
    def right_secret(body: bytes) -> None:
        response = env.route.handler(_request(body, {SECRET_HEADER: SECRET}))
        assert response.status in (200, 400)
        if response.status == 400:
            assert not response.after

    wrong_secret()
    right_secret()
    assert bridge.prompts == []  # nothing ran: no ``after`` was executed
