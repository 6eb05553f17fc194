"""``channelkit playground --platform slack --ingress events|socket``: the channel receives
the person's messages the chosen way (the Events API by default), and
``/_emulator/callbacks`` records the transport of each delivery."""

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
    [([], "events"), (["--ingress", "events"], "events"), (["--ingress", "socket"], "socket")],
    ids=["default", "events", "socket"],
)
def test_the_chosen_slack_ingress_carries_the_conversation(
    argv: list[str], transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def serve_once(self: Playground) -> None:
        self.start()
        try:
            if transport == "socket":
                assert self.emulator.gateway.wait_connected(LONG)  # type: ignore[attr-defined]
            start = send(self, "hello")
            wait(lambda: len(views(self)) > start, "the bot's answer", LONG)
            delivered = [c for c in callbacks(self) if c["kind"] == "message"]
            seen["transports"] = [c["transport"] for c in delivered]
            seen["state"] = requests.get(f"{self.url}/_emulator/state", timeout=5).json()
            seen["routes"] = [r.path for r in self.channel.ingress_routes()]
        finally:
            self.close()

    monkeypatch.setattr(Playground, "serve_forever", serve_once)
    assert cli.main(["playground", "--platform", "slack", "--port", "0", *argv]) == 0
    assert seen["transports"] == [transport]
    assert seen["state"]["ingress"] == transport
    expected = ["/slack/events", "/slack/interactivity"] if transport == "events" else []
    assert seen["routes"] == expected


def test_an_ingress_slack_does_not_offer_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["playground", "--platform", "slack", "--ingress", "rtm"]) == 2
    err = capsys.readouterr().err
    assert "ingress" in err and "events, socket" in err
