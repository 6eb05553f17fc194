"""``channelkit playground --platform ...`` builds the right playground and prints its URL."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from channelkit import cli
from channelkit.playground import Playground


@pytest.mark.parametrize("platform", ["dingtalk", "feishu", "telegram"])
def test_playground_command_serves_each_platform(
    platform: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, Any] = {}

    def serve_once(self: Playground) -> None:
        self.start()
        try:
            state = requests.get(f"{self.url}/_emulator/state", timeout=5).json()
            seen["platform"] = state["platform"]
            seen["encrypt_key"] = getattr(self.emulator, "encrypt_key", None)
        finally:
            self.close()

    monkeypatch.setattr(Playground, "serve_forever", serve_once)
    assert cli.main(["playground", "--platform", platform, "--port", "0"]) == 0
    out = capsys.readouterr().out
    assert f"({platform} emulator, the built-in demo agent)" in out
    assert "Open http://127.0.0.1:" in out
    assert seen["platform"] == platform
    if platform == "feishu":
        assert seen["encrypt_key"]  # encrypted, signed callbacks by default


def test_feishu_plain_callbacks_and_unknown_platform(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    keys: list[Any] = []
    monkeypatch.setattr(
        Playground,
        "serve_forever",
        lambda self: (keys.append(self.emulator.encrypt_key), self.close()),
    )
    assert cli.main(["playground", "--platform", "feishu", "--feishu-encrypt-key", ""]) == 0
    assert keys == [None]
    with pytest.raises(SystemExit):
        cli.main(["playground", "--platform", "irc"])
