"""``import channelkit``: the names a user starts from, imported lazily."""

from __future__ import annotations

import json
import subprocess
import sys

import channelkit
import pytest


def _modules_after(code: str) -> list[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    modules: list[str] = json.loads(out.splitlines()[-1])
    return modules


@pytest.mark.parametrize("name", channelkit.__all__)
def test_every_front_door_name_resolves(name: str) -> None:
    assert getattr(channelkit, name) is not None
    assert name in dir(channelkit)


def test_front_door_names_are_the_subpackage_objects() -> None:
    from channelkit.agents import FunctionAgent, Question
    from channelkit.config import load_config
    from channelkit.core import ChannelBase, InboundMessage, SessionTarget
    from channelkit.errors import ChannelKitError
    from channelkit.platforms.dingtalk import DingtalkChannel, DingtalkConfig

    assert channelkit.DingtalkChannel is DingtalkChannel
    assert channelkit.DingtalkConfig is DingtalkConfig
    assert channelkit.FunctionAgent is FunctionAgent
    assert channelkit.Question is Question
    assert channelkit.load_config is load_config
    assert channelkit.ChannelBase is ChannelBase
    assert channelkit.InboundMessage is InboundMessage
    assert channelkit.SessionTarget is SessionTarget
    assert channelkit.ChannelKitError is ChannelKitError
    assert issubclass(channelkit.DingtalkChannel, channelkit.ChannelBase)
    assert isinstance(channelkit.__version__, str) and channelkit.__version__


def test_unknown_name_is_an_attribute_error_and_submodules_still_import() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        channelkit.no_such_name  # noqa: B018
    from channelkit import errors

    assert errors.ChannelKitError is channelkit.ChannelKitError


def test_import_channelkit_loads_no_platform_and_no_heavy_dependency() -> None:
    modules = _modules_after("import channelkit")
    heavy = ("requests", "urllib3", "jsonschema", "dataclasses_json")
    assert [m for m in modules if m.split(".")[0] in heavy] == []
    assert sorted(m for m in modules if m.startswith("channelkit.")) == [
        "channelkit.errors",
        "channelkit.version",
    ]


def test_a_front_door_name_imports_only_its_home() -> None:
    modules = _modules_after("import channelkit\nchannelkit.FunctionAgent")
    assert "channelkit.agents.function" in modules
    assert not [m for m in modules if m.startswith("channelkit.platforms")]
