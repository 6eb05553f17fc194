"""``GET /metrics`` of the playground after one conversation on every chat platform.

Each chat platform with an emulator runs one person's message through the playground
(the emulator's own ingress: webhook, long connection or polling) to a quick function
agent. Scraped before and after: ``channelkit_runs_total{platform, outcome="completed"}``
and ``channelkit_first_reaction_seconds_count{platform}`` moved by one for that platform,
the platform's API calls and accepted ingress were counted, and no label value of any
channelkit metric holds the chat id or the user id of the message.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
from channelkit import cli
from channelkit.agents.function import FunctionAgent, Turn
from channelkit.core import InboundMessage
from channelkit.platforms import PLATFORMS
from channelkit.playground import Playground
from channelkit.testing import wait_until

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

CHAT_PLATFORMS = [name for name in cli.playground_platforms() if PLATFORMS[name].is_chat]


def _answer(turn: Turn) -> str:
    turn.say("Looking. ")
    return "Found it."


def scrape(url: str) -> list[tuple[str, dict[str, str], float]]:
    """Every channelkit sample of ``url``/metrics as (name, labels, value)."""
    response = requests.get(url + "/metrics", timeout=5)
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith("text/plain")
    return [
        (sample.name, dict(sample.labels), sample.value)
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
        if sample.name.startswith("channelkit_")
    ]


def value(samples: list[tuple[str, dict[str, str], float]], name: str, **labels: str) -> float:
    """The sum of the samples named ``name`` whose labels include ``labels``."""
    wanted = labels.items()
    return sum(
        v for n, found, v in samples if n == name and all(found.get(k) == w for k, w in wanted)
    )


@pytest.fixture(params=CHAT_PLATFORMS)
def playground(request: pytest.FixtureRequest) -> Iterator[tuple[Playground, list[Any]]]:
    seen: list[Any] = []
    pg = Playground(platform=request.param, agent=FunctionAgent(_answer))
    handle_inbound = pg.channel.handle_inbound

    def recording(message: InboundMessage, **kwargs: Any) -> Any:
        seen.append(message)
        return handle_inbound(message, **kwargs)

    pg.channel.handle_inbound = recording  # the ids the channel saw, to look for them
    with pg:
        yield pg, seen


def test_runs_and_first_reaction_move_for_the_platform_and_no_label_names_a_person(
    playground: tuple[Playground, list[Any]],
) -> None:
    pg, seen = playground
    platform = pg.platform
    before = scrape(pg.url)
    response = requests.post(f"{pg.url}/_emulator/send", json={"text": "hello"}, timeout=10)
    assert response.status_code == 200, response.text

    def completed() -> list[tuple[str, dict[str, str], float]] | None:
        samples = scrape(pg.url)
        runs = value(samples, "channelkit_runs_total", platform=platform, outcome="completed")
        done = runs > value(before, "channelkit_runs_total", platform=platform, outcome="completed")
        return samples if done else None

    after = wait_until(completed, timeout=30, what=f"a completed run counted on {platform}")
    assert isinstance(after, list)
    for name, labels in (
        ("channelkit_runs_total", {"platform": platform, "outcome": "completed"}),
        ("channelkit_first_reaction_seconds_count", {"platform": platform}),
        ("channelkit_run_duration_seconds_count", {"platform": platform, "outcome": "completed"}),
        ("channelkit_ingress_total", {"platform": platform, "outcome": "accepted"}),
    ):
        assert value(after, name, **labels) - value(before, name, **labels) == 1, (name, labels)
    assert value(after, "channelkit_platform_api_calls_total", platform=platform) > value(
        before, "channelkit_platform_api_calls_total", platform=platform
    )
    assert value(after, "channelkit_first_reaction_seconds_sum", platform=platform) > 0

    assert seen, "the channel received the message"
    people = {m.chat_id for m in seen} | {m.sender_id for m in seen}
    people |= {m.thread_id for m in seen if m.thread_id}
    for name, labels, _ in after:
        for label, text in labels.items():
            for person in people:
                assert person not in text, f"{name}{{{label}={text!r}}} holds the id {person!r}"
