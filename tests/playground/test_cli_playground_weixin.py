"""``channelkit playground --platform weixin``: the Weixin emulator and channel, the
person's message carried by the channel's ``getupdates`` long poll and answered as a
plain-text bubble; ``--ingress polling`` is the only mode (anything else exits 2)."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from channelkit import cli
from channelkit.playground import Playground
from playground_helpers import callbacks, send, state, wait

LONG = 20.0


@pytest.mark.parametrize("argv", [[], ["--ingress", "polling"]], ids=["default", "polling"])
def test_the_weixin_playground_carries_a_conversation_over_polling(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, Any] = {}

    def serve_once(self: Playground) -> None:
        self.start()
        try:
            send(self, "hello")

            def bot_texts() -> list[str]:
                timeline = state(self)["timeline"]
                return [e["text"] for e in timeline if e["from"] == "bot"]

            seen["texts"] = wait(
                lambda: [t for t in bot_texts() if "/approve" in t] and bot_texts(),
                "the demo agent's text prompt",
                LONG,
            )
            seen["state"] = requests.get(f"{self.url}/_emulator/state", timeout=5).json()
            seen["transports"] = [c["transport"] for c in callbacks(self)]
        finally:
            self.close()

    monkeypatch.setattr(Playground, "serve_forever", serve_once)
    assert cli.main(["playground", "--platform", "weixin", "--port", "0", *argv]) == 0
    out = capsys.readouterr().out
    assert "(weixin emulator, the built-in demo agent)" in out
    assert seen["state"]["platform"] == "weixin" and seen["state"]["ingress"] == "polling"
    assert seen["transports"] == ["polling"]
    # the demo agent's first words, then its questions: on Weixin they arrive as the text
    # prompt, after the text written before them
    texts = seen["texts"]
    prompt = next(i for i, t in enumerate(texts) if "/approve" in t)
    assert prompt >= 1 and "You wrote: hello" in texts[0], texts
    assert seen["state"]["cards"] == {}


def test_an_ingress_weixin_does_not_offer_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["playground", "--platform", "weixin", "--ingress", "webhook"]) == 2
    err = capsys.readouterr().err
    assert "ingress" in err and "polling" in err
