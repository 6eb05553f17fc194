"""``channelkit pins`` / ``unpin`` against the playground emulators: Telegram
(``getChat``'s ``pinned_message``: the most recent pin; ``unpinChatMessage``) and Feishu
(``GET`` / ``DELETE /open-apis/im/v1/pins``) exit 0 and change what the emulator shows;
DingTalk robots have no pins, so both exit 3 saying so and call nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from channelkit import cli
from channelkit.playground import Playground

CREDENTIALS = {
    "dingtalk": (
        {"clientId": "playground-app", "clientSecret": "playground-secret"},
        lambda url: {"apiBaseUrl": url},
    ),
    "feishu": (
        {
            "appId": "cli_playground",
            "appSecret": "playground-secret",
            "verificationToken": "playground-verification-token",
        },
        lambda url: {"baseUrl": url},
    ),
    "telegram": (
        {"botToken": "123456:playground-bot-token"},
        lambda url: {"apiBaseUrl": url},
    ),
}


@pytest.fixture
def playground(request: pytest.FixtureRequest) -> Iterator[Playground]:
    with Playground(platform=request.param) as pg:
        yield pg


def _chat(pg: Playground) -> str:
    if pg.platform == "dingtalk":
        return "cidOpsGroup"
    emulator: Any = pg.emulator
    return str(emulator.chat_id)


def _run(
    tmp_path: Path, pg: Playground, capsys: pytest.CaptureFixture[str], command: str, *extra: str
) -> tuple[int, str, str]:
    credentials, options = CREDENTIALS[pg.platform]
    doc = {
        "channels": [
            {
                "platform": pg.platform,
                "name": "ops",
                "credentials": credentials,
                "options": options(pg.url),
            }
        ]
    }
    path = tmp_path / "channelkit.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    code = cli.main([command, "--config", str(path), "--to", _chat(pg), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def _pinned(pg: Playground, message_id: str) -> bool:
    views = pg.emulator.state()["views"]
    view = views.get(message_id) or next(
        (v for v in views.values() if v.get("messageId") == message_id), {}
    )
    return bool(view.get("pinned"))


@pytest.mark.parametrize("playground", ["telegram", "feishu"], indirect=True)
def test_pins_lists_the_pinned_message_and_unpin_removes_it(
    tmp_path: Path, playground: Playground, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(tmp_path, playground, capsys, "pins")
    assert (code, out) == (0, ""), err  # nothing pinned yet
    code, out, err = _run(tmp_path, playground, capsys, "send", "--text", "keep me", "--pin")
    assert code == 0, err
    message_id = out.strip()
    assert _pinned(playground, message_id)
    code, out, err = _run(tmp_path, playground, capsys, "pins")
    assert (code, out.split()) == (0, [message_id]), err
    code, out, err = _run(tmp_path, playground, capsys, "unpin", "--message", message_id)
    assert code == 0, err
    assert not _pinned(playground, message_id)
    code, out, err = _run(tmp_path, playground, capsys, "pins")
    assert (code, out) == (0, ""), err


@pytest.mark.parametrize("playground", ["telegram"], indirect=True)
def test_telegram_pins_shows_the_most_recent_pin_still_pinned(
    tmp_path: Path, playground: Playground, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = []
    for text in ("first", "second"):
        code, out, err = _run(tmp_path, playground, capsys, "send", "--text", text, "--pin")
        assert code == 0, err
        ids.append(out.strip())
    assert _run(tmp_path, playground, capsys, "pins")[1].split() == [ids[1]]
    assert _run(tmp_path, playground, capsys, "unpin", "--message", ids[1])[0] == 0
    assert _run(tmp_path, playground, capsys, "pins")[1].split() == [ids[0]]
    calls = [c["path"] for c in playground.emulator.calls()]
    assert "/bot<token>/getChat" in calls and "/bot<token>/unpinChatMessage" in calls


@pytest.mark.parametrize("playground", ["feishu"], indirect=True)
def test_feishu_pins_lists_every_pin_newest_first(
    tmp_path: Path, playground: Playground, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = []
    for text in ("first", "second"):
        code, out, err = _run(tmp_path, playground, capsys, "send", "--text", text, "--pin")
        assert code == 0, err
        ids.append(out.strip())
    code, out, err = _run(tmp_path, playground, capsys, "pins")
    assert (code, out.split()) == (0, [ids[1], ids[0]]), err
    lists = playground.emulator.calls("/open-apis/im/v1/pins", method="GET")
    assert lists and lists[-1]["query"]["chat_id"] == _chat(playground)


@pytest.mark.parametrize("playground", ["dingtalk"], indirect=True)
@pytest.mark.parametrize("command", [["unpin", "--message", "msg-1"], ["pins"]])
def test_dingtalk_has_no_pins_so_unpin_and_pins_exit_3(
    tmp_path: Path,
    playground: Playground,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
) -> None:
    def asked() -> list[str]:  # what the CLI asked (not the playground's Stream gateway)
        return [c["path"] for c in playground.emulator.calls() if "/gateway/" not in c["path"]]

    before = asked()
    code, out, err = _run(tmp_path, playground, capsys, *command)
    assert code == 3 and out == ""
    assert "not supported" in err and "dingtalk cannot" in err
    assert asked() == before  # nothing was asked of the platform
