"""``channels[i].access`` in the configuration file: the schema lists it, ``check-config``
accepts a valid one and names the bad field of an invalid one in one line, and the
channel ``build_channels`` makes enforces it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from channelkit.cli import main
from channelkit.config import build_channels, config_schema, parse_config
from channelkit.core.access import DmPolicy
from channelkit.errors import ConfigurationError


def document(access: Any) -> dict[str, Any]:
    return {
        "channels": [
            {
                "platform": "telegram",
                "credentials": {"botToken": "123456:ABC"},
                "options": {"ingress": "webhook", "apiBaseUrl": "http://127.0.0.1:9"},
                "access": access,
            }
        ]
    }


def test_the_schema_describes_the_access_section() -> None:
    channel = config_schema()["properties"]["channels"]["items"]
    access = channel["properties"]["access"]
    assert access["additionalProperties"] is False
    assert access["properties"]["dm"]["enum"] == ["open", "allowlist", "pairing", "closed"]
    assert access["properties"]["groups"]["enum"] == ["open", "allowlist", "closed"]


def test_a_valid_access_section_reaches_the_channel() -> None:
    config = parse_config(document({"dm": "allowlist", "allowUsers": ["42"], "admins": ["7"]}))
    (channel,) = build_channels(config, bridge=_agent())
    try:
        assert channel.access.config.dm is DmPolicy.ALLOWLIST
        assert channel.access.config.allow_users == frozenset({"42"})
        assert channel.access.is_admin("7") and not channel.access.is_admin("42")
    finally:
        channel.close()


@pytest.mark.parametrize(
    ("access", "path"),
    [
        ({"dm": "friends"}, "channels[0].access.dm"),
        ({"allowList": ["a"]}, "channels[0].access.allowList"),
        ({"allowUsers": "alice"}, "channels[0].access.allowUsers"),
        ({"admins": [""]}, "channels[0].access.admins[0]"),
        ({"requireMention": "yes"}, "channels[0].access.requireMention"),
        ({"groupRules": {"-1": {"require": False}}}, "channels[0].access.groupRules.-1.require"),
    ],
)
def test_a_bad_access_setting_is_named_by_its_path(access: Any, path: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_config(document(access))
    assert info.value.path == path, str(info.value)


def test_check_config_prints_one_line_naming_the_bad_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "bot.json"
    config.write_text(json.dumps(document({"groups": "pairing"})), encoding="utf-8")
    assert main(["check-config", str(config)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "channels[0].access.groups" in err and "pairing" in err


def _agent() -> Any:
    from channelkit.agents import FunctionAgent

    return FunctionAgent(lambda turn: "ok", name="t")
