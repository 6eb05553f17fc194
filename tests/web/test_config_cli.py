"""The JSON configuration (schema errors carry JSON paths) and the serve/check CLI."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest
from channelkit import cli
from channelkit.config import build_channels, load_config, parse_config
from channelkit.errors import ConfigurationError

VALID: dict[str, Any] = {
    "channels": [
        {
            "platform": "dingtalk",
            "credentials": {"clientId": "ding-app", "clientSecret": {"env": "CK_TEST_SECRET"}},
            "options": {
                "interactiveCards": {"enabled": True},
                "model": "m1",
                "ingress": "http",
                "cardCallbackRouteKey": "channelkit",
            },
        }
    ],
    "agent": {"type": "function", "function": "channelkit_test_agent_mod:agent"},
    "options": {"maxWorkers": 4},
    "server": {"host": "127.0.0.1", "port": 0},
}
ENV = {"CK_TEST_SECRET": "s3cret"}


def _doc(**changes: Any) -> dict[str, Any]:
    doc = copy.deepcopy(VALID)
    doc.update(changes)
    return doc


def _path_of(doc: Any, environ: dict[str, str] | None = None) -> str | None:
    with pytest.raises(ConfigurationError) as info:
        parse_config(doc, environ=ENV if environ is None else environ)
    return info.value.path


def test_valid_document_resolves_env_secrets() -> None:
    config = parse_config(VALID, environ=ENV)
    spec = config.channels[0]
    assert spec.name == "dingtalk" and spec.credentials["clientSecret"] == "s3cret"
    assert "s3cret" not in repr(config)


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (
            lambda d: d["channels"][0]["credentials"].pop("clientSecret"),
            "channels[0].credentials.clientSecret",
        ),
        (
            lambda d: d["channels"][0]["credentials"].update(clientId=5),
            "channels[0].credentials.clientId",
        ),
        (
            lambda d: d["channels"][0]["credentials"].update(appSecret="x"),
            "channels[0].credentials.appSecret",
        ),
        (lambda d: d["channels"][0].update(platform="icq"), "channels[0].platform"),
        (lambda d: d["channels"][0].update(extra=1), "channels[0].extra"),
        (lambda d: d.update(channels=[]), "channels"),
        (lambda d: d.pop("channels"), "channels"),
        (lambda d: d.update(agent={"type": "acp"}), "agent.command"),
        (lambda d: d.update(agent={"type": "function"}), "agent.function"),
        (lambda d: d["options"].update(maxWorkers=0), "options.maxWorkers"),
        (lambda d: d["options"].update(maxQueuedRuns=0), "options.maxQueuedRuns"),
        (lambda d: d["server"].update(port=70000), "server.port"),
        (lambda d: d["server"].update(engine="wsgiref"), "server.engine"),
    ],
)
def test_schema_errors_name_the_json_path(mutate: Any, path: str) -> None:
    doc = _doc()
    mutate(doc)
    assert _path_of(doc) == path


def test_feishu_credentials_schema() -> None:
    doc = _doc(
        channels=[{"platform": "feishu", "credentials": {"appId": "a", "verificationToken": "v"}}]
    )
    assert _path_of(doc) == "channels[0].credentials.appSecret"


def test_missing_environment_variable_names_the_field() -> None:
    assert _path_of(VALID, environ={}) == "channels[0].credentials.clientSecret"


def test_duplicate_channel_names() -> None:
    doc = _doc(channels=[VALID["channels"][0], VALID["channels"][0]])
    assert _path_of(doc) == "channels[1].name"


def test_load_config_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="not valid JSON"):
        load_config(bad)
    with pytest.raises(ConfigurationError, match="cannot read"):
        load_config(tmp_path / "missing.json")


@pytest.fixture()
def agent_module(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    module = types.ModuleType("channelkit_test_agent_mod")
    module.agent = lambda turn: "hi"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)


def test_build_channels_and_platform_errors_with_paths(agent_module: None) -> None:
    channels = build_channels(parse_config(VALID, environ=ENV))
    try:
        assert [c.name for c in channels] == ["dingtalk"]
        assert [r.path for r in channels[0].ingress_routes()] == [
            "/dingtalk/robot",
            "/dingtalk/card",
        ]
    finally:
        for channel in channels:
            channel.close()
    doc = _doc()
    doc["channels"][0]["options"]["interactiveCards"] = {"questionCard": {"timeoutMs": -1}}
    with pytest.raises(ConfigurationError) as info:
        build_channels(parse_config(doc, environ=ENV))
    assert info.value.path == "channels[0].options.interactiveCards.questionCard.timeoutMs"


def test_build_agent_import_error_names_the_field() -> None:
    doc = _doc(agent={"type": "function", "function": "no_such_module_ck:agent"})
    with pytest.raises(ConfigurationError) as info:
        build_channels(parse_config(doc, environ=ENV))
    assert info.value.path == "agent.function"


def _write(tmp_path: Path, doc: Any) -> str:
    path = tmp_path / "channelkit.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


def test_serve_refuses_without_a_production_server(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    agent_module: None,
) -> None:
    monkeypatch.setenv("CK_TEST_SECRET", "s3cret")
    monkeypatch.setattr(cli, "_pick_engine", lambda preferred: None)
    assert cli.main(["serve", "--config", _write(tmp_path, VALID)]) == 3
    err = capsys.readouterr().err
    assert "python -m pip install waitress" in err and "gunicorn" in err


def test_serve_builds_the_app_and_closes_channels(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    agent_module: None,
) -> None:
    monkeypatch.setenv("CK_TEST_SECRET", "s3cret")
    monkeypatch.setattr(cli, "_pick_engine", lambda preferred: "waitress")
    seen: dict[str, Any] = {}

    def fake_run(engine: str, app: Any, host: str, port: int, threads: int) -> None:
        environ = {
            "REQUEST_METHOD": "GET",
            "PATH_INFO": "/healthz",
            "wsgi.input": io.BytesIO(),
        }
        seen["healthz"] = b"".join(app(environ, lambda status, headers: seen.update(s=status)))
        seen.update(engine=engine, host=host, port=port, threads=threads)

    monkeypatch.setattr(cli, "run_server", fake_run)
    # made-up credentials: the start-up checks would ask the real platform
    argv = ["serve", "--config", _write(tmp_path, VALID), "--port", "8123", "--skip-startup-checks"]
    assert cli.main(argv) == 0
    assert json.loads(seen["healthz"])["ok"] is True and seen["s"].startswith("200")
    assert (seen["engine"], seen["host"], seen["port"], seen["threads"]) == (
        "waitress",
        "127.0.0.1",
        8123,
        8,
    )
    assert "/dingtalk/robot" in capsys.readouterr().out


def test_serve_and_check_config_report_invalid_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = _doc()
    doc["channels"][0]["credentials"].pop("clientId")
    path = _write(tmp_path, doc)
    assert cli.main(["serve", "--config", path]) == 2
    assert "channels[0].credentials.clientId" in capsys.readouterr().err
    assert cli.main(["check-config", path]) == 2
    assert "channels[0].credentials.clientId" in capsys.readouterr().err


def test_info_and_schema_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["info"]) == 0
    assert "platform adapters: dingtalk" in capsys.readouterr().out
    assert cli.main(["config-schema"]) == 0
    assert json.loads(capsys.readouterr().out)["required"] == ["channels"]


def test_the_documented_example_is_a_valid_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    page = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
    block = re.search(r"```json\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
    assert block is not None
    for name in ("DINGTALK_CLIENT_SECRET", "DINGTALK_CARD_SECRET", "TELEGRAM_WEBHOOK_SECRET"):
        monkeypatch.setenv(name, "x")
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123456:ABC-def")  # adapter settings are checked
    config = parse_config(json.loads(block.group(1)))
    assert [c.platform for c in config.channels] == ["dingtalk", "telegram"]
