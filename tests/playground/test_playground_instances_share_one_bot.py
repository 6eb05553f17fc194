"""``playground --instances 2 --state redis://...``: two SDK instances of one DingTalk
bot share a RedisStore; the emulator delivers callbacks to them in turn and records
which instance received each; a Stop clicked and delivered to instance B cancels the run
that lives on instance A. All over HTTP."""

from __future__ import annotations

import json
import threading
import urllib.request
from typing import Any

import pytest
from channelkit import cli
from channelkit.agents.function import FunctionAgent, Turn
from channelkit.errors import ConfigurationError
from channelkit.playground import Playground
from channelkit.testing import wait_until


def call(url: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url,
        data=data,
        headers={"Content-Type": "application/json"},
        method="POST" if data else "GET",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"null")


def test_a_stop_delivered_to_instance_b_cancels_the_run_on_instance_a(redis_server: Any) -> None:
    started, cancelled = threading.Event(), threading.Event()

    def agent(turn: Turn) -> str:
        turn.say("Working on it")
        started.set()
        while not turn.cancelled:
            threading.Event().wait(0.02)  # a long tool call, until Stop
        cancelled.set()
        return "stopped"

    playground = Playground(agent=FunctionAgent(agent), instances=2, state=redis_server.url).start()
    try:
        base = playground.url
        call(f"{base}/_emulator/send", {"text": "hold on"})
        assert started.wait(15), "the run never started"

        def status_card() -> str | None:
            cards = call(f"{base}/_emulator/state")["cards"]
            found = [key for key, c in cards.items() if c.get("kind") == "status"]
            return str(found[0]) if found else None

        card = wait_until(status_card, timeout=15, what="the status card")
        # the card's record reaches the store before the card is delivered
        call(f"{base}/_emulator/cards/{card}/action", {"action": "stop"})
        assert cancelled.wait(15), "the Stop delivered to instance B did not cancel the run"
        callbacks = call(f"{base}/_emulator/callbacks")["callbacks"]
        assert [(c["kind"], c["instance"]) for c in callbacks][:2] == [("robot", 0), ("card", 1)]
        assert callbacks[1]["status"] == 200
        assert playground.instances.channels[0].cluster is not None
    finally:
        playground.close()


def test_instances_need_dingtalk_over_http(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigurationError):
        Playground(platform="telegram", instances=2)
    assert cli.main(["playground", "--state", "redis://127.0.0.1:9/0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--instances 2 or more" in err
