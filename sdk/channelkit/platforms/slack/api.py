"""``SlackApi``: the Web API calls the Slack agent channel makes, on the generated client.

Each method makes one call and raises the `channelkit.errors` error when Slack
refuses it (``{ok: false, error}``). The bot token is only ever sent as the
``Authorization`` header by the generated client; it is never logged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from channelkit.clients.slack import SlackClient
from channelkit.http import RetryPolicy
from channelkit.http.model import UNSET
from channelkit.http.transport import DEFAULT_POOL_SIZE
from channelkit.platforms.common.credentials import check_timeout, probe

if TYPE_CHECKING:
    from channelkit.platforms.slack.config import SlackConfig

__all__ = ["SlackApi", "check_credentials"]


class SlackApi:
    """``post`` / ``update`` / ``ephemeral`` / streams / assistant status / Socket Mode URL.

    The bot token's client made here keeps ``pool_size`` connections to the host (the
    adapter passes `ChannelConfig.api_pool_size`, one for each thread that may call at
    once); the app token's client (Socket Mode URL only) keeps the default."""

    def __init__(
        self,
        token: str,
        *,
        base_url: str | None = None,
        timeout_s: float = 10.0,
        retry: RetryPolicy | None = None,
        client: SlackClient | None = None,
        pool_size: int = DEFAULT_POOL_SIZE,
    ) -> None:
        self.client = client or SlackClient(
            token=token,
            base_url=base_url,
            timeout=(5.0, timeout_s),
            retry=retry,
            max_workers=pool_size,
        )
        self._base_url = base_url
        self._timeout = (5.0, timeout_s)
        self._retry = retry
        self._app_client: SlackClient | None = None

    def post(
        self,
        channel: str,
        text: str,
        thread_ts: str | None = None,
        blocks: list[dict[str, Any]] | None = None,
    ) -> str | None:
        """``chat.postMessage``; the new message's ``ts``."""
        body: dict[str, Any] = {"channel": channel, "text": text}
        if thread_ts:
            body["thread_ts"] = thread_ts
        if blocks:
            body["blocks"] = blocks
        ts = self.client.chat_post_message(body=body).ts
        return None if ts is UNSET or not ts else str(ts)

    def update(
        self, channel: str, ts: str, text: str, blocks: list[dict[str, Any]] | None = None
    ) -> None:
        """``chat.update`` (``blocks=[]`` removes the blocks)."""
        body: dict[str, Any] = {"channel": channel, "ts": ts, "text": text}
        if blocks is not None:
            body["blocks"] = blocks
        self.client.chat_update(body=body)

    def ephemeral(self, channel: str, user: str, text: str, thread_ts: str | None = None) -> None:
        """``chat.postEphemeral``: ``text`` only ``user`` sees."""
        body: dict[str, Any] = {"channel": channel, "user": user, "text": text}
        if thread_ts:
            body["thread_ts"] = thread_ts
        self.client.chat_post_ephemeral(body=body)

    def start_stream(
        self,
        channel: str,
        thread_ts: str | None,
        markdown_text: str,
        recipient: tuple[str, str] | None = None,
    ) -> str:
        """``chat.startStream``; the streaming message's ``ts``."""
        body: dict[str, Any] = {"channel": channel}
        if thread_ts:
            body["thread_ts"] = thread_ts
        if markdown_text:
            body["markdown_text"] = markdown_text
        if recipient is not None:
            body["recipient_user_id"], body["recipient_team_id"] = recipient
        ts = self.client.chat_start_stream(body=body).ts
        if ts is UNSET or not isinstance(ts, str) or not ts:
            raise ValueError("chat.startStream answered without a ts")
        return ts

    def append_stream(self, channel: str, ts: str, markdown_text: str) -> None:
        """``chat.appendStream``."""
        self.client.chat_append_stream(
            body={"channel": channel, "ts": ts, "markdown_text": markdown_text}
        )

    def stop_stream(self, channel: str, ts: str, markdown_text: str | None = None) -> None:
        """``chat.stopStream`` (with the last text, when any)."""
        body: dict[str, Any] = {"channel": channel, "ts": ts}
        if markdown_text:
            body["markdown_text"] = markdown_text
        self.client.chat_stop_stream(body=body)

    def open_socket_url(self, app_token: str) -> str:
        """``apps.connections.open`` with the app-level token: a one-time Socket Mode
        WebSocket URL (a client for the app token is made on first use)."""
        if self._app_client is None:
            self._app_client = SlackClient(
                token=app_token,
                base_url=self._base_url,
                timeout=self._timeout,
                retry=self._retry,
            )
        url = self._app_client.apps_connections_open().url
        if url is UNSET or not isinstance(url, str) or not url:
            raise ValueError("apps.connections.open answered without a url")
        return url

    def set_status(self, channel: str, thread_ts: str, status: str) -> None:
        """``assistant.threads.setStatus`` (an empty status clears it)."""
        self.client.assistant_threads_set_status(
            body={"channel_id": channel, "thread_ts": thread_ts, "status": status}
        )


# -- the start-up check -----------------------------------------------------------------
def check_credentials(config: SlackConfig, *, timeout: float) -> None:
    """Ask Slack whether the tokens work, one attempt each bounded by `timeout` seconds.

    `auth.test` checks `botToken`; with `"ingress": "socket"`, `apps.connections.open`
    checks `appToken` (it only hands out a one-time URL nobody connects to). A token
    Slack refuses raises `channelkit.errors.CredentialCheckFailed` naming it ("was
    refused by Slack (invalid_auth)"). The signing secret is never sent to Slack, so
    it cannot be checked here (a wrong one shows as refused callbacks).
    """
    tokens = [("botToken", config.bot_token)]
    if config.ingress == "socket" and config.app_token:
        tokens.append(("appToken", config.app_token))
    for field, token in tokens:
        client = SlackClient(
            token=token,
            base_url=config.api_base_url,
            timeout=check_timeout(timeout),
            retry=RetryPolicy.never(),
        )
        call = client.auth_test if field == "botToken" else client.apps_connections_open
        try:
            probe(call, field=field, platform="Slack")
        finally:
            client.close()
