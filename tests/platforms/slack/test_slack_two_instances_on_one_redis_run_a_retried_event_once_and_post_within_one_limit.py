"""Two SlackChannels of one bot (two processes behind one Events API URL) sharing one
real redis-server, as ``channelkit serve`` wires them with ``state.redis``, both talking
to the Slack emulator:

* Slack retries an event (same ``event_id``, ``X-Slack-Retry-Num``, signed anew) and the
  retry reaches the other instance: it is acknowledged, starts no second run, and the
  person sees one answer;
* the instances share Slack's per-channel posting bucket: with one post per 10 s, the
  second instance's post into the channel the first one just posted into waits until
  the (fake) clock has passed the 10 s, and then goes.

Nothing waits for a timer in real time: the channels' clock is fake and the test moves
it; every wait is bounded and ends on what the emulator or the store shows.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pytest
from channelkit.agents import FunctionAgent, Turn
from channelkit.core import ChannelConfig
from channelkit.ingress import Headers, IngressRequest, IngressResponse
from channelkit.platforms import PLATFORMS
from channelkit.platforms.common.rate_limit import OutboundLimit
from channelkit.platforms.slack import SlackChannel, SlackConfig
from channelkit.platforms.slack.ingress import (
    RETRY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    sign,
)
from channelkit.playground.emulator import CallbackDelivery
from channelkit.playground.server import EmulatorServer
from channelkit.runtime import FakeClock

pytest.importorskip("redis", reason="redis-py is not installed (the redis extra)")

BOUND_S = 20.0  # any wait on a loaded 2-core machine (never slept through)
#: the one Events API URL both instances sit behind (the test routes each delivery)
EVENTS_URL = "http://bot.invalid/slack/events"


def wait_for(
    predicate: Callable[[], Any], what: str, tick: Callable[[], None] | None = None
) -> Any:
    """Poll ``predicate`` (bounded) until truthy; ``tick`` moves the fake clock meanwhile
    (a streamed segment's coalesced writes wait on it)."""
    deadline = time.monotonic() + BOUND_S
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {BOUND_S} s waiting for {what}")
        if tick is not None:
            tick()
        threading.Event().wait(0.01)


@dataclass
class Bot:
    """The emulator, the two instances (their stores) and every run they started."""

    emulator: Any
    clock: FakeClock
    channels: list[SlackChannel]
    stores: list[Any]
    runs: list[tuple[int, str]] = field(default_factory=list)
    #: every delivery the emulator made (url, headers, body), for Slack's retries
    deliveries: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    #: the instance the emulator's deliveries reach
    target: int = 0

    def deliver_to(
        self, index: int, url: str, headers: dict[str, str], body: bytes
    ) -> IngressResponse:
        """What instance ``index``'s web layer does with a POST: the handler's ACK, then
        its deferred work."""
        path = urlsplit(url).path
        route = next(r for r in self.channels[index].ingress_routes() if r.path == path)
        response = route.handler(IngressRequest("POST", path, Headers(headers), body))
        response.run_after()
        return response

    def deliver(self, url: str, headers: Any, body: bytes) -> CallbackDelivery:
        """The emulator's delivery seam: to the current ``target`` instance."""
        self.deliveries.append((url, dict(headers), body))
        response = self.deliver_to(self.target, url, dict(headers), body)
        return CallbackDelivery(response.status, response.body.decode())

    def tick(self) -> None:
        self.clock.advance(0.1)

    def texts(self) -> list[str]:
        """The texts of the bot's messages in the direct message, in order."""
        state = self.emulator.state()
        views = [state["views"][e["card"]] for e in state["timeline"] if e["kind"] == "card"]
        return [str(v.get("text", "")) for v in views if v["kind"] == "message"]

    def idle(self) -> None:
        for channel in self.channels:
            wait_for(lambda c=channel: c.wait_idle(0.2), f"{channel.name} to go idle", self.tick)


@pytest.fixture
def bot(redis_server: Any) -> Iterator[Bot]:
    from channelkit.state.redis import RedisStore

    credentials = PLATFORMS["slack"].playground.credentials  # type: ignore[union-attr]
    clock = FakeClock(start=time.monotonic(), wall_start=time.time())
    namespace = f"slack-two-{uuid.uuid4().hex[:8]}"
    # one connection per instance, as two processes have; one bot: one namespace
    stores = [RedisStore(redis_server.url, namespace=namespace, clock=clock) for _ in range(2)]
    with EmulatorServer(
        platform="slack", events_url=EVENTS_URL, interactivity_url=EVENTS_URL
    ) as emu:
        bot = Bot(emu.emulator, clock, [], stores)

        def agent(index: int) -> FunctionAgent:
            def answer(turn: Turn) -> str:
                bot.runs.append((index, turn.text))
                return f"answer to {turn.text}"

            return FunctionAgent(answer)

        config = SlackConfig(
            bot_token=credentials["botToken"],
            signing_secret=credentials["signingSecret"],
            api_base_url=emu.url,
        )
        bot.channels = [
            SlackChannel(
                config,
                agent(i),
                channel_config=ChannelConfig(name="slack"),
                clock=clock,
                store=store,
            )
            for i, store in enumerate(stores)
        ]
        emu.emulator.deliver = bot.deliver
        try:
            yield bot
        finally:
            for channel in bot.channels:
                channel.close()
            for store in stores:
                store.close()


def test_a_retried_event_reaching_the_other_instance_starts_no_second_run(bot: Bot) -> None:
    for channel in bot.channels:
        channel.outbound_pacer.enabled = False  # the pacing is the other test's
    token = uuid.uuid4().hex[:6]
    _, delivery = bot.emulator.send_user_message(f"hello {token}")  # reaches instance 0
    assert delivery.status == 200
    wait_for(lambda: f"answer to hello {token}" in bot.texts(), "the answer", bot.tick)
    bot.idle()

    # Slack did not see the ACK in time and retries: the same event, signed anew,
    # reaching the other instance
    url, headers, body = bot.deliveries[-1]
    stamp = str(int(time.time()) + 1)
    retry = {
        **headers,
        RETRY_HEADER: "1",
        TIMESTAMP_HEADER: stamp,
        SIGNATURE_HEADER: sign(bot.emulator.signing_secret, stamp, body),
    }
    response = bot.deliver_to(1, url, retry, body)
    assert response.status == 200  # acknowledged, so Slack stops retrying
    assert response.after == ()  # nothing handed to the other instance's pool
    bot.idle()
    assert bot.runs == [(0, f"hello {token}")]
    assert bot.texts().count(f"answer to hello {token}") == 1


def test_the_two_instances_post_into_one_channel_within_one_shared_limit(bot: Bot) -> None:
    one, two = bot.channels
    for channel in bot.channels:  # one post every 10 s per channel (Slack's is 1 a second)
        channel.outbound_pacer.override("post", OutboundLimit(0.1, 1.0, "chat", "test"))
    answered: list[float] = []  # the waits the store answered the second instance
    take_token = bot.stores[1].take_token

    def observed(key: str, **bucket: Any) -> float:
        wait = float(take_token(key, **bucket))
        answered.append(wait)
        return wait

    bot.stores[1].take_token = observed  # type: ignore[method-assign]
    chat = bot.emulator.channel
    one.send_message(chat, "from the first instance")  # the bucket's only token
    posted = threading.Event()

    def second() -> None:
        two.send_message(chat, "from the second instance")
        posted.set()

    threading.Thread(target=second, daemon=True).start()
    wait_for(lambda: any(w > 0 for w in answered), "the shared bucket to make it wait")
    assert not posted.is_set()
    assert bot.texts() == ["from the first instance"]
    bot.clock.advance(10.0)  # the next token
    assert posted.wait(BOUND_S), "the second instance's post never went"
    assert bot.texts() == ["from the first instance", "from the second instance"]
    assert (two.outbound_pacer.waited, two.outbound_pacer.unpaced) == (1, 0)
    assert one.outbound_pacer.waited == 0
