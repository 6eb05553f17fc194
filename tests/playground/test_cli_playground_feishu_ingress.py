"""``channelkit playground --platform feishu --ingress http|websocket``: the channel
receives the person's messages the chosen way (HTTP callbacks by default, the channel's
own default; ``websocket`` is the long connection), and ``/_emulator/callbacks`` records
the transport of each delivery."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from channelkit import cli
from channelkit.playground import Playground
from playground_helpers import callbacks, send, views, wait

LONG = 20.0


@pytest.mark.parametrize(
    ("argv", "transport"),
    [([], "http"), (["--ingress", "http"], "http"), (["--ingress", "websocket"], "websocket")],
    ids=["default", "http", "websocket"],
)
def test_the_chosen_ingress_carries_the_conversation(
    argv: list[str], transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def serve_once(self: Playground) -> None:
        self.start()
        try:
            start = send(self, "hello")
            wait(lambda: len(views(self)) > start, "the bot's answer", LONG)
            delivered = [c for c in callbacks(self) if c["kind"] == "event"]
            seen["transports"] = [c["transport"] for c in delivered]
            seen["state"] = requests.get(f"{self.url}/_emulator/state", timeout=5).json()
            seen["routes"] = [r.path for r in self.channel.ingress_routes()]
            seen["connections"] = len(self.channel.connections)
        finally:
            self.close()

    monkeypatch.setattr(Playground, "serve_forever", serve_once)
    assert cli.main(["playground", "--platform", "feishu", "--port", "0", *argv]) == 0
    assert seen["transports"] == [transport]
    assert seen["state"]["ingress"] == transport
    if transport == "http":
        assert seen["routes"] == ["/feishu/events", "/feishu/card"]
        assert seen["connections"] == 0
    else:
        assert seen["routes"] == [] and seen["connections"] == 1


def test_an_ingress_feishu_does_not_offer_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["playground", "--platform", "feishu", "--ingress", "stream"]) == 2
    err = capsys.readouterr().err
    assert "ingress" in err and "http, websocket" in err
