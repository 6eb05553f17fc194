"""The Telegram adapter test environment: a real TelegramChannel on a Bot API mock."""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Iterator
from typing import Any

import requests_mock as rm
from channelkit.core import ChannelConfig
from channelkit.http import RetryPolicy
from channelkit.ingress import Headers, IngressRequest, IngressResponse
from channelkit.platforms.telegram import TelegramChannel, TelegramConfig
from channelkit.platforms.telegram.api import TelegramApi
from channelkit.platforms.telegram.ingress import SECRET_HEADER
from channelkit.testing import ScriptedBridge

from tests.platforms._shared import LifecycleLog

BASE = "http://tg.test"
TOKEN = "123:abc"
SECRET = "hook-secret"
OWNER = 42
CHAT = 1001
BOT_USERNAME = "qwen_bot"


def url(method: str) -> str:
    return f"{BASE}/bot{TOKEN}/{method}"


class RecordingTelegram(LifecycleLog, TelegramChannel):
    """TelegramChannel that also records its lifecycle events."""


class Env:
    def __init__(
        self,
        rt: Any,
        mock: rm.Mocker,
        bridge: ScriptedBridge,
        *,
        session_scope: str | None = None,
        **cfg: Any,
    ) -> None:
        self.rt = rt
        self.mock = mock
        self.bridge = bridge
        cfg.setdefault("bot_username", BOT_USERNAME)
        config = TelegramConfig(
            bot_token=TOKEN, webhook_secret=SECRET, api_base_url=BASE, ingress="webhook", **cfg
        )
        api = TelegramApi(TOKEN, base_url=BASE, retry=RetryPolicy.never())
        self.channel = RecordingTelegram(
            config,
            bridge,
            channel_config=ChannelConfig(
                name="telegram", max_workers=8, session_scope=session_scope
            ),
            api=api,
            executor=rt.pool,
            run_executor=rt.run_pool,
            scheduler=rt.scheduler,
        )
        self.route = self.channel.ingress_routes()[0]
        self.update_ids = itertools.count(1)
        self.cq_ids = itertools.count(1)

    def calls(self, method: str) -> list[dict[str, Any]]:
        return [
            r.json() for r in self.mock.request_history if r.path.endswith("/" + method.lower())
        ]

    def respond(self, update: dict[str, Any], secret: str | None = SECRET) -> IngressResponse:
        """The webhook's response, its deferred work (``after``) not run yet."""
        headers = {SECRET_HEADER: secret} if secret is not None else {}
        request = IngressRequest(
            method="POST",
            path=self.route.path,
            headers=Headers(headers),
            body=json.dumps(update).encode(),
        )
        return self.route.handler(request)

    def post(self, update: dict[str, Any], secret: str | None = SECRET) -> int:
        """Deliver ``update`` like the web layer: the ACK, then its deferred work."""
        response = self.respond(update, secret)
        response.run_after()
        return response.status

    def message(
        self,
        text: str,
        *,
        user: int = OWNER,
        chat: int = CHAT,
        chat_type: str = "private",
        **fields: Any,
    ) -> int:
        """Post a message update; ``fields`` are extra Message fields (reply_to_message...)."""
        return self.post(
            {
                "update_id": next(self.update_ids),
                "message": {
                    "message_id": 500 + next(self.update_ids),
                    "date": 0,
                    "chat": {"id": chat, "type": chat_type},
                    "from": {"id": user, "is_bot": False, "first_name": f"u{user}"},
                    "text": text,
                    **fields,
                },
            }
        )

    def tap(self, data: str, message_id: int, *, user: int = OWNER, chat: int = CHAT) -> int:
        return self.post(
            {
                "update_id": next(self.update_ids),
                "callback_query": {
                    "id": f"cq{next(self.cq_ids)}",
                    "chat_instance": "ci",
                    "data": data,
                    "from": {"id": user, "is_bot": False, "first_name": "x"},
                    "message": {
                        "message_id": message_id,
                        "date": 0,
                        "chat": {"id": chat, "type": "private"},
                    },
                },
            }
        )

    def settle(self) -> None:
        self.rt.settle()


@contextlib.contextmanager
def mock_bot_api() -> Iterator[rm.Mocker]:
    """requests-mock with a working Bot API: ``sendMessage`` returns ids 100, 101, ..."""
    ids = itertools.count(100)
    with rm.Mocker() as m:
        m.post(
            url("sendMessage"),
            json=lambda r, c: {
                "ok": True,
                "result": {
                    "message_id": next(ids),
                    "date": 0,
                    "chat": {"id": CHAT, "type": "private"},
                },
            },
        )
        for method in ("editMessageText", "sendChatAction", "answerCallbackQuery", "setMyCommands"):
            m.post(url(method), json={"ok": True, "result": True})
        yield m


def texts(env: Env) -> list[str]:
    return [m["text"] for m in env.calls("sendMessage")]
