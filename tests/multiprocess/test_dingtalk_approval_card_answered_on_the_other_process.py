"""An approval card across two processes of one bot (real Redis): the process that owns
the run shows the tool permission as a card (not the text prompt), the person's choice
is delivered to the OTHER process, claimed there and applied by the owner once; the card
ends submitted in place (issue 23, item 10)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.playground import EmulatorServer
from channelkit.testing import wait_until

from tests.multiprocess.test_dingtalk_processes_share_one_bot_through_redis import (
    APP_KEY,
    APP_SECRET,
    CARD_SECRET,
    Instance,
    stop_all,
    views,
)

LONG = 20.0  # a loaded 2-core CI machine


@pytest.fixture()
def pair(redis_server: Any, tmp_path: Any) -> Iterator[tuple[Any, Instance, Instance]]:
    emulator = EmulatorServer(app_key=APP_KEY, app_secret=APP_SECRET, api_secret=CARD_SECRET)
    namespace = "mpa" + uuid.uuid4().hex[:8]
    made: list[Instance] = []
    try:
        made.append(Instance(emulator.url, redis_server.url, namespace, tmp_path / "owner"))
        made.append(Instance(emulator.url, redis_server.url, namespace, tmp_path / "other"))
        yield emulator.emulator, made[0], made[1]
    finally:
        stop_all(made)
        emulator.close()


def test_an_approval_card_clicked_on_the_other_process_answers_the_agent_once(pair) -> None:
    emulator, owner, other = pair
    owner.message("approve", "cid-approve")
    card = wait_until(
        lambda: next((v for v in views(emulator, "question") if v["state"] == "pending"), None),
        LONG,
    )
    assert "/approve" not in str(emulator.state()["timeline"])  # no text prompt
    assert other.card(card["id"], "submit", {"0": "Allow"}) == 200
    wait_until(
        lambda: any("Decision: proceed_once" in v["content"] for v in views(emulator, "status")),
        LONG,
    )
    assert emulator.state()["views"][card["id"]]["state"] == "submitted"
    assert other.card(card["id"], "submit", {"0": "Reject"}) == 200  # late: harmless
    lines = owner.answers() + other.answers()
    assert lines == ["permission:proceed_once"], lines
