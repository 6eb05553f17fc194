"""``channelkit_store_operation_seconds{store,operation}`` moves with the store's work.

Two DingTalk instances of one bot share a state store (the playground's ``instances=2``):
the in-process memory store, then a real ``redis-server``. One person's message through
the playground's webhook claims the message, records the run and hands it over
through the store; scraped before and after, the histogram's count for that store
moved for the operations a conversation makes (``add``, ``get``, ``put``), its sum is
positive, and every ``operation`` label is one of the bounded set (never a key).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests
from channelkit.agents.function import FunctionAgent, Turn
from channelkit.playground import Playground
from channelkit.state.base import STORE_OPERATIONS
from channelkit.testing import wait_until

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

Samples = list[tuple[str, dict[str, str], float]]

METRIC = "channelkit_store_operation_seconds"


def _answer(turn: Turn) -> str:
    turn.say("Looking. ")
    return "Found it."


def scrape(url: str) -> Samples:
    response = requests.get(url + "/metrics", timeout=5)
    assert response.status_code == 200, response.text
    return [
        (sample.name, dict(sample.labels), sample.value)
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
        if sample.name.startswith("channelkit_")
    ]


def value(samples: Samples, name: str, **labels: str) -> float:
    wanted = labels.items()
    return sum(
        v for n, found, v in samples if n == name and all(found.get(k) == w for k, w in wanted)
    )


@pytest.fixture(params=["memory", "redis"])
def playground(request: pytest.FixtureRequest) -> Iterator[tuple[str, Playground]]:
    state = None
    if request.param == "redis":
        state = request.getfixturevalue("redis_server").url
    pg = Playground(platform="dingtalk", agent=FunctionAgent(_answer), instances=2, state=state)
    with pg:
        yield request.param, pg


def test_a_conversation_moves_the_store_latency_of_its_store(
    playground: tuple[str, Playground],
) -> None:
    store, pg = playground
    before = scrape(pg.url)
    response = requests.post(f"{pg.url}/_emulator/send", json={"text": "hello"}, timeout=10)
    assert response.status_code == 200, response.text

    count = METRIC + "_count"

    def moved(samples: Samples, operation: str) -> float:
        return value(samples, count, store=store, operation=operation) - value(
            before, count, store=store, operation=operation
        )

    def completed() -> Samples | None:
        """The samples once the run completed and the store's operations were timed."""
        samples = scrape(pg.url)
        done = value(samples, "channelkit_runs_total", outcome="completed") > value(
            before, "channelkit_runs_total", outcome="completed"
        )
        timed = all(moved(samples, operation) >= 1 for operation in ("add", "get", "put"))
        return samples if done and timed else None

    after = wait_until(
        completed, timeout=30, what=f"a completed run and add/get/put timed on {store}"
    )
    assert isinstance(after, list)
    assert value(after, METRIC + "_sum", store=store) > value(before, METRIC + "_sum", store=store)
    labels = [found for name, found, _ in after if name.startswith(METRIC)]
    assert labels, "the histogram is exported"
    for found in labels:
        assert found["store"] in ("memory", "redis"), found
        assert found["operation"] in STORE_OPERATIONS, found
