"""``channelkit check-config --online`` makes serve's start-up checks and reports each.

The credential check of a channel is its platform's ``check_credentials`` entry in the
registry (a platform registered at run time is checked the same way, one without the
entry is reported "not checked"); every check is bounded; a failed check is one line on
stderr naming the channel and the field; the exit status is 4; no secret is printed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from channelkit import cli
from channelkit.config import parse_config
from channelkit.errors import ConfigurationError, CredentialCheckFailed
from channelkit.platforms import (
    CHAT,
    PLATFORMS,
    PRESENTATION_ONLY,
    PlatformSpec,
    Ref,
    register_platform,
    secret_credentials,
)
from channelkit.playground import EmulatorServer
from channelkit.startup_checks import run_startup_checks

SECRET = "gatekeeper-secret-4711"


@dataclass(frozen=True)
class GateConfig:
    """The config of the test platform below."""

    token: str
    channel_name: str = "gate"
    ingress: str = "push"


class GateChannel:
    """A channel that only remembers how it was built."""

    def __init__(self, config: GateConfig, bridge: Any, **kwargs: Any) -> None:
        self.config = config
        self.name = config.channel_name

    def close(self, timeout: float = 10.0) -> None:
        return None


#: what the platform's check saw (config, timeout), in call order
SEEN: list[tuple[GateConfig, float]] = []
#: set to hold the check until released (a platform that never answers)
HOLD = threading.Event()
RELEASE = threading.Event()


def check_gate(config: GateConfig, *, timeout: float) -> None:
    """The test platform's credential check: `open` passes, anything else is refused."""
    SEEN.append((config, timeout))
    if HOLD.is_set():
        RELEASE.wait(30.0)
    if config.token != "open":
        raise CredentialCheckFailed("token", "was refused by Gate (HTTP 401: no)")


GATE = PlatformSpec(
    name="gate",
    display_name="Gate",
    kind=CHAT,
    docs="platforms/gate.md",
    config_class=Ref(f"{__name__}:GateConfig"),
    channel_class=Ref(f"{__name__}:GateChannel"),
    credentials_schema=secret_credentials("token"),
    ingress=("push",),
    name_setting="channelName",
    check_credentials=Ref(f"{__name__}:check_gate"),
)


@pytest.fixture()
def gate() -> Iterator[PlatformSpec]:
    SEEN.clear()
    HOLD.clear()
    RELEASE.clear()
    with register_platform(GATE) as spec:
        yield spec
    RELEASE.set()


def _document(*channels: dict[str, Any]) -> dict[str, Any]:
    return {"channels": list(channels), "agent": {"type": "demo"}}


def _write(tmp_path: Path, document: dict[str, Any]) -> str:
    path = tmp_path / "channelkit.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return str(path)


def test_a_registered_platforms_check_is_what_check_config_online_runs(
    gate: PlatformSpec, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = {"platform": "gate", "name": "front", "credentials": {"token": "open"}}
    bad = {"platform": "gate", "name": "back", "credentials": {"token": SECRET}}
    config = _write(tmp_path, _document(good, bad))

    assert cli.main(["check-config", config, "--online", "--check-timeout", "3"]) == 4
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        "channelkit check-config: channel 'back' (gate): credentials.token was refused by "
        "Gate (HTTP 401: no)"
    ]
    assert "checked: channel 'front' (gate): credentials accepted by Gate" in out
    assert SECRET not in out + err
    assert sorted(c.token for c, _ in SEEN) == sorted(["open", SECRET])
    assert {timeout for _, timeout in SEEN} == {3.0}

    # without --online nothing is asked
    SEEN.clear()
    assert cli.main(["check-config", config]) == 0
    assert SEEN == []


def test_a_check_that_overruns_its_bound_is_reported_failed_in_time(gate: PlatformSpec) -> None:
    HOLD.set()
    config = parse_config(_document({"platform": "gate", "credentials": {"token": "open"}}))
    report = run_startup_checks(config, timeout=0.5)
    assert [r.line for r in report.failures] == [
        "channel 'gate' (gate): credentials could not be checked: no verdict within 1.5 s"
    ]


def test_serve_stops_at_the_first_failure_without_waiting_for_the_others(
    gate: PlatformSpec,
) -> None:
    HOLD.set()  # every check waits for RELEASE, except ...
    doc = _document(
        {"platform": "gate", "name": "slow", "credentials": {"token": "open"}},
        {"platform": "telegram", "credentials": {"botToken": "1:x"}, "options": {}},
    )
    doc["channels"][1]["options"]["apiBaseUrl"] = "http://127.0.0.1:9"  # refused at once
    config = parse_config(doc)
    report = run_startup_checks(config, timeout=20.0, stop_at_first_failure=True)
    (failure,) = report.failures
    assert failure.subject == "channel 'telegram' (telegram)"
    assert "credentials.botToken could not be checked: Telegram could not be reached" in (
        failure.message
    )
    assert report.results == (failure,)


def test_a_platform_without_a_check_is_reported_not_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert PLATFORMS["weixin"].check_credentials is None
    with EmulatorServer(platform="weixin") as weixin:
        defaults = PLATFORMS["weixin"].playground
        assert defaults is not None
        channel = {
            "platform": "weixin",
            "credentials": dict(defaults.credentials),
            "options": {"baseUrl": weixin.url},
        }
        assert cli.main(["check-config", _write(tmp_path, _document(channel)), "--online"]) == 0
    out = capsys.readouterr().out
    assert "not checked: channel 'weixin' (weixin): Weixin (WeChat iLink) offers no" in out
    assert out.rstrip().splitlines()[-1].startswith("ok: 1 channel(s)")


def test_only_chat_platforms_take_a_credential_check() -> None:
    with pytest.raises(ConfigurationError, match=r"^relay\.check_credentials: belongs to chat"):
        PlatformSpec(
            name="relay",
            display_name="Relay",
            kind=PRESENTATION_ONLY,
            docs="platforms/relay.md",
            renderer=Ref("channelkit.platforms.discord.renderer:render"),
            sender=Ref("channelkit.platforms.discord.sender:DiscordSender"),
            check_credentials=Ref(f"{__name__}:check_gate"),
        )
    with pytest.raises(ConfigurationError, match=r"^gate\.check_credentials: "):
        PlatformSpec(**{**_fields(GATE), "check_credentials": "not a reference"})


def _fields(spec: PlatformSpec) -> dict[str, Any]:
    return {name: getattr(spec, name) for name in spec.__dataclass_fields__}


def test_every_builtin_chat_platform_with_an_api_check_names_it_in_the_registry() -> None:
    checked = {n for n, s in PLATFORMS.items() if s.check_credentials is not None}
    assert {"telegram", "slack", "dingtalk", "feishu"} <= checked
    for name in checked:
        assert PLATFORMS[name].is_chat
        assert callable(PLATFORMS[name].check_credentials.load())  # type: ignore[union-attr]


def test_an_agent_program_given_as_a_path_must_exist_and_be_executable(
    gate: PlatformSpec, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "agent.sh").write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")  # mode 644
    channel = {"platform": "gate", "credentials": {"token": "open"}}
    for command, reason in (
        ("./no-such-agent.sh --acp", "program './no-such-agent.sh' does not exist"),
        ("./agent.sh --acp", "program './agent.sh' is not executable"),
    ):
        document = _document(channel)
        document["agent"] = {"type": "acp", "command": command, "cwd": str(tmp_path)}
        assert cli.main(["check-config", _write(tmp_path, document), "--online"]) == 4
        err = capsys.readouterr().err
        assert err.splitlines() == [f"channelkit check-config: agent.command: {reason}"]
