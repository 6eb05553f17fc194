"""``channelkit playground --set KEY=VALUE``: the emulated channel's settings by their path
in the configuration file (JSON values, else strings), validated like ``check-config``;
a bad key or value is one line and exit status 2, before anything listens."""

from __future__ import annotations

import time
from typing import Any

import pytest
import requests
from channelkit.cli import main
from channelkit.core.access import DmPolicy
from channelkit.core.text import MSG_ACCESS_NOT_ALLOWED
from channelkit.playground import Playground
from channelkit.playground.overrides import channel_options, parse_settings


class _Started(Exception):
    """Raised by the stand-in Playground: the CLI got this far."""


def test_the_settings_reach_the_playground_channel(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def fake(**kwargs: Any) -> None:
        seen.update(kwargs)
        raise _Started

    monkeypatch.setattr("channelkit.playground.Playground", fake)
    argv = ["playground", "--platform", "telegram", "--set", "access.dm=allowlist"]
    more = ["--set", 'access.allowUsers=["424242"]', "--set", "options.busy=collect"]
    assert main([*argv, *more]) != 0  # the stand-in stops it once it got the settings
    options = seen["channel_options"]
    assert options["access"].dm is DmPolicy.ALLOWLIST
    assert options["access"].allow_users == frozenset({"424242"})
    assert options["busy"] == "collect"


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ("access.dm=friends", "--set access.dm: 'friends' is not one of"),
        ("access.dmm=open", "--set access.dmm: is not a known field"),
        ("access.allowUsers=alice", "--set access.allowUsers: 'alice' is not of type 'array'"),
        ("access.requireMention=maybe", "--set access.requireMention: 'maybe' is not of type"),
        ("sessionScope=chat", "--set sessionScope: is not a setting the playground can change"),
        ("options.maxWorkers=3", "--set options.maxWorkers: is not a known field"),
        ("access.dm", "--set: must be KEY=VALUE"),
        ("access..dm=open", "--set access..dm: is not a dotted path"),
    ],
)
def test_a_bad_setting_is_one_line_with_status_2(
    setting: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["playground", "--platform", "telegram", "--port", "0", "--set", setting])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"channelkit playground: {expected}"), err


def test_a_channel_set_to_allowlist_refuses_a_stranger_in_the_emulator() -> None:
    settings = parse_settings(["access.dm=allowlist", 'access.allowUsers=["424242"]'])
    with Playground(platform="telegram", channel_options=channel_options(settings)) as pg:
        response = requests.post(
            f"{pg.url}/_emulator/send", json={"text": "hi", "userId": "777"}, timeout=5
        )
        assert response.status_code == 200 and response.json()["status"] == 200
        assert pg.channel.wait_idle(10)
        deadline = time.monotonic() + 10
        while MSG_ACCESS_NOT_ALLOWED not in bot_texts(pg.url):
            assert time.monotonic() < deadline, bot_texts(pg.url)
            time.sleep(0.02)


def bot_texts(url: str) -> list[str]:
    state = requests.get(f"{url}/_emulator/state", timeout=5).json()
    views = state["views"]
    return [
        str(views[e["card"]].get("text", "")) if e["kind"] == "card" else str(e.get("text", ""))
        for e in state["timeline"]
        if e.get("from") == "bot" and (e["kind"] != "card" or e["card"] in views)
    ]
