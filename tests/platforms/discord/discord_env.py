"""The Discord adapter test environment: a real DiscordChannel on a REST mock, fed
Gateway dispatches (`DiscordChannel.dispatch`) and signed interaction requests."""

from __future__ import annotations

import itertools
import json
import re
import threading
from typing import Any

import requests_mock as rm
from channelkit.core import ChannelConfig
from channelkit.ingress import Headers, IngressRequest, IngressResponse
from channelkit.platforms.discord import DiscordChannel, DiscordConfig
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from tests.platforms._shared import LifecycleLog

BASE = "http://127.0.0.1:9/api/v10"
TOKEN = "discord-test-bot-token"
APP_ID = "1100000000000000001"
OWNER = "2200000000000000001"
STRANGER = "2200000000000000002"
DM = "3300000000000000001"
GUILD = "4400000000000000001"
GUILD_CHANNEL = "3300000000000000002"
THREAD = "3300000000000000003"

_MESSAGES = re.compile(r"/channels/(\d+)/messages$")
_MESSAGE = re.compile(r"/channels/(\d+)/messages/(\d+)$")


class RecordingDiscord(LifecycleLog, DiscordChannel):
    """DiscordChannel that also records its lifecycle events."""


class Env:
    """A channel on a mocked Discord REST API; `calls()` lists what it sent."""

    def __init__(
        self,
        rt: Any,
        mock: rm.Mocker,
        bridge: Any,
        *,
        store: Any = None,
        access: Any = None,
        locale: str | None = None,
        **cfg: Any,
    ) -> None:
        self.rt = rt
        self.mock = mock
        self.bridge = bridge
        self.key = Ed25519PrivateKey.generate()
        public = self.key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()
        cfg.setdefault("public_key", public)
        config = DiscordConfig(bot_token=TOKEN, application_id=APP_ID, api_base_url=BASE, **cfg)
        self.ids = itertools.count(5_000_000_000_000_000_001)
        self._lock = threading.Lock()
        self._mock_rest()
        self.channel = RecordingDiscord(
            config,
            bridge,
            channel_config=ChannelConfig(
                name="discord",
                max_workers=8,
                locale=locale,
                **({"access": access} if access else {}),
            ),
            executor=rt.pool,
            run_executor=rt.run_pool,
            scheduler=rt.scheduler,
            clock=rt.clock,
            store=store,
        )
        self.routes = self.channel.ingress_routes()

    def next_id(self) -> str:
        with self._lock:
            return str(next(self.ids))

    def _mock_rest(self) -> None:
        def created(request: Any, context: Any) -> dict[str, Any]:
            match = _MESSAGES.search(request.path)
            return {"id": self.next_id(), "channel_id": match.group(1) if match else ""}

        def edited(request: Any, context: Any) -> dict[str, Any]:
            match = _MESSAGE.search(request.path)
            assert match is not None
            return {"id": match.group(2), "channel_id": match.group(1)}

        m = self.mock
        m.post(re.compile(r".*/channels/\d+/messages$"), json=created)
        m.patch(re.compile(r".*/channels/\d+/messages/\d+$"), json=edited)
        m.post(re.compile(r".*/channels/\d+/typing$"), status_code=204)
        m.put(re.compile(r".*/channels/\d+/messages/pins/\d+$"), status_code=204)
        m.post(re.compile(r".*/interactions/\d+/[^/]+/callback$"), status_code=204)
        m.post(re.compile(r".*/webhooks/\d+/[^/]+$"), json=created)

    def tick(self, seconds: float) -> None:
        """Move fake time while a run may still be working, then wait (bounded) until
        the hook pool ran what came due."""
        self.rt.clock.advance(seconds)
        assert self.rt.pool.wait_idle(10.0)

    # -- what the channel sent -------------------------------------------------------------
    def calls(self, method: str | None = None, suffix: str = "") -> list[tuple[str, str, Any]]:
        """`(method, path, json body)` of every REST call, optionally filtered."""
        out = []
        for r in list(self.mock.request_history):
            if method is not None and r.method != method:
                continue
            if suffix and not re.search(suffix, r.path):
                continue
            body = r.json() if r.body else None
            out.append((r.method, r.path, body))
        return out

    def posts(self, channel: str | None = None) -> list[dict[str, Any]]:
        """Bodies of the messages posted (in `channel`)."""
        where = channel or r"\d+"
        pattern = f"/channels/{where}/messages$"
        return [body for _, _, body in self.calls("POST", pattern)]

    def edits(self) -> list[tuple[str, dict[str, Any]]]:
        """`(message id, body)` of every edit."""
        return [
            (path.rsplit("/", 1)[1], body)
            for _, path, body in self.calls("PATCH", r"/channels/\d+/messages/\d+$")
        ]

    def callbacks(self) -> list[dict[str, Any]]:
        """Bodies of the interaction responses sent over REST (Gateway interactions)."""
        return [body for _, _, body in self.calls("POST", r"/callback$")]

    # -- what the person does --------------------------------------------------------------
    def message(
        self,
        text: str,
        *,
        user: str = OWNER,
        channel: str = DM,
        mention: bool = False,
        message_id: str | None = None,
        reply_to_bot: bool = False,
    ) -> str:
        """A `MESSAGE_CREATE` dispatch (a guild message when `channel` is not the DM);
        returns the message id."""
        message_id = message_id or self.next_id()
        data: dict[str, Any] = {
            "id": message_id,
            "channel_id": channel,
            "author": {"id": user, "username": f"user{user[-1]}"},
            "content": f"<@{APP_ID}> {text}" if mention else text,
            "mentions": [{"id": APP_ID}] if mention else [],
            "type": 0,
        }
        if channel != DM:
            data["guild_id"] = GUILD
        if reply_to_bot:
            data["type"] = 19
            data["referenced_message"] = {"id": self.next_id(), "author": {"id": APP_ID}}
        self.channel.dispatch("MESSAGE_CREATE", data)
        return message_id

    def component_payload(
        self,
        custom_id: str,
        *,
        user: str = OWNER,
        channel: str = DM,
        message_id: str | None = None,
        values: list[str] | None = None,
        modal: dict[str, str] | None = None,
        locale: str | None = None,
    ) -> dict[str, Any]:
        """An interaction payload (``locale``: the clicking person's client language,
        as Discord sends it; None: left out)."""
        data: dict[str, Any] = {"custom_id": custom_id, "component_type": 2}
        if values is not None:
            data["values"] = values
            data["component_type"] = 3
        if modal is not None:
            data = {
                "custom_id": custom_id,
                "components": [
                    {"type": 1, "components": [{"type": 4, "custom_id": k, "value": v}]}
                    for k, v in modal.items()
                ],
            }
        payload: dict[str, Any] = {
            "id": self.next_id(),
            "token": f"interaction-token-{self.next_id()}",
            "type": 5 if modal is not None else 3,
            "application_id": APP_ID,
            "channel_id": channel,
            "channel": {"id": channel, "type": 1 if channel == DM else 0},
            "data": data,
        }
        if locale is not None:
            payload["locale"] = locale
        if message_id is not None:
            payload["message"] = {"id": message_id, "channel_id": channel}
        if channel == DM:
            payload["user"] = {"id": user, "username": "someone"}
        else:
            payload["guild_id"] = GUILD
            payload["member"] = {"user": {"id": user, "username": "someone"}}
        return payload

    def click_over_gateway(self, custom_id: str, **kw: Any) -> None:
        """An `INTERACTION_CREATE` dispatch (its response goes to the callback route)."""
        self.channel.dispatch("INTERACTION_CREATE", self.component_payload(custom_id, **kw))

    def signed(self, custom_id: str, *, key: Any = None, **kw: Any) -> IngressRequest:
        """A POST to the interactions endpoint signed with `key` (default: the
        application's own key)."""
        body = json.dumps(self.component_payload(custom_id, **kw)).encode()
        timestamp = str(int(self.rt.clock.time()))
        signature = (key or self.key).sign(timestamp.encode() + body).hex()
        headers = Headers({"X-Signature-Ed25519": signature, "X-Signature-Timestamp": timestamp})
        return IngressRequest("POST", self.routes[0].path, headers, body)

    def post_http(self, request: IngressRequest) -> IngressResponse:
        """Hand `request` to the endpoint like the web layer: the response, then its work."""
        response = self.routes[0].handler(request)
        response.run_after()
        return response

    def click_over_http(self, custom_id: str, **kw: Any) -> IngressResponse:
        """A signed POST to the interactions endpoint; the response, then its work."""
        return self.post_http(self.signed(custom_id, **kw))
