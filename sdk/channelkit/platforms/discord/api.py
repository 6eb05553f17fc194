"""`DiscordApi`: the REST calls the Discord agent channel makes, on the generated client,
every one through the REST rate limiter.

The generated `DiscordClient` is given a `requests.Session` whose `request` hands each
HTTP request to a `DiscordRateLimiter` (`channelkit.platforms.discord.ratelimit`): the
request waits its turn per route bucket and under the global limit, a 429 is sent again
after its `retry_after`, and the caller waits for the answer at most `request_timeout_s`
times `WAIT_FACTOR` (a request that long in the queue raises a read timeout; it is still
sent). The limiter sends on its own small pool, which never waits on anything but
Discord, and a blocked caller starts its own request when its turn comes
(`DiscordRateLimiter.call`), so a caller on the channel's hook pool never waits for a
worker of its own pool (the scheduler's timer callbacks run there). The client itself never
retries (the limiter already honours 429s; an edit is replaced by the next one anyway).

Each method makes one call and raises the `channelkit.errors` error when Discord
refuses it. The bot token is only ever sent as the `Authorization` header; interaction
tokens are path parameters the generated client redacts in its logs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import requests

from channelkit.clients.discord import DiscordClient
from channelkit.http import RetryPolicy
from channelkit.http.multipart import MultipartBody
from channelkit.http.transport import make_session
from channelkit.platforms.common.credentials import check_timeout, probe
from channelkit.platforms.discord.ratelimit import DiscordRateLimiter
from channelkit.runtime import Scheduler, WorkerPool

if TYPE_CHECKING:
    from channelkit.platforms.discord.config import DiscordConfig

__all__ = [
    "EPHEMERAL",
    "NO_MENTIONS",
    "REST_WORKERS",
    "WAIT_FACTOR",
    "DiscordApi",
    "RateLimitedSession",
    "check_credentials",
]

#: The message flag of a notice only the person who acted sees.
EPHEMERAL = 1 << 6
#: `allowed_mentions` that pings nobody, whatever the text says.
NO_MENTIONS: Mapping[str, Any] = {"parse": []}
#: Threads of the pool the rate limiter sends on.
REST_WORKERS = 4
#: A caller waits at most this many request timeouts for its turn and answer.
WAIT_FACTOR = 3.0


class RateLimitedSession(requests.Session):
    """A `requests.Session` whose requests go through a `DiscordRateLimiter`.

    `base_path` is the path part of the API base URL (`/api/v10`), cut off before the
    route key is computed (the limiter keys on `/channels/<id>/...`). `wait_s` bounds the
    caller's wait for its turn and answer.
    """

    def __init__(self, limiter: DiscordRateLimiter, base_path: str, wait_s: float) -> None:
        super().__init__()
        for prefix, adapter in make_session(REST_WORKERS * 2).adapters.items():
            self.mount(prefix, adapter)
        self._limiter = limiter
        self._base_path = base_path.rstrip("/")
        self._wait_s = wait_s

    def request(  # type: ignore[override]
        self, method: str, url: str, *args: Any, **kwargs: Any
    ) -> requests.Response:
        """Queue the request on the limiter and wait (bounded) for its answer."""
        path = urlsplit(url).path
        if self._base_path and path.startswith(self._base_path):
            path = path[len(self._base_path) :] or "/"
        parent = super().request
        sends = 0

        def send() -> requests.Response:
            nonlocal sends
            sends += 1
            data = kwargs.get("data")
            if sends > 1 and isinstance(data, MultipartBody):
                # sent again after a 429: the upload body is read again from the start
                return parent(method, url, *args, **{**kwargs, "data": data.again()})
            return parent(method, url, *args, **kwargs)

        try:
            answer = self._limiter.call(method, path, send, timeout=self._wait_s)
        except TimeoutError:
            raise requests.exceptions.ReadTimeout(
                f"no answer within {self._wait_s:g} s (waiting for Discord's rate limits)"
            ) from None
        assert isinstance(answer, requests.Response)  # what `send` returns
        return answer


class DiscordApi:
    """Messages, edits, typing, pins, DMs, interaction responses and follow-ups.

    `DiscordApi(token, application_id, *, scheduler, base_url=None, timeout_s=10.0,
    client=None, limiter=None)`: the limiter is made on `scheduler` with its own pool
    (closed by `close()`); `client` replaces the generated client (tests).
    """

    def __init__(
        self,
        token: str,
        application_id: str,
        *,
        scheduler: Scheduler,
        base_url: str | None = None,
        timeout_s: float = 10.0,
        client: DiscordClient | None = None,
        limiter: DiscordRateLimiter | None = None,
    ) -> None:
        self.application_id = application_id
        self._pool: WorkerPool | None = None
        if limiter is None:
            self._pool = WorkerPool(REST_WORKERS, name="discord-rest")
            limiter = DiscordRateLimiter(scheduler, self._pool)
        self.limiter = limiter
        if client is None:
            base = base_url or DiscordClient.SERVERS["default"]
            session = RateLimitedSession(limiter, urlsplit(base).path, timeout_s * WAIT_FACTOR)
            client = DiscordClient(
                token=token,
                base_url=base_url,
                timeout=(5.0, timeout_s),
                retry=RetryPolicy.never(),
                session=session,
            )
        self.client = client

    # -- messages -------------------------------------------------------------------------
    def post(
        self,
        channel_id: str,
        content: str,
        components: list[dict[str, Any]] | None = None,
        *,
        reply_to: str | None = None,
    ) -> str:
        """`POST /channels/{id}/messages` (nobody pinged); the new message's id."""
        body: dict[str, Any] = {"content": content, "allowed_mentions": dict(NO_MENTIONS)}
        if components:
            body["components"] = components
        if reply_to:
            body["message_reference"] = {"message_id": reply_to, "fail_if_not_exists": False}
        message = self.client.create_message(channel_id=channel_id, body=body)
        return str(message.id)

    def edit(
        self,
        channel_id: str,
        message_id: str,
        content: str,
        components: list[dict[str, Any]] | None = None,
    ) -> None:
        """`PATCH /channels/{id}/messages/{id}` (`components=[]` removes them; None keeps
        them)."""
        body: dict[str, Any] = {"content": content, "allowed_mentions": dict(NO_MENTIONS)}
        if components is not None:
            body["components"] = components
        self.client.edit_message(channel_id=channel_id, message_id=message_id, body=body)

    def typing(self, channel_id: str) -> None:
        """`POST /channels/{id}/typing`: the bot shows as typing for about 10 s."""
        self.client.trigger_typing_indicator(channel_id=channel_id)

    def pin(self, channel_id: str, message_id: str) -> None:
        """Pin a message in its channel."""
        self.client.pin_message(channel_id=channel_id, message_id=message_id)

    def open_dm(self, user_id: str) -> str:
        """`POST /users/@me/channels`: the id of the DM channel with `user_id`."""
        return str(self.client.create_dm(body={"recipient_id": user_id}).id)

    def channel_info(self, channel_id: str) -> tuple[int | None, str | None]:
        """`GET /channels/{id}`: the channel's `(type, parent_id)`."""
        channel = self.client.get_channel(channel_id=channel_id)
        kind = channel.type if isinstance(channel.type, int) else None
        parent = channel.parent_id if isinstance(channel.parent_id, str) else None
        return kind, parent

    def bot_user_id(self) -> str:
        """`GET /users/@me`: the bot user's id."""
        return str(self.client.get_current_user().id)

    # -- interactions ---------------------------------------------------------------------
    def respond(self, interaction_id: str, token: str, body: Mapping[str, Any]) -> None:
        """`POST /interactions/{id}/{token}/callback`: the ACK of an interaction that came
        over the Gateway (the body the HTTP endpoint would have answered)."""
        self.client.create_interaction_response(
            interaction_id=interaction_id, interaction_token=token, body=dict(body)
        )

    def followup(self, token: str, content: str, *, ephemeral: bool = True) -> str | None:
        """`POST /webhooks/{application_id}/{token}`: a follow-up of an interaction
        (only the person who acted sees it when `ephemeral`)."""
        body: dict[str, Any] = {"content": content, "allowed_mentions": dict(NO_MENTIONS)}
        if ephemeral:
            body["flags"] = EPHEMERAL
        message = self.client.create_followup_message(
            application_id=self.application_id, interaction_token=token, body=body
        )
        return str(message.id) if message.id else None

    def close(self) -> None:
        """Fail the requests still waiting for their turn; stop the limiter's pool."""
        self.limiter.close()
        if self._pool is not None:
            self._pool.shutdown(timeout=2.0)


# -- the start-up check -----------------------------------------------------------------
def check_credentials(config: DiscordConfig, *, timeout: float) -> None:
    """Ask Discord whether the bot token works (`GET /users/@me`, one attempt bounded by
    `timeout` seconds). A refused token raises `channelkit.errors.CredentialCheckFailed`
    naming `botToken`. The public key is never sent to Discord; a wrong one shows as
    refused interaction requests."""
    client = DiscordClient(
        token=config.bot_token,
        base_url=config.api_base_url,
        timeout=check_timeout(timeout),
        retry=RetryPolicy.never(),
    )
    try:
        probe(client.get_current_user, field="botToken", platform="Discord")
    finally:
        client.close()
