"""``channelkit.platforms``: a `PlatformSpec` is frozen and validated on construction
(every error names the field), `register_platform` refuses a duplicate name, returns a
handle whose ``undo()`` (or context-manager exit) takes the entry back out or restores
the one it replaced, and importing the registry loads no platform package."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
from typing import Any

import pytest
from channelkit.errors import ConfigurationError
from channelkit.platforms import (
    CHAT,
    PLATFORMS,
    PRESENTATION_ONLY,
    PlatformSpec,
    PlaygroundDefaults,
    Ref,
    register_platform,
    secret_credentials,
)

CHAT_FIELDS: dict[str, Any] = {
    "name": "pager",
    "display_name": "Pager",
    "kind": CHAT,
    "docs": "platforms/pager.md",
    "config_class": Ref("channelkit.platforms.telegram:TelegramConfig"),
    "channel_class": Ref("channelkit.platforms.telegram:TelegramChannel"),
    "credentials_schema": secret_credentials("botToken"),
    "ingress": ("polling", "webhook"),
}


def _spec(**changes: Any) -> PlatformSpec:
    return PlatformSpec(**{**CHAT_FIELDS, **changes})


@pytest.mark.parametrize(
    ("changes", "path", "message"),
    [
        ({"name": "Pager!"}, "PlatformSpec.name", "must match"),
        ({"display_name": " "}, "pager.display_name", "non-empty"),
        ({"kind": "email"}, "pager.kind", "chat, presentation-only"),
        ({"config_class": None}, "pager.config_class", "required for a chat platform"),
        ({"channel_class": "no-colon"}, "pager.channel_class", "package.module:Name"),
        ({"credentials_schema": {"type": "string"}}, "pager.credentials_schema", "object"),
        (
            {"credentials_schema": {"type": "object", "properties": {"a": {}}, "required": ["b"]}},
            "pager.credentials_schema",
            "requires 'b'",
        ),
        ({"ingress": ()}, "pager.ingress", "at least one ingress mode"),
        ({"ingress": "polling"}, "pager.ingress", "tuple of mode names"),
        ({"ingress": ("polling", "polling")}, "pager.ingress", "twice"),
        ({"ingress": ("polling", "Bad Mode")}, "pager.ingress[1]", "must match"),
        ({"capabilities": frozenset({"telepathy"})}, "pager.capabilities", "'telepathy'"),
        ({"capabilities": frozenset({"presentation"})}, "pager.capabilities", "renderer"),
        ({"shared_store": "sometimes"}, "pager.shared_store", "none, dedup, cluster"),
        ({"settings_case": "kebab"}, "pager.settings_case", "camel"),
        ({"renderer": "channelkit.platforms.telegram.renderer:render"}, "pager.sender", "sender"),
        ({"playground": {"emulator": "x:y"}}, "pager.playground", "PlaygroundDefaults"),
    ],
)
def test_a_bad_field_is_named(changes: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        _spec(**changes)
    assert info.value.path == path
    assert message in str(info.value)


def test_presentation_only_platforms_carry_no_chat_fields() -> None:
    fields = {
        "name": "fax",
        "display_name": "Fax",
        "kind": PRESENTATION_ONLY,
        "docs": "platforms/fax.md",
        "renderer": "channelkit.platforms.line.renderer:render",
        "sender": "channelkit.platforms.line.sender:LineSender",
        "capabilities": {"presentation"},
    }
    spec = PlatformSpec(**fields)
    assert not spec.is_chat and spec.default_ingress is None and spec.ingress == ()
    assert spec.capabilities == frozenset({"presentation"})
    with pytest.raises(ConfigurationError) as info:
        PlatformSpec(**{**fields, "ingress": ("push",)})
    assert info.value.path == "fax.ingress"
    with pytest.raises(ConfigurationError) as info:
        PlatformSpec(**{**fields, "channel_class": "a.b:C"})
    assert info.value.path == "fax.channel_class"
    with pytest.raises(ConfigurationError) as info:
        PlatformSpec(**{**fields, "renderer": None, "sender": None, "capabilities": set()})
    assert info.value.path == "fax.renderer"
    with pytest.raises(ConfigurationError, match="presentation-only"):
        spec.build_config({}, name="fax")


def test_a_spec_is_frozen_and_its_tables_are_read_only() -> None:
    spec = _spec(ingress=["polling", "webhook"])
    assert spec.ingress == ("polling", "webhook")  # a list becomes a tuple
    assert isinstance(spec.channel_class, Ref)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.name = "other"  # type: ignore[misc]
    assert spec.credentials_schema is not None
    with pytest.raises(TypeError):
        spec.credentials_schema["type"] = "string"  # type: ignore[index]
    with pytest.raises(TypeError):
        PLATFORMS["telegram"] = spec  # type: ignore[index]
    # equal by value, and hashable (a set of specs, a dict keyed by spec)
    assert _spec(ingress=("polling", "webhook")) == spec
    assert len({spec, _spec(ingress=("polling", "webhook")), PLATFORMS["telegram"]}) == 2
    assert hash(PLATFORMS["dingtalk"].playground) == hash(PLATFORMS["dingtalk"].playground)


def test_playground_defaults_check_that_the_emulator_credentials_exist() -> None:
    with pytest.raises(ConfigurationError) as info:
        PlaygroundDefaults(
            emulator="channelkit.playground.telegram:TelegramEmulator",
            credentials={"botToken": "1:t"},
            emulator_credentials={"bot_token": "token"},
        )
    assert info.value.path == "emulator_credentials.bot_token"
    defaults = PlaygroundDefaults(
        emulator="channelkit.playground.telegram:TelegramEmulator",
        credentials={"botToken": "1:t"},
        emulator_credentials={"bot_token": "botToken"},
        emulator_options={"webhook_url": ""},
    )
    assert defaults.emulator_kwargs(user_id=7) == {
        "webhook_url": "",
        "bot_token": "1:t",
        "user_id": 7,
    }
    assert "1:t" not in repr(defaults)


def test_a_ref_loads_lazily_and_names_what_is_missing() -> None:
    ref = Ref("channelkit.platforms.telegram:TelegramConfig.from_dict")
    assert (ref.module, ref.attribute, ref.name) == (
        "channelkit.platforms.telegram",
        "TelegramConfig.from_dict",
        "from_dict",
    )
    assert callable(ref.load())
    with pytest.raises(ImportError, match="channelkit.platforms.telegram:Nope.*'Nope'"):
        Ref("channelkit.platforms.telegram:Nope").load()
    with pytest.raises(ConfigurationError, match="package.module:Name"):
        Ref("channelkit.platforms.telegram")


def test_register_refuses_a_duplicate_and_undo_takes_the_entry_out() -> None:
    with pytest.raises(ConfigurationError) as info:
        register_platform(_spec(name="telegram"))
    assert info.value.path == "platforms.telegram" and "already registered" in str(info.value)
    spec = _spec()
    handle = register_platform(spec)
    try:
        assert PLATFORMS["pager"] is spec
        assert list(PLATFORMS)[-1] == "pager"
        with pytest.raises(ConfigurationError, match="already registered"):
            register_platform(_spec())
    finally:
        assert handle.undo() is True
    assert "pager" not in PLATFORMS
    assert handle.undo() is False  # once only


def test_replace_and_undo_restore_the_original_entry() -> None:
    original = PLATFORMS["telegram"]
    replacement = _spec(name="telegram", display_name="Telegram (test double)")
    with register_platform(replacement, replace=True) as spec:
        assert PLATFORMS["telegram"] is spec is replacement
    assert PLATFORMS["telegram"] is original


def test_concurrent_readers_always_see_a_whole_registry() -> None:
    stop = threading.Event()
    errors: list[BaseException] = []

    def read() -> None:
        try:
            while not stop.is_set():
                names = list(PLATFORMS)
                assert all(PLATFORMS.get(n) is not None or n.startswith("tmp") for n in names)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for index in range(200):
            register_platform(_spec(name=f"tmp{index}")).undo()
    finally:
        stop.set()
        reader.join(10)
    assert errors == []
    assert not any(name.startswith("tmp") for name in PLATFORMS)


def _channelkit_modules_after(statement: str) -> set[str]:
    probe = (
        f"{statement}\nimport json, sys\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('channelkit'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_importing_the_registry_loads_no_platform_package() -> None:
    front_door = _channelkit_modules_after("import channelkit")
    loaded = _channelkit_modules_after("import channelkit.platforms")
    # the package's own front door, then the registry: no platform, no other layer
    assert loaded - front_door == {"channelkit.platforms", "channelkit.platforms.registry"}
