"""Every place that lists platforms agrees with ``channelkit.platforms.PLATFORMS``: the
front door (its ``__all__`` and its static ``TYPE_CHECKING`` imports), the CLI's
choices, the playground and ``EmulatorServer``, the configuration schema, the token
providers of the generated clients; and the registry agrees with the platform packages
it describes (their folders, ingress modes, presentation modules and pin support)."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
from pathlib import Path
from typing import Any

import channelkit
import pytest
from channelkit import cli
from channelkit.cluster_config import cluster_kwargs
from channelkit.config import CONFIG_SCHEMA, config_schema
from channelkit.errors import ConfigurationError
from channelkit.http.auth import PROVIDERS, RefreshingTokenProvider
from channelkit.platforms import PLATFORMS, PlatformSpec, chat_platforms
from channelkit.playground import PLATFORMS as PLAYGROUND_PLATFORMS
from channelkit.playground import EmulatorServer, Playground
from channelkit.playground.app import INGRESS as PLAYGROUND_INGRESS

PACKAGE = Path(channelkit.__file__).resolve().parent
CHAT = [spec.name for spec in chat_platforms()]
EMULATED = [name for name, spec in PLATFORMS.items() if spec.playground is not None]


def _front_door_platform_names() -> dict[str, str]:
    """Every chat platform's channel and config class name -> its module (registry)."""
    names: dict[str, str] = {}
    for spec in chat_platforms():
        for ref in (spec.channel_class, spec.config_class):
            assert ref is not None
            names[ref.name] = ref.module
    return names


def _type_checking_imports() -> dict[str, str]:
    """name -> module of every ``from channelkit.platforms... import`` under
    ``if TYPE_CHECKING:`` in channelkit/__init__.py."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and (statement.module or "").startswith(
                    "channelkit.platforms"
                ):
                    for alias in statement.names:
                        found[alias.name] = str(statement.module)
    return found


def test_the_front_door_names_every_chat_platform_class_and_nothing_else() -> None:
    expected = _front_door_platform_names()
    assert {"SlackChannel", "WeixinConfig", "DingtalkChannel"} <= set(expected)
    assert _type_checking_imports() == expected
    exported = {
        name
        for name in channelkit.__all__
        if name.endswith(("Channel", "Config")) and name != "ChannelBase"
    }
    assert exported == set(expected)
    for name, module in expected.items():
        assert getattr(channelkit, name) is getattr(importlib.import_module(module), name)


def test_the_cli_offers_the_registered_platforms() -> None:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    play = sub.choices["playground"]  # type: ignore[index]
    platform = next(a for a in play._actions if a.dest == "platform")
    assert list(platform.choices) == EMULATED
    ingress = next(a for a in play._actions if a.dest == "ingress")
    for name in EMULATED:
        if len(PLATFORMS[name].ingress) > 1:
            assert f"{name} {' or '.join(PLATFORMS[name].ingress)}" in str(ingress.help)
    send = sub.choices["send"]  # type: ignore[index]
    to = next(a for a in send._actions if a.dest == "to")
    for spec in chat_platforms():
        assert spec.chat_id_help in str(to.help)
    pin = sub.choices["pin"]  # type: ignore[index]
    pinning = [spec.name for spec in chat_platforms() if "pins" in spec.capabilities]
    assert {"feishu", "telegram"} <= set(pinning) and "dingtalk" not in pinning
    assert f"({', '.join(pinning)})" in str(pin.description)


def test_info_lists_every_registered_platform(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["info"]) == 0
    line = next(
        x for x in capsys.readouterr().out.splitlines() if x.startswith("platform adapters:")
    )
    for name, spec in PLATFORMS.items():
        assert (name if spec.is_chat else f"{name} (presentation only)") in line


def test_the_playground_emulates_the_registered_platforms_with_their_ingress() -> None:
    assert list(PLAYGROUND_PLATFORMS) == EMULATED
    assert {"dingtalk", "feishu", "telegram", "slack", "weixin"} <= set(EMULATED)
    assert {name: PLATFORMS[name].ingress for name in EMULATED} == PLAYGROUND_INGRESS


@pytest.mark.parametrize("name", EMULATED)
def test_the_playground_builds_each_platform_from_its_registry_entry(name: str) -> None:
    spec = PLATFORMS[name]
    assert spec.playground is not None and spec.channel_class is not None
    playground = Playground(platform=name, demo_delay=0.01)
    try:
        assert type(playground.channel) is spec.channel_class.load()
        assert type(playground.emulator) is spec.playground.emulator.load()
        assert playground.ingress == spec.default_ingress
    finally:
        playground.close()


@pytest.mark.parametrize("name", EMULATED)
def test_emulator_server_serves_each_registered_emulator(name: str) -> None:
    spec = PLATFORMS[name]
    assert spec.playground is not None
    with EmulatorServer(platform=name) as server:
        assert type(server.emulator) is spec.playground.emulator.load()
        assert server.url.startswith("http://127.0.0.1:")


def test_emulator_server_names_the_choices_for_a_platform_without_an_emulator() -> None:
    with pytest.raises(ValueError, match="platform: must be one of dingtalk, feishu") as info:
        EmulatorServer(platform="msteams")
    assert "'msteams'" in str(info.value)


def test_the_configuration_schema_lists_the_chat_platforms() -> None:
    enum = config_schema()["properties"]["channels"]["items"]["properties"]["platform"]["enum"]
    assert enum == sorted(CHAT)
    assert config_schema() == CONFIG_SCHEMA


def test_the_token_providers_are_the_registered_ones() -> None:
    expected = [name for name, spec in PLATFORMS.items() if spec.token_provider is not None]
    assert list(PROVIDERS) == expected == ["dingtalk", "feishu", "msteams"]
    for name in expected:
        assert issubclass(PROVIDERS[name], RefreshingTokenProvider)  # type: ignore[arg-type]
    with pytest.raises(KeyError):
        PROVIDERS["telegram"]  # a static bot token: no refreshing provider


@dataclasses.dataclass
class _Config:
    raw: dict[str, Any]
    state: dict[str, Any]
    channels: tuple[Any, ...] = ()


@pytest.mark.parametrize("name", CHAT)
def test_the_shared_store_goes_where_the_registry_says(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = object()
    monkeypatch.setattr("channelkit.cluster_config.build_state_store", lambda config: store)
    config = _Config(raw={"state": {"redis": {"url": "redis://h"}}}, state={"redis": {}})
    kwargs = cluster_kwargs(config, name)
    mode = PLATFORMS[name].shared_store
    assert (kwargs.get("store") is store) == (mode != "none")
    # the lease settings: a cluster platform's, and a dedup platform's whose channel keeps
    # a run journal lease in the store (it takes them)
    channel_class = PLATFORMS[name].channel_class
    assert channel_class is not None
    takes = "cluster_options" in inspect.signature(channel_class.load()).parameters
    assert ("cluster_options" in kwargs) == (mode == "cluster" or (mode == "dedup" and takes))
    if name in ("feishu", "slack", "discord"):
        assert "cluster_options" in kwargs
    assert cluster_kwargs(_Config(raw={}, state={}), name) == {}


# -- the registry agrees with the packages it describes -------------------------------------
def test_every_platform_package_is_registered() -> None:
    folders = {
        p.name
        for p in (PACKAGE / "platforms").iterdir()
        if p.is_dir() and (p / "__init__.py").is_file() and p.name != "common"
    }
    assert folders == set(PLATFORMS)


@pytest.mark.parametrize("name", CHAT)
def test_each_chat_platform_ingress_matches_its_config(name: str) -> None:
    spec: PlatformSpec = PLATFORMS[name]
    assert spec.config_class is not None
    config_class = spec.config_class.load()
    module = importlib.import_module(config_class.__module__)
    assert tuple(module.INGRESS_MODES) == spec.ingress
    default = {f.name: f.default for f in dataclasses.fields(config_class)}["ingress"]
    assert default == spec.default_ingress


@pytest.mark.parametrize("name", list(PLATFORMS))
def test_each_platform_presentation_modules_and_pins_match_its_entry(name: str) -> None:
    spec = PLATFORMS[name]
    if spec.renderer is None:
        assert "presentation" not in spec.capabilities and "pins" not in spec.capabilities
        return
    assert spec.sender is not None
    assert callable(spec.renderer.load())
    assert name == importlib.import_module(spec.renderer.module).PLATFORM
    sender = spec.sender.load()
    assert sender.platform == name
    assert sender.delivery_capabilities.pin == ("pins" in spec.capabilities)


def test_cluster_config_imports_nothing_from_config() -> None:
    """``config`` imports ``cluster_config``; the reverse edge (any import statement,
    module level, in a function or under TYPE_CHECKING) would be a cycle."""
    tree = ast.parse((PACKAGE / "cluster_config.py").read_text(encoding="utf-8"))
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            modules.add(node.module or "")
            modules.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
    assert "channelkit.config" not in modules
    assert not any(m == "channelkit" or m.startswith("channelkit.config.") for m in modules)


def test_a_registry_lookup_of_an_unknown_platform_names_the_known_ones() -> None:
    from channelkit.platforms import get_platform

    with pytest.raises(ConfigurationError, match="unknown platform 'icq'") as info:
        get_platform("icq")
    assert info.value.path == "platform" and "weixin" in str(info.value)


class PagerConfig:
    """The config class of the run-time platform below."""


class PagerChannel:
    """The channel class of the run-time platform below."""


def test_the_front_door_resolves_a_platform_registered_at_run_time() -> None:
    from channelkit.platforms import CHAT as CHAT_KIND
    from channelkit.platforms import Ref, register_platform, secret_credentials

    spec = PlatformSpec(
        name="pager",
        display_name="Pager",
        kind=CHAT_KIND,
        docs="platforms/pager.md",
        config_class=Ref(f"{__name__}:PagerConfig"),
        channel_class=Ref(f"{__name__}:PagerChannel"),
        credentials_schema=secret_credentials("token"),
        ingress=("push",),
    )
    with pytest.raises(AttributeError, match="PagerChannel"):
        channelkit.PagerChannel  # noqa: B018
    try:
        with register_platform(spec):
            assert channelkit.PagerChannel is PagerChannel
            assert channelkit.PagerConfig is PagerConfig
    finally:
        vars(channelkit).pop("PagerChannel", None)
        vars(channelkit).pop("PagerConfig", None)
