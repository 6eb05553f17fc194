"""``channelkit playground --platform discord --ingress gateway|interactions``: the person's
messages always arrive on the Gateway; a click on the bot's Stop button is an
``INTERACTION_CREATE`` on the Gateway by default, or a signed POST to the channel's
interactions endpoint with ``--ingress interactions``. ``/_emulator/callbacks`` records
the transport of each delivery."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from channelkit import cli
from channelkit.playground import Playground
from playground_helpers import callbacks, send, wait

LONG = 20.0


def stop_button(pg: Playground) -> str | None:
    """The id of a message showing a Stop button, or None."""
    state = requests.get(f"{pg.url}/_emulator/state", timeout=5).json()
    for message_id, view in state["views"].items():
        if any((b["data"] or "").startswith("ck:stop:") for row in view["keyboard"] for b in row):
            return str(message_id)
    return None


@pytest.mark.parametrize(
    ("argv", "clicks"),
    [
        ([], "gateway"),
        (["--ingress", "gateway"], "gateway"),
        (["--ingress", "interactions"], "interactions"),
    ],
    ids=["default", "gateway", "interactions"],
)
def test_the_chosen_discord_ingress_carries_the_clicks(
    argv: list[str], clicks: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def serve_once(self: Playground) -> None:
        self.start()
        try:
            assert self.emulator.gateway.wait_identified(LONG)  # type: ignore[attr-defined]
            send(self, "long")
            message_id = wait(lambda: stop_button(self), "the Stop button", LONG)
            pressed = requests.post(
                f"{self.url}/_emulator/cards/{message_id}/action",
                json={"action": "stop"},
                timeout=LONG,
            )
            assert pressed.status_code == 200, pressed.text
            wait(lambda: stop_button(self) is None, "the run to stop", LONG)
            seen["transports"] = {c["kind"]: c["transport"] for c in callbacks(self)}
            seen["state"] = requests.get(f"{self.url}/_emulator/state", timeout=5).json()
            seen["routes"] = [r.path for r in self.channel.ingress_routes()]
        finally:
            self.close()

    monkeypatch.setattr(Playground, "serve_forever", serve_once)
    assert cli.main(["playground", "--platform", "discord", "--port", "0", *argv]) == 0
    assert seen["transports"] == {"message": "gateway", "interaction": clicks}
    assert seen["state"]["ingress"] == clicks
    assert seen["routes"] == (["/discord/interactions"] if clicks == "interactions" else [])


def test_an_ingress_discord_does_not_offer_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["playground", "--platform", "discord", "--ingress", "webhook"]) == 2
    err = capsys.readouterr().err
    assert "ingress" in err and "gateway, interactions" in err
