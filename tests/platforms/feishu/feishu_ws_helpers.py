"""A Feishu channel on its long connection to the emulator's gateway (127.0.0.1)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from channelkit.core import ChannelConfig
from channelkit.errors import TransportError
from channelkit.platforms.common.connection import Backoff
from channelkit.platforms.feishu import FeishuChannel, FeishuConfig
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.platforms.feishu.longconn import ClientConfig, Endpoint
from channelkit.playground.feishu.gateway import FeishuGateway

APP_ID = "cli_1"
APP_SECRET = "s"


def gateway_endpoint(gateway: FeishuGateway) -> Endpoint:
    """What ``POST /callback/ws/endpoint`` answers, without HTTP (requests is mocked)."""
    _, answer = gateway.endpoint({"AppID": APP_ID, "AppSecret": APP_SECRET})
    if answer["code"] != 0:
        raise TransportError(f"endpoint refused: {answer['code']}")
    data = answer["data"]
    return Endpoint(data["URL"], ClientConfig().merged(data["ClientConfig"]))


class Waits:
    """The injected backoff wait: records each delay and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, event: threading.Event, seconds: float) -> bool:
        self.delays.append(seconds)
        return event.is_set()


@contextmanager
def connected_channel(
    rt: Any, api: FeishuApi, bridge: Any, gateway: FeishuGateway, waits: Waits, **options: Any
) -> Iterator[FeishuChannel]:
    """A websocket-ingress channel whose long connection is up (closed afterwards)."""
    config = FeishuConfig(app_id=APP_ID, app_secret=APP_SECRET, ingress="websocket")
    channel = FeishuChannel(
        config,
        bridge,
        channel_config=ChannelConfig(name="feishu"),
        api=api,
        executor=rt.pool,
        run_executor=rt.run_pool,
        scheduler=rt.scheduler,
        clock=rt.clock,
        long_connection_options={
            "open_endpoint": lambda: gateway_endpoint(gateway),
            "backoff": Backoff(0.5, 4.0, jitter=lambda: 1.0),
            "wait": waits,
            "poll_s": 0.05,
            **options,
        },
    )
    try:
        assert channel.ingress_routes() == []  # nothing mounted: the socket is the ingress
        (connection,) = channel.connections
        connection.start()
        assert gateway.wait_connected(20.0), connection.state()
        yield channel
    finally:
        channel.close(timeout=5.0)
