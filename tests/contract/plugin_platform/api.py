"""Tinychat's wire: its config, the request signature, and the platform API calls."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import requests
from channelkit.errors import ConfigurationError

EVENTS_PATH = "/tinychat/events"
TIMESTAMP_HEADER = "X-Tinychat-Timestamp"
SIGNATURE_HEADER = "X-Tinychat-Signature"
MAX_LIVE = 1_000


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The signature of ``body`` sent at ``timestamp`` (hex HMAC-SHA256)."""
    message = timestamp.encode("ascii") + b"." + body
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class TinychatConfig:
    """The platform config: credentials, where its API is, the channel's name."""

    bot_token: str
    signing_secret: str
    api_base_url: str = "https://tinychat.invalid"
    channel_name: str = "tinychat"

    def __post_init__(self) -> None:
        for name in ("bot_token", "signing_secret", "api_base_url", "channel_name"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ConfigurationError("must be a non-empty string", f"tinychat.{name}")


class TinychatApi:
    """The platform's three calls: post, edit, and a notice only one person sees."""

    def __init__(self, config: TinychatConfig) -> None:
        self._base = config.api_base_url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {config.bot_token}"}
        self._session = requests.Session()

    def _call(self, method: str, body: Mapping[str, Any]) -> dict[str, Any]:
        url = f"{self._base}/tinychat/api/{method}"
        response = self._session.post(url, json=dict(body), headers=self._headers, timeout=10)
        if response.status_code != 200:
            raise RuntimeError(f"tinychat {method}: HTTP {response.status_code}")
        return dict(response.json())

    def post(self, chat: str, text: str, buttons: list[list[dict[str, str]]]) -> str:
        return str(self._call("post", {"chat": chat, "text": text, "buttons": buttons})["id"])

    def edit(self, message_id: str, text: str, buttons: list[list[dict[str, str]]]) -> None:
        self._call("edit", {"id": message_id, "text": text, "buttons": buttons})

    def notice(self, chat: str, user: str, text: str) -> None:
        self._call("notice", {"chat": chat, "user": user, "text": text})
