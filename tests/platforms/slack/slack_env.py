"""The Slack adapter test environment: a real SlackChannel on a Web API mock."""

from __future__ import annotations

import itertools
import json
import threading
from typing import Any
from urllib.parse import urlencode

import requests_mock as rm
from channelkit.core import ChannelConfig
from channelkit.http import RetryPolicy
from channelkit.ingress import Headers, IngressRequest, IngressResponse
from channelkit.platforms.slack import SlackChannel, SlackConfig
from channelkit.platforms.slack.api import SlackApi
from channelkit.platforms.slack.ingress import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign
from channelkit.testing import WAIT, ScriptedBridge, Step, wait_until

from tests.platforms._shared import LifecycleLog

BASE = "http://127.0.0.1:9/api"
TOKEN = "xoxb-test-token"
SECRET = "signing-secret-for-tests"
OWNER = "U0OWNER"
STRANGER = "U0OTHER"
DM = "D0DM"
CHANNEL = "C0CHAN"
TEAM = "T0TEAM"
METHODS = (
    "chat.postMessage",
    "chat.update",
    "chat.postEphemeral",
    "chat.startStream",
    "chat.appendStream",
    "chat.stopStream",
    "assistant.threads.setStatus",
)
STREAM_CALLS = ("chat.startStream", "chat.appendStream", "chat.stopStream")


class RecordingSlack(LifecycleLog, SlackChannel):
    """SlackChannel that also records its lifecycle events."""


def mock_web_api(m: rm.Mocker, refuse: tuple[str, ...] = ()) -> None:
    """Every method answers ok with a fresh ``ts``; ``refuse`` answers ``{ok: false}``."""
    ts = itertools.count(1)
    lock = threading.Lock()

    def answer(request: Any, context: Any) -> dict[str, Any]:
        method = request.path.rsplit("/", 1)[-1]
        if any(method == r.lower() for r in refuse):
            return {"ok": False, "error": "not_allowed"}
        with lock:
            return {"ok": True, "ts": f"1700000000.{next(ts):06d}", "channel": "X"}

    for method in METHODS:
        m.post(f"{BASE}/{method}", json=answer)


def called(mock: rm.Mocker, *methods: str) -> Step:
    """A script step that waits (bounded) until the Web API saw one of ``methods``.

    A segment's first write is queued on the stream lane; a run that ends before a
    worker picked it up shows its text in one posted message instead (correct, but not
    what a streaming test is about). A test of streaming therefore holds the run here
    until its first write was made.
    """
    wanted = {f"/{m.lower()}" for m in methods}

    def step(ctx: Any) -> None:
        wait_until(
            lambda: any(r.path.endswith(tuple(wanted)) for r in list(mock.request_history)),
            WAIT,
            what=f"a call to {' or '.join(methods)}",
        )

    return step


class Env:
    def __init__(self, rt: Any, mock: rm.Mocker, bridge: ScriptedBridge, **cfg: Any) -> None:
        self.rt = rt
        self.mock = mock
        self.bridge = bridge
        config = SlackConfig(bot_token=TOKEN, signing_secret=SECRET, api_base_url=BASE, **cfg)
        api = SlackApi(TOKEN, base_url=BASE, retry=RetryPolicy.never())
        self.channel = RecordingSlack(
            config,
            bridge,
            channel_config=ChannelConfig(name="slack", max_workers=8),
            api=api,
            executor=rt.pool,
            run_executor=rt.run_pool,
            scheduler=rt.scheduler,
            clock=rt.clock,
        )
        # The fake clock stands still unless a test moves it: a post past the channel's
        # burst would hold a worker for real seconds waiting for its token (a run whose
        # text goes out as posts rather than a stream makes more of them). The pacing
        # has its own tests.
        self.channel.outbound_pacer.enabled = False
        self.route = self.channel.ingress_routes()[0]
        self.ids = itertools.count(1)

    # -- Web API record ------------------------------------------------------------------
    def calls(self, *methods: str) -> list[tuple[str, dict[str, Any]]]:
        wanted = {m.lower() for m in methods}
        out = []
        for r in self.mock.request_history:
            method = r.path.rsplit("/", 1)[-1]
            if not wanted or method in wanted:
                out.append((method, r.json()))
        return out

    def bodies(self, method: str) -> list[dict[str, Any]]:
        return [body for _, body in self.calls(method)]

    # -- signed requests ---------------------------------------------------------------
    def request(
        self,
        body: bytes,
        *,
        form: bool = False,
        timestamp: int | None = None,
        secret: str = SECRET,
        extra: dict[str, str] | None = None,
    ) -> IngressRequest:
        ts = str(int(self.rt.clock.time()) if timestamp is None else timestamp)
        headers = {
            TIMESTAMP_HEADER: ts,
            SIGNATURE_HEADER: sign(secret, ts, body),
            "Content-Type": "application/x-www-form-urlencoded" if form else "application/json",
            **(extra or {}),
        }
        return IngressRequest(
            method="POST", path=self.route.path, headers=Headers(headers), body=body
        )

    def respond(self, request: IngressRequest) -> IngressResponse:
        return self.route.handler(request)

    def post(self, request: IngressRequest) -> IngressResponse:
        """Like the web layer: the ACK, then its deferred work."""
        response = self.respond(request)
        response.run_after()
        return response

    def event_body(
        self, text: str, *, user: str = OWNER, channel: str = DM, event_id: str | None = None
    ) -> bytes:
        n = next(self.ids)
        mention = not channel.startswith("D")
        event: dict[str, Any] = {
            "type": "app_mention" if mention else "message",
            "user": user,
            "text": f"<@U0BOT> {text}" if mention else text,
            "channel": channel,
            "channel_type": "channel" if mention else "im",
            "ts": f"1699999999.{n:06d}",
        }
        return json.dumps(
            {
                "type": "event_callback",
                "team_id": TEAM,
                "event_id": event_id or f"Ev{n:04d}",
                "event": event,
            }
        ).encode()

    def message(self, text: str, **kw: Any) -> IngressResponse:
        return self.post(self.request(self.event_body(text, **kw)))

    def action_body(
        self,
        action_id: str,
        value: str,
        *,
        user: str = OWNER,
        message_ts: str | None = None,
        values: dict[str, Any] | None = None,
    ) -> bytes:
        payload: dict[str, Any] = {
            "type": "block_actions",
            "user": {"id": user},
            "channel": {"id": DM},
            "container": {"type": "message", "message_ts": message_ts},
            "actions": [{"action_id": action_id, "value": value}],
            "state": {"values": values or {}},
        }
        return urlencode({"payload": json.dumps(payload)}).encode()

    def click(self, action_id: str, value: str, **kw: Any) -> IngressResponse:
        return self.post(self.request(self.action_body(action_id, value, **kw), form=True))

    def settle(self) -> None:
        self.rt.settle()
