"""Weixin long polling: iLink ``getupdates`` on one thread, owned by the channel.

iLink delivers messages only by long polling, so every `WeixinChannel` holds one
`WeixinPolling` in ``connections`` (start it with ``start_connections([channel])``;
the channel's ``close`` stops it). It calls ``POST /ilink/bot/getupdates`` with the
``get_updates_buf`` cursor of the previous answer (empty at first) again and again; the
server holds a call until messages arrive or ``longpolling_timeout_ms`` passes (a client
read timeout is an empty poll, not an error).

Each user message takes the channel's inbound path
(`WeixinChannel.handle_weixin_message()`: parse, remember the ``context_token``,
hand the run or command to the pool), at most once per ``message_id`` (a redelivered
message is ignored; one the shared store cannot vouch for while it is down is dropped
and ``on_unavailable`` tells its sender), and the cursor moves on only after the whole
batch was handed on (and a message that starts a run is recorded by the channel while
it is handed on: a process killed mid-run leaves the record, and ``on_start``, called
once before the first poll, lets the next process tell that person the run was
interrupted).
The polling thread never waits on a run.

Failures (HTTP errors, transient ``errcode`` -1 / 45011, a dropped connection, a body
that is not JSON) back off with the capped, jittered
`Backoff`. ``errcode`` -14 means the
session expired: polling stops with one error log, and the bot must log in again (a
new ``bot_token``); retrying would not help.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from channelkit.clients.weixin import WeixinClient
from channelkit.errors import AuthError, RateLimited, ReadTimeout, ServerError
from channelkit.http import RetryPolicy
from channelkit.http.model import UNSET
from channelkit.platforms.common.connection import Backoff
from channelkit.platforms.common.longpoll import InterruptibleSession, PollingConnection
from channelkit.platforms.common.replay import sent_at_seconds
from channelkit.platforms.common.shared_dedup import SharedDedup
from channelkit.platforms.weixin.api import WeixinApi
from channelkit.runtime.clock import Clock, SystemClock

if TYPE_CHECKING:
    from channelkit.platforms.weixin.config import WeixinConfig
    from channelkit.state.base import StateStore

__all__ = ["MESSAGE_DEDUP_TTL", "SESSION_EXPIRED", "WeixinPolling"]

logger = logging.getLogger(__name__)

#: ``errcode`` (or ``ret``) of an expired session: log in again, do not retry.
SESSION_EXPIRED = -14
#: ``errcode`` values worth a retry after a backoff (transient, rate limit).
_RATE_LIMITED = 45011
#: Seconds after its ``create_time_ms`` a ``message_id`` is remembered to drop
#: redeliveries (iLink publishes no redelivery window: a batch is fetched again when the
#: cursor did not move, which happens within minutes; an hour keeps a wide margin).
#: Older copies are refused as stale (platforms/common/replay.py).
MESSAGE_DEDUP_TTL = 3600.0
#: Added to the server's ``longpolling_timeout_ms`` for the client's read timeout.
_READ_MARGIN_S = 5.0


def _message_key(message: Any) -> str | None:
    if not isinstance(message, Mapping):
        return None
    for field in ("message_id", "seq"):
        value = message.get(field)
        if isinstance(value, str | int) and not isinstance(value, bool) and value != "":
            return f"{field}:{value}"
    return None


class WeixinPolling(PollingConnection):
    """``getupdates`` with the cursor until stopped (or the session expires).

    ``handle(message)`` is the channel's inbound path for one ``WeixinMessage``
    (`WeixinChannel.handle_weixin_message()`). ``api`` replaces the iLink wrapper (by
    default one on its own `InterruptibleSession`, without client-side retries:
    the connection's backoff retries); ``wait`` replaces the backoff wait (tests).
    """

    def __init__(
        self,
        config: WeixinConfig,
        handle: Callable[[Mapping[str, Any]], object],
        *,
        api: WeixinApi | None = None,
        session: InterruptibleSession | None = None,
        clock: Clock | None = None,
        backoff: Backoff | None = None,
        wait: Callable[[threading.Event, float], bool] | None = None,
        store: StateStore | None = None,
        on_start: Callable[[], None] | None = None,
        on_unavailable: Callable[[Mapping[str, Any]], object] | None = None,
    ) -> None:
        session = session if session is not None else InterruptibleSession()
        super().__init__(
            f"{config.channel_name}-polling", session, clock=clock, backoff=backoff, wait=wait
        )
        self.api = api or WeixinApi(
            config.bot_token,
            base_url=config.base_url,
            channel_version=config.channel_version,
            timeout_s=config.request_timeout_s,
            client=WeixinClient(
                token=config.bot_token,
                base_url=config.base_url,
                session=session.session,
                retry=RetryPolicy.never(),
                max_workers=1,
            ),
        )
        self._handle = handle
        #: ``get_updates_buf`` of the last batch handed on (empty: from the start)
        self.cursor = ""
        #: the client's read timeout of the next poll
        self.read_timeout_s = config.polling_timeout_s
        #: message keys handed on (with ``store``: by any instance of the bot; a store
        #: outage drops the message, `channelkit.platforms.common.shared_dedup`)
        self._seen = SharedDedup(
            (clock or SystemClock()).time, ttl=MESSAGE_DEDUP_TTL, scope="weixin-msg", store=store
        )
        #: True once iLink reported the session expired (polling stopped)
        self.expired = False
        self._on_start = on_start
        #: called (on this thread, never waiting) with a message the store could not
        #: vouch for: it is dropped, the channel tells its sender once per outage
        self._on_unavailable = on_unavailable

    def prepare(self) -> None:
        if self._on_start is not None:
            on_start, self._on_start = self._on_start, None  # once, before the first poll
            try:
                on_start()
            except Exception:
                logger.exception("%s: the start-up hook failed", self.name)

    def poll_once(self) -> None:
        try:
            response = self.api.get_updates(self.cursor, self.read_timeout_s)
        except ReadTimeout:
            return  # the long poll ended without messages
        except AuthError as exc:
            if str(exc.code) == str(SESSION_EXPIRED):
                self._session_expired()
                return
            raise
        errcode = response.errcode if response.errcode is not UNSET else 0
        if errcode == SESSION_EXPIRED:
            self._session_expired()
            return
        if errcode == _RATE_LIMITED:
            raise RateLimited("weixin getupdates: rate limited", status=200, code=errcode)
        if errcode:
            reason = response.errmsg if isinstance(response.errmsg, str) else "failed"
            raise ServerError(f"weixin getupdates: {reason}", status=200, code=errcode)
        for message in response.msgs if response.msgs is not UNSET else []:
            if self.stopping:
                return  # the cursor stays: the next start fetches the rest again
            key = _message_key(message)
            sent_at = (
                sent_at_seconds(message.get("create_time_ms"))
                if isinstance(message, Mapping)
                else None
            )
            claim = "first" if key is None else self._seen.claim(key, sent_at)
            if claim == "unavailable":  # the shared store is down: dropped, sender told
                if self._on_unavailable is not None and isinstance(message, Mapping):
                    self._on_unavailable(message)
                continue
            if claim != "first":
                logger.info("%s: message %s already handled; ignored", self.name, key)
                continue
            self._handle(message)
        cursor = response.get_updates_buf
        if isinstance(cursor, str) and cursor:
            self.cursor = cursor
        hold_ms = response.longpolling_timeout_ms
        if isinstance(hold_ms, int) and not isinstance(hold_ms, bool) and hold_ms > 0:
            self.read_timeout_s = hold_ms / 1000.0 + _READ_MARGIN_S

    def _session_expired(self) -> None:
        self.expired = True
        logger.error(
            "%s: the iLink session expired (errcode %d); polling stopped. Log the bot in "
            "again and configure the new bot_token.",
            self.name,
            SESSION_EXPIRED,
        )
        self.stop()
        self._set("stopped", last_error=f"session expired (errcode {SESSION_EXPIRED})")
