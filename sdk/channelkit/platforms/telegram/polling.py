"""Telegram long polling: ``getUpdates`` on one thread, owned by the channel.

With ``TelegramConfig(ingress="polling")`` (the default) the channel's ``connections``
hold one `TelegramPolling`. Started (``start_connections([channel])``), it calls
``deleteWebhook`` once per connection (``getUpdates`` answers 409 Conflict while a
webhook is set), then ``getUpdates`` with ``offset``, ``timeout`` (``polling_timeout_s``;
the HTTP read timeout is longer) and ``allowed_updates`` (``message``,
``callback_query``) again and again. The first ``getUpdates`` of a connection does not
wait (``timeout`` 0), so the connection is reported ``connected`` at once.

Each update goes through `receive_update()`,
the path the webhook route takes (parse, dedup by ``update_id``, authorize, claim), and
its hand-offs of network work start on the pool at once; the polling thread never waits
on a run. The offset moves past an update only once it was handed on (or refused as
malformed), so an update is never lost when a poll fails mid-batch, and a refetched one
is dropped by the channel's ``update_id`` dedup. An update a closed channel refused
stays unconfirmed: the next start fetches it again. An update that starts a run moves
the offset only once the channel recorded the run (its ``receive`` does, in the state
store or the run journal file): a process killed mid-run leaves the record, and the
next process that starts polling calls ``on_start`` first, which tells those people
their run was interrupted (`channelkit.platforms.common.run_journal`).

Failures (409, 5xx, a dropped connection, a body that is not JSON) back off with the
capped, jittered `Backoff`; a 429 waits
its ``retry_after``. `TelegramPolling.stop()` (called by the channel's ``close``)
cuts a long poll in progress by shutting its socket down.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from channelkit.clients.telegram import TelegramClient
from channelkit.errors import ApiError, ChannelClosed
from channelkit.http import RetryPolicy
from channelkit.ingress import IngressResponse
from channelkit.platforms.common.connection import Backoff
from channelkit.platforms.common.inbound import CLOSED_STATUS
from channelkit.platforms.common.longpoll import InterruptibleSession, PollingConnection
from channelkit.platforms.telegram.api import TelegramApi
from channelkit.runtime.clock import Clock

if TYPE_CHECKING:
    from channelkit.platforms.telegram.config import TelegramConfig

__all__ = ["ALLOWED_UPDATES", "TelegramPolling"]

logger = logging.getLogger(__name__)

#: The update kinds the adapter handles (``getUpdates``' ``allowed_updates``).
ALLOWED_UPDATES = ("message", "callback_query")


def _update_id(raw: Any) -> int | None:
    value = raw.get("update_id") if isinstance(raw, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class TelegramPolling(PollingConnection):
    """``deleteWebhook`` once per connection, then ``getUpdates`` until stopped.

    ``receive(update) -> IngressResponse`` is the channel's transport-neutral receive
    (`TelegramChannel.receive_update()`). ``api`` replaces the Bot API wrapper (by
    default one on its own `InterruptibleSession`, without client-side retries:
    the connection's backoff retries); ``wait`` replaces the backoff wait (tests);
    ``on_start`` runs once, before the first poll of the first connection (the channel
    tells the runs a killed predecessor left that they were interrupted).
    """

    def __init__(
        self,
        config: TelegramConfig,
        receive: Callable[[Any], IngressResponse],
        *,
        api: TelegramApi | None = None,
        session: InterruptibleSession | None = None,
        clock: Clock | None = None,
        backoff: Backoff | None = None,
        wait: Callable[[threading.Event, float], bool] | None = None,
        on_start: Callable[[], None] | None = None,
    ) -> None:
        session = session if session is not None else InterruptibleSession()
        super().__init__(
            f"{config.channel_name}-polling", session, clock=clock, backoff=backoff, wait=wait
        )
        self.timeout_s = config.polling_timeout_s
        self.api = api or TelegramApi(
            config.bot_token,
            timeout_s=config.request_timeout_s,
            client=TelegramClient(
                token=config.bot_token,
                base_url=config.api_base_url,
                session=session.session,
                retry=RetryPolicy.never(),
                max_workers=1,
            ),
            base_url=config.api_base_url,
        )
        self._receive = receive
        #: the next ``getUpdates`` offset: one past the last update handed on
        self.offset: int | None = None
        self._first = True
        self._on_start = on_start

    def prepare(self) -> None:
        if self._on_start is not None:
            on_start, self._on_start = self._on_start, None  # once, before the first poll
            try:
                on_start()
            except Exception:
                logger.exception("%s: the start-up hook failed", self.name)
        self.api.delete_webhook()
        self._first = True

    def poll_once(self) -> None:
        timeout = 0 if self._first else self.timeout_s
        try:
            updates = self.api.get_updates(self.offset, timeout, ALLOWED_UPDATES)
        except ApiError as exc:
            if exc.status == 409:
                logger.warning(
                    "%s: getUpdates refused with 409 Conflict (a webhook was set, or another "
                    "instance polls this bot); deleting the webhook again after a backoff",
                    self.name,
                )
            raise
        self._first = False
        for raw in updates:
            if self.stopping:
                return
            self._hand_on(raw)

    def _hand_on(self, raw: Any) -> None:
        """Receive one update, start its hand-offs, move the offset past it. A closed
        channel's refusal raises `ChannelClosed` (the offset stays before it)."""
        update_id = _update_id(raw)
        answer = self._receive(raw)
        if answer.status == CLOSED_STATUS:
            raise ChannelClosed(f"update {update_id} refused: the channel is closed")
        answer.run_after()  # quick: each only posts to the pool (failures are logged)
        if update_id is not None and (self.offset is None or update_id >= self.offset):
            self.offset = update_id + 1
