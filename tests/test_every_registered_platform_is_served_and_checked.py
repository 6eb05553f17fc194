"""``channelkit config-schema``, ``check-config`` and ``build_channels`` cover every
registered chat platform, Slack and Weixin included: the schema's ``platform`` enum and
credentials come from the registry, a valid configuration of each platform passes, a bad
field of each is named by its JSON path, and each one is built as its channel class (with
the shared store where its registry entry says so)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from channelkit import cli
from channelkit.config import build_channels, config_schema, parse_config
from channelkit.errors import ConfigurationError
from channelkit.platforms import (
    CHAT,
    PLATFORMS,
    PlatformSpec,
    Ref,
    chat_platforms,
    register_platform,
    secret_credentials,
)

CHAT_PLATFORMS = [spec.name for spec in chat_platforms()]


def _channel(name: str, **options: Any) -> dict[str, Any]:
    spec = PLATFORMS[name]
    assert spec.playground is not None, f"{name}: the registry has no playground credentials"
    entry_options = {spec.playground.api_base_url_option: "http://127.0.0.1:9", **options}
    return {
        "platform": name,
        "credentials": dict(spec.playground.credentials),
        "options": entry_options,
    }


def _document(*channels: dict[str, Any], **sections: Any) -> dict[str, Any]:
    return {"channels": list(channels), "agent": {"type": "demo"}, **sections}


def _check(tmp_path: Path, document: dict[str, Any], capsys: pytest.CaptureFixture[str]):
    path = tmp_path / "channelkit.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    code = cli.main(["check-config", str(path)])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_schema_lists_every_registered_chat_platform_with_its_credentials(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["config-schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    entry = schema["properties"]["channels"]["items"]
    assert entry["properties"]["platform"]["enum"] == sorted(CHAT_PLATFORMS)
    assert {"slack", "weixin", "dingtalk", "feishu", "telegram"} <= set(CHAT_PLATFORMS)
    branches = {b["if"]["properties"]["platform"]["const"]: b["then"] for b in entry["allOf"]}
    assert set(branches) == set(CHAT_PLATFORMS)
    for spec in chat_platforms():
        credentials = branches[spec.name]["properties"]["credentials"]
        assert spec.credentials_schema is not None
        assert set(credentials["properties"]) == set(spec.credentials_schema["properties"])
        assert credentials["required"] == list(spec.credentials_schema["required"])
        assert credentials["additionalProperties"] is False
    slack = branches["slack"]["properties"]["credentials"]
    assert set(slack["properties"]) == {"botToken", "signingSecret", "appToken"}
    assert slack["required"] == ["botToken"]
    assert branches["weixin"]["properties"]["credentials"]["required"] == ["botToken"]
    # presentation-only platforms are not channels serve can run
    assert "msteams" not in entry["properties"]["platform"]["enum"]


@pytest.mark.parametrize("name", CHAT_PLATFORMS)
def test_a_valid_configuration_of_each_chat_platform_passes_check_config(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _check(tmp_path, _document(_channel(name)), capsys)
    assert (code, err) == (0, "")
    assert out.startswith(f"ok: 1 channel(s): {name} ({name})")


@pytest.mark.parametrize("name", CHAT_PLATFORMS)
@pytest.mark.parametrize(
    ("change", "path", "message"),
    [
        ("unknown option", "channels[0].options.noSuchSetting", "unknown setting"),
        ("unknown credential", "channels[0].credentials.noSuchSecret", "is not a known field"),
        ("missing credential", "channels[0].credentials.{required}", "is required"),
        ("bad ingress", "channels[0].options.ingress", ""),
    ],
)
def test_a_bad_field_of_each_chat_platform_is_named_by_its_json_path(
    name: str,
    change: str,
    path: str,
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = PLATFORMS[name]
    assert spec.credentials_schema is not None
    channel = _channel(name)
    required = spec.credentials_schema["required"][0]
    if change == "unknown option":
        channel["options"]["noSuchSetting"] = 1
    elif change == "unknown credential":
        channel["credentials"]["noSuchSecret"] = "x"
    elif change == "missing credential":
        del channel["credentials"][required]
    else:
        channel["options"]["ingress"] = "carrier-pigeon"
    code, out, err = _check(tmp_path, _document(channel), capsys)
    assert code == 2 and out == ""
    expected = path.format(required=required)
    assert f"invalid configuration: {expected}: {message}" in err, err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("name", "credentials", "options", "path"),
    [
        # Slack: durations in seconds (*_s in SlackConfig, camelCase in the document)
        ("slack", {}, {"streamIntervalS": 0}, "channels[0].options.streamIntervalS"),
        ("slack", {}, {"questionTimeoutS": "soon"}, "channels[0].options.questionTimeoutS"),
        ("slack", {}, {"streaming": "fast"}, "channels[0].options.streaming"),
        ("slack", {"botToken": "xoxp-user-token"}, {}, "channels[0].credentials.botToken"),
        ("slack", {"appToken": "not-an-app-token"}, {}, "channels[0].credentials.appToken"),
        # Weixin
        ("weixin", {}, {"pollingTimeoutS": 500}, "channels[0].options.pollingTimeoutS"),
        ("weixin", {}, {"ticketTtlS": -1}, "channels[0].options.ticketTtlS"),
        ("weixin", {}, {"channelVersion": "two"}, "channels[0].options.channelVersion"),
        ("weixin", {}, {"typing": "yes"}, "channels[0].options.typing"),
        ("weixin", {}, {"baseUrl": "ftp://x"}, "channels[0].options.baseUrl"),
    ],
)
def test_slack_and_weixin_options_are_parsed_by_their_config_classes(
    name: str,
    credentials: dict[str, str],
    options: dict[str, Any],
    path: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    channel = _channel(name, **options)
    channel["credentials"].update(credentials)
    code, _, err = _check(tmp_path, _document(channel), capsys)
    assert code == 2
    assert f"invalid configuration: {path}: " in err, err


@pytest.mark.parametrize(
    ("ingress", "missing", "path"),
    [
        ("events", "signingSecret", "channels[0].credentials.signingSecret"),
        ("socket", "appToken", "channels[0].credentials.appToken"),
    ],
)
def test_slack_names_the_credential_its_ingress_needs(
    ingress: str, missing: str, path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    channel = _channel("slack", ingress=ingress)
    del channel["credentials"][missing]
    code, _, err = _check(tmp_path, _document(channel), capsys)
    assert code == 2
    assert f"{path}: is required with ingress" in err, err
    # and with it, that ingress is accepted
    channel = _channel("slack", ingress=ingress)
    assert _check(tmp_path, _document(channel), capsys)[0] == 0


def test_slack_and_weixin_settings_reach_their_configs_in_seconds() -> None:
    document = _document(
        _channel("slack", streamIntervalS=0.75, questionTimeoutS=30, ingress="socket"),
        _channel("weixin", pollingTimeoutS=20, ticketTtlS=60, typing=False),
    )
    document["channels"][0]["name"] = "team-slack"
    config = parse_config(document, environ={})
    channels = build_channels(config)
    try:
        slack, weixin = channels
        assert type(slack) is PLATFORMS["slack"].channel_class.load()  # type: ignore[union-attr]
        assert type(weixin) is PLATFORMS["weixin"].channel_class.load()  # type: ignore[union-attr]
        assert slack.name == "team-slack" and weixin.name == "weixin"
        assert slack.slack_config.stream_interval_s == 0.75
        assert slack.slack_config.question_timeout_s == 30
        assert slack.slack_config.ingress == "socket"
        assert slack.slack_config.channel_name == "team-slack"
        assert slack.slack_config.api_base_url == "http://127.0.0.1:9"
        assert weixin.weixin_config.polling_timeout_s == 20
        assert weixin.weixin_config.ticket_ttl_s == 60
        assert weixin.weixin_config.typing is False
        assert weixin.weixin_config.base_url == "http://127.0.0.1:9"
    finally:
        for channel in channels:
            channel.close()


def test_build_channels_wires_the_shared_store_where_the_registry_says(
    echo: PlatformSpec,
) -> None:
    pytest.importorskip("redis")
    state = {"redis": {"url": "redis://127.0.0.1:1/0"}}  # building never contacts it
    echo_entry = {"platform": "echo", "credentials": {"token": "t"}}
    document = _document(
        _channel("weixin"), _channel("slack"), _channel("telegram"), echo_entry, state=state
    )
    channels = build_channels(parse_config(document, environ={}))
    try:
        by_name = {channel.name: channel for channel in channels}
        assert PLATFORMS["weixin"].shared_store == "dedup"
        assert by_name["weixin"].state_store is not None
        assert by_name["telegram"].state_store is not None
        assert PLATFORMS["slack"].shared_store == "dedup"  # event dedup and rate buckets
        assert by_name["slack"].state_store is not None
        assert echo.shared_store == "none"  # given nothing
        assert "store" not in by_name["echo"].kwargs
    finally:
        for channel in channels:
            channel.close()


# -- a platform registered at run time is served and checked the same way -----------------
@dataclass(frozen=True)
class EchoConfig:
    """The config of the test platform below."""

    token: str
    channel_name: str = "echo"
    ingress: str = "push"
    delay_s: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.delay_s, int | float) or self.delay_s <= 0:
            raise ConfigurationError("must be a positive number of seconds", "echo.delay_s")


class EchoChannel:
    """A channel that only remembers how it was built."""

    def __init__(self, config: EchoConfig, bridge: Any, **kwargs: Any) -> None:
        self.config = config
        self.name = config.channel_name
        self.kwargs = kwargs

    def close(self, timeout: float = 10.0) -> None:
        return None


ECHO = PlatformSpec(
    name="echo",
    display_name="Echo",
    kind=CHAT,
    docs="platforms/echo.md",
    config_class=Ref(f"{__name__}:EchoConfig"),
    channel_class=Ref(f"{__name__}:EchoChannel"),
    credentials_schema=secret_credentials("token"),
    ingress=("push",),
    name_setting="channelName",
)


@pytest.fixture()
def echo() -> Iterator[PlatformSpec]:
    with register_platform(ECHO) as spec:
        yield spec
    assert "echo" not in PLATFORMS


def test_a_platform_registered_at_run_time_is_in_the_schema_and_checked(
    echo: PlatformSpec, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        "echo"
        in config_schema()["properties"]["channels"]["items"]["properties"]["platform"]["enum"]
    )
    good = {"platform": "echo", "credentials": {"token": "t"}, "options": {"delayS": 2}}
    assert _check(tmp_path, _document(good), capsys)[0] == 0
    bad = {"platform": "echo", "credentials": {"token": "t"}, "options": {"delayS": 0}}
    code, _, err = _check(tmp_path, _document(bad), capsys)
    assert code == 2 and "channels[0].options.delayS: must be a positive number" in err
    (channel,) = build_channels(parse_config(_document(good), environ={}))
    assert isinstance(channel, EchoChannel)
    assert channel.config == EchoConfig(token="t", channel_name="echo", delay_s=2)


def test_an_unregistered_platform_is_rejected_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = {"platform": "echo", "credentials": {"token": "t"}}
    code, _, err = _check(tmp_path, _document(good), capsys)
    assert code == 2 and "channels[0].platform" in err, err
