"""``channelkit send --file PATH --image PATH`` (issue 25, outbound) against the
playground emulators: on Telegram the files are uploaded in the order given after the
text, byte for byte, each message id printed; a path outside ``--files-root`` exits 2
before anything is read or sent; on a platform that does not upload files yet
(Feishu) the chat gets a line naming the file and the command exits 3."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from channelkit import cli
from channelkit.playground import Playground

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
CREDENTIALS: dict[str, tuple[dict[str, str], str]] = {
    "telegram": ({"botToken": "123456:playground-bot-token"}, "apiBaseUrl"),
    "feishu": (
        {
            "appId": "cli_playground",
            "appSecret": "playground-secret",
            "verificationToken": "playground-verification-token",
        },
        "baseUrl",
    ),
}


@pytest.fixture
def telegram() -> Iterator[Playground]:
    with Playground(platform="telegram") as pg:
        yield pg


def _args(tmp_path: Path, pg: Playground, *extra: str) -> list[str]:
    credentials, url_option = CREDENTIALS[pg.platform]
    doc = {
        "channels": [
            {
                "platform": pg.platform,
                "name": "ops",
                "credentials": credentials,
                "options": {url_option: pg.url},
            }
        ]
    }
    config = tmp_path / "channelkit.json"
    config.write_text(json.dumps(doc), encoding="utf-8")
    emulator: Any = pg.emulator
    chat = str(getattr(emulator, "chat_id", "oc_playground_chat"))
    return ["send", "--config", str(config), "--to", chat, *extra]


def _files(pg: Playground) -> list[dict[str, Any]]:
    views = pg.emulator.state().get("views", {})
    order = [e["card"] for e in pg.emulator.timeline() if e.get("kind") == "card"]
    return [f for key in order for f in views.get(key, {}).get("files", [])]


def test_text_then_files_in_order_byte_for_byte(
    tmp_path: Path, telegram: Playground, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    (tmp_path / "chart.png").write_bytes(PNG)
    (tmp_path / "notes.txt").write_bytes(b"line one\nline two\n")
    monkeypatch.chdir(tmp_path)
    code = cli.main(
        _args(
            tmp_path,
            telegram,
            "--text",
            "Reports:",
            "--file",
            "notes.txt",
            "--image",
            "chart.png",
            "--caption",
            "weekly",
        )
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    ids = out.split()
    assert len(ids) == 3  # the text's message, then each file's
    files = _files(telegram)
    assert [f["name"] for f in files] == ["notes.txt", "chart.png"]
    for file, data in zip(files, (b"line one\nline two\n", PNG), strict=True):
        got = requests.get(f"{telegram.url}{file['url']}", timeout=10).content
        assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest()
    methods = [c["path"].rsplit("/", 1)[1] for c in telegram.emulator.calls()]
    assert methods.index("sendDocument") < methods.index("sendPhoto")


def test_a_path_outside_the_files_root_exits_2_before_anything_is_sent(
    tmp_path: Path, telegram: Playground, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    secret = tmp_path / "secret.key"
    secret.write_bytes(b"never sent")
    secret.chmod(0)
    code = cli.main(_args(tmp_path, telegram, "--file", str(secret), "--files-root", str(root)))
    err = capsys.readouterr().err
    assert code == cli.EXIT_BAD_INPUT, err
    assert "secret.key: is outside the allowed root" in err
    assert _files(telegram) == []


def test_a_refused_upload_tells_the_chat_and_exits_3(
    tmp_path: Path,
    telegram: Playground,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: Any,
) -> None:
    (tmp_path / "notes.txt").write_bytes(b"notes")
    monkeypatch.chdir(tmp_path)
    refused = requests.post(
        f"{telegram.url}/_emulator/files/fail",
        json={"status": 400, "description": "Bad Request: wrong file type", "times": 1},
        timeout=10,
    )
    assert refused.status_code == 200, refused.text
    code = cli.main(_args(tmp_path, telegram, "--file", "notes.txt"))
    err = capsys.readouterr().err
    assert code == cli.EXIT_REFUSED, err
    assert "not delivered (the chat was told)" in err
    assert _files(telegram) == []
    told = [
        c["body"].get("text", "")
        for c in telegram.emulator.calls()
        if c["path"].endswith("/sendMessage")
    ]
    assert len([t for t in told if "notes.txt" in t]) == 1, told
