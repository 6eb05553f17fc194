"""``channelkit send`` / ``pin`` against the playground emulators (DingTalk, Feishu,
Telegram): the presentation shows up in the emulator, ``--pin`` pins it, a required pin
that fails after delivery exits 4 printing the message id, bad JSON exits 2 naming the
field, a platform refusal exits 3."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from channelkit import cli
from channelkit.playground import Playground
from channelkit.playground.emulator import HttpReply

PRESENTATION = {
    "title": "Deploy finished",
    "tone": "success",
    "blocks": [
        {"type": "text", "text": "All 3 services are up."},
        {"type": "context", "text": "took 42 s"},
        {
            "type": "buttons",
            "buttons": [
                {"label": "Open dashboard", "url": "https://example.test/dash"},
                {"label": "Roll back", "command": "/rollback"},
            ],
        },
    ],
}

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


@pytest.fixture(params=["dingtalk", "feishu", "telegram"])
def platform(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def playground(platform: str) -> Iterator[Playground]:
    with Playground(platform=platform) as pg:
        yield pg


def _config(tmp_path: Path, pg: Playground) -> str:
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
    return str(path)


def _chat(pg: Playground) -> str:
    if pg.platform == "dingtalk":
        return "cidOpsGroup"
    emulator: Any = pg.emulator
    return str(emulator.chat_id)


def _send(tmp_path: Path, pg: Playground, *extra: str) -> list[str]:
    return [
        "send",
        "--config",
        _config(tmp_path, pg),
        "--channel",
        "ops",
        "--to",
        _chat(pg),
        *extra,
    ]


def _shown(pg: Playground) -> str:
    """Everything the bot's messages show in the emulator, as one string."""
    calls = [c for c in pg.emulator.calls() if c["method"] in ("POST", "PUT", "PATCH")]
    return json.dumps([c["body"] for c in calls], ensure_ascii=False)


def test_a_presentation_appears_in_the_emulator_with_its_message_id(
    tmp_path: Path, playground: Playground, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(_send(tmp_path, playground, "--presentation", json.dumps(PRESENTATION)))
    out, err = capsys.readouterr()
    assert code == 0, err
    message_id = out.strip()
    assert message_id
    shown = _shown(playground)
    assert "Deploy finished" in shown and "All 3 services are up." in shown
    assert "https://example.test/dash" in shown
    state = playground.emulator.state()
    timeline = json.dumps(state["timeline"], ensure_ascii=False) + json.dumps(
        state.get("views", {}), ensure_ascii=False
    )
    assert "Deploy finished" in timeline or message_id in timeline


def test_presentation_from_a_file_and_text_before_it(
    tmp_path: Path, playground: Playground, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "card.json"
    file.write_text(json.dumps(PRESENTATION), encoding="utf-8")
    code = cli.main(
        _send(tmp_path, playground, "--text", "Heads up:", "--presentation", f"@{file}")
    )
    assert code == 0, capsys.readouterr().err
    shown = _shown(playground)
    assert "Heads up:" in shown and "Deploy finished" in shown


@pytest.mark.parametrize("platform", ["feishu", "telegram"], indirect=True)
def test_pin_flag_pins_the_sent_message(
    tmp_path: Path, playground: Playground, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(
        _send(tmp_path, playground, "--presentation", json.dumps(PRESENTATION), "--pin")
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    message_id = out.strip()
    pins = [c for c in playground.emulator.calls() if "pin" in c["path"].lower()]
    assert len(pins) == 1 and pins[0]["status"] == 200
    assert message_id in json.dumps(pins[0]["body"])
    # and the existing message can be pinned again by id
    assert (
        cli.main(
            [
                "pin",
                "--config",
                _config(tmp_path, playground),
                "--to",
                _chat(playground),
                "--message",
                message_id,
            ]
        )
        == 0
    )


@pytest.mark.parametrize("platform", ["dingtalk"], indirect=True)
def test_a_required_pin_the_platform_cannot_do_exits_4_with_the_message_id(
    tmp_path: Path, playground: Playground, capsys: pytest.CaptureFixture[str]
) -> None:
    delivery = json.dumps({"pin": {"enabled": True, "required": True}})
    args = _send(tmp_path, playground, "--presentation", json.dumps(PRESENTATION))
    code = cli.main([*args, "--delivery", delivery])
    out, err = capsys.readouterr()
    assert code == 4
    message_id = out.strip()
    sends = playground.emulator.calls("/v1.0/robot/groupMessages/send")
    assert len(sends) == 1 and sends[0]["response"]["processQueryKey"] == message_id
    assert "pin" in err and message_id in err


@pytest.mark.parametrize("platform", ["telegram"], indirect=True)
def test_a_required_pin_refused_after_delivery_exits_4_with_the_message_id(
    tmp_path: Path,
    playground: Playground,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    emulator: Any = playground.emulator
    refuse = lambda params: HttpReply(  # noqa: E731
        400, {"ok": False, "error_code": 400, "description": "Bad Request: not enough rights"}
    )
    monkeypatch.setitem(emulator._methods, "pinchatmessage", refuse)
    delivery = json.dumps({"pin": {"enabled": True, "required": True}})
    args = _send(tmp_path, playground, "--presentation", json.dumps(PRESENTATION))
    code = cli.main([*args, "--delivery", delivery])
    out, err = capsys.readouterr()
    assert code == 4
    message_id = out.strip()
    assert emulator.card(message_id) is not None  # the message was delivered
    assert "not enough rights" in err


@pytest.mark.parametrize("platform", ["telegram"], indirect=True)
@pytest.mark.parametrize(
    ("presentation", "path"),
    [
        (
            {"blocks": [{"type": "buttons", "buttons": [{"label": "x"}]}]},
            "presentation.blocks[0].buttons[0].value",
        ),
        (
            {"blocks": [{"type": "text", "text": "ok"}, {"type": "chart"}]},
            "presentation.blocks[1].type",
        ),
        ({"title": "t", "colour": "red"}, "presentation.colour"),
    ],
)
def test_invalid_presentation_exits_2_naming_the_path_and_sends_nothing(
    tmp_path: Path,
    playground: Playground,
    capsys: pytest.CaptureFixture[str],
    presentation: Any,
    path: str,
) -> None:
    code = cli.main(_send(tmp_path, playground, "--presentation", json.dumps(presentation)))
    err = capsys.readouterr().err
    assert code == 2 and path in err
    assert not playground.emulator.calls(method="POST") or all(
        "sendMessage" not in c["path"] for c in playground.emulator.calls()
    )


@pytest.mark.parametrize("platform", ["telegram"], indirect=True)
def test_malformed_json_and_missing_input_exit_2(
    tmp_path: Path, playground: Playground, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(_send(tmp_path, playground, "--presentation", "{not json")) == 2
    assert "--presentation: not valid JSON" in capsys.readouterr().err
    assert cli.main(_send(tmp_path, playground)) == 2
    assert "nothing to send" in capsys.readouterr().err
    assert cli.main(_send(tmp_path, playground, "--text", "x", "--delivery", '{"pin": 3}')) == 2
    assert "delivery.pin" in capsys.readouterr().err


@pytest.mark.parametrize("platform", ["telegram"], indirect=True)
def test_a_platform_refusal_exits_3(
    tmp_path: Path, playground: Playground, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["send", "--config", _config(tmp_path, playground), "--to", "999", "--text", "hi"]
    assert cli.main(args) == 3
    assert "chat not found" in capsys.readouterr().err


@pytest.mark.parametrize("platform", ["telegram"], indirect=True)
def test_silent_sends_without_notification(
    tmp_path: Path, playground: Playground, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(_send(tmp_path, playground, "--text", "quiet", "--silent")) == 0
    sends = playground.emulator.calls("/bot<token>/sendMessage")
    sends = sends or [c for c in playground.emulator.calls() if c["path"].endswith("sendMessage")]
    assert sends[-1]["body"]["disable_notification"] is True
