"""The Discord playground's channel on the emulator's Gateway: messages sent while its
socket is dropped, after Discord asks for a reconnect (op 7), or after garbage frames
each reach the agent exactly once and are answered; the channel resumed its session
(no second IDENTIFY)."""

from __future__ import annotations

import threading
from typing import Any

from channelkit.agents.function import FunctionAgent
from channelkit.playground import Playground
from playground_helpers import wait

LONG = 20.0


def test_messages_survive_a_dropped_socket_a_reconnect_and_garbage_exactly_once() -> None:
    lock = threading.Lock()
    heard: list[str] = []

    def echo(turn: Any) -> str:
        with lock:
            heard.append(turn.text)
        return f"echo: {turn.text}"

    agent = FunctionAgent(echo, name="echo")
    try:
        with Playground(platform="discord", agent=agent) as pg:
            emulator: Any = pg.emulator
            gateway = emulator.gateway
            assert gateway.wait_identified(LONG)

            def answered(text: str) -> bool:
                views = emulator.state()["views"].values()
                return any(v["text"] == f"echo: {text}" for v in views)

            def say(text: str) -> None:
                _, result = emulator.send_user_message(text)
                assert result.status == 200, result

            say("m1")
            wait(lambda: answered("m1"), "the first answer", LONG)

            assert gateway.drop()
            say("m2")  # into the dead socket, or kept for the resume: replayed either way
            wait(lambda: answered("m2"), "the answer after the drop", LONG)

            assert gateway.reconnect()
            say("m3")
            wait(lambda: answered("m3"), "the answer after op 7", LONG)

            assert gateway.send_raw("{not json") and gateway.send_raw('{"op": "x"}')
            say("m4")
            wait(lambda: answered("m4"), "the answer after garbage", LONG)

            assert pg.channel.wait_idle(LONG)
            with lock:
                assert heard == ["m1", "m2", "m3", "m4"]  # none lost, none twice
            assert gateway.counts.get("identifies") == 1
            assert gateway.counts.get("resumes", 0) >= 2
            texts = [v["text"] for v in emulator.state()["views"].values()]
            assert sorted(t for t in texts if t.startswith("echo: ")) == [
                "echo: m1",
                "echo: m2",
                "echo: m3",
                "echo: m4",
            ]
    finally:
        agent.close()
