"""Discord Stop: the button on a live segment's message cancels exactly that run when its
owner presses it (a deferred update answers the click; the message ends "Stopped.");
anyone else gets an ephemeral notice and the run goes on. Over the Gateway the response
goes to the interaction callback; over HTTP it is the endpoint's answer."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests_mock as rm
from channelkit.platforms.discord.adapter import TEXT_NOT_YOUR_RUN
from channelkit.platforms.discord.output import TEXT_STOPPED
from channelkit.testing import ScriptedBridge, chunk, gate, wait_until
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.platforms.discord.discord_env import DM, STRANGER, Env


@pytest.fixture
def mocker() -> Iterator[rm.Mocker]:
    with rm.Mocker() as m:
        yield m


def test_the_owners_stop_over_the_gateway_cancels_the_run_and_marks_the_message(
    rt: Any, mocker: rm.Mocker
) -> None:
    release = threading.Event()
    bridge = ScriptedBridge([chunk("working"), gate(release)])
    env = Env(rt, mocker, bridge)
    env.message("go")
    wait_until(lambda: env.posts(DM), what="the segment's message")
    post = env.posts(DM)[0]
    stop_id = post["components"][0]["components"][0]["custom_id"]
    env.click_over_gateway(stop_id)
    wait_until(lambda: env.callbacks(), what="the interaction response")
    assert env.callbacks()[0] == {"type": 6}
    rt.settle()
    assert len(bridge.cancels) == 1
    final = env.edits()[-1][1]
    assert final["components"] == [] and final["content"].endswith(TEXT_STOPPED)
    assert [e.type.value for e in env.channel.events][-1] == "cancelled"
    env.channel.close(2.0)


def test_a_strangers_stop_gets_an_ephemeral_notice_and_the_run_goes_on(
    rt: Any, mocker: rm.Mocker
) -> None:
    release = threading.Event()
    bridge = ScriptedBridge([chunk("working"), gate(release), chunk(" done")])
    env = Env(rt, mocker, bridge, ingress="interactions")
    env.message("go")
    wait_until(lambda: env.posts(DM), what="the segment's message")
    stop_id = env.posts(DM)[0]["components"][0]["components"][0]["custom_id"]
    response = env.click_over_http(stop_id, user=STRANGER)
    assert json.loads(response.body) == {
        "type": 4,
        "data": {"content": TEXT_NOT_YOUR_RUN, "flags": 64, "allowed_mentions": {"parse": []}},
    }
    assert env.callbacks() == []  # over HTTP the answer is the response itself
    rt.pool.wait_idle(2.0)
    assert bridge.cancels == []
    response = env.click_over_http(stop_id)  # the owner, over HTTP
    assert json.loads(response.body) == {"type": 6}
    rt.settle()
    assert len(bridge.cancels) == 1
    env.channel.close(2.0)


def test_stop_cancels_only_the_run_whose_message_it_is_on(rt: Any, mocker: rm.Mocker) -> None:
    gates = {"a": threading.Event(), "b": threading.Event()}
    bridge = ScriptedBridge(
        lambda session, text: [chunk(f"run {text}"), gate(gates[text]), chunk(" ok")]
    )
    env = Env(rt, mocker, bridge)
    env.message("a", user="2200000000000000007", channel="3300000000000000007", mention=True)
    env.message("b", user="2200000000000000008", channel="3300000000000000008", mention=True)
    wait_until(lambda: len(env.posts()) == 2, what="both messages")
    post_a = env.posts("3300000000000000007")[0]
    stop_a = post_a["components"][0]["components"][0]["custom_id"]
    env.click_over_gateway(stop_a, user="2200000000000000007", channel="3300000000000000007")
    wait_until(lambda: len(bridge.cancels) == 1, what="one cancel")
    gates["b"].set()
    rt.settle()
    b_final = [b for _, b in env.edits() if b["components"] == [] and "run b" in b["content"]]
    assert b_final and b_final[-1]["content"] == "run b ok"
    env.channel.close(2.0)


def test_a_forged_or_replayed_stop_changes_nothing(rt: Any, mocker: rm.Mocker) -> None:
    release = threading.Event()
    bridge = ScriptedBridge([chunk("working"), gate(release)])
    env = Env(rt, mocker, bridge, ingress="interactions")
    env.message("go")
    wait_until(lambda: env.posts(DM), what="the segment's message")
    stop_id = env.posts(DM)[0]["components"][0]["components"][0]["custom_id"]
    forged = env.signed(stop_id, key=Ed25519PrivateKey.generate())
    assert env.post_http(forged).status == 401
    rt.pool.wait_idle(2.0)
    assert bridge.cancels == []
    genuine = env.signed(stop_id)
    assert env.post_http(genuine).status == 200
    assert env.post_http(genuine).status == 401  # the same request again: a replay
    rt.settle()
    assert len(bridge.cancels) == 1
    env.channel.close(2.0)
