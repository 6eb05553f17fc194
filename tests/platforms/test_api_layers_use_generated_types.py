"""The hand-written ``api.py`` layers call the generated clients' methods by name.

No operation is looked up by string (``getattr(client, op_name)``) and no result is
walked as a dict: every ``self._client.<method>(...)`` names a real method of the
generated client, so mypy checks its arguments and its typed result.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import channelkit
import pytest

PLATFORMS = Path(channelkit.__file__).parent / "platforms"
LAYERS = {
    "dingtalk": "DingtalkClient",
    "feishu": "FeishuClient",
    "telegram": "TelegramClient",
    "weixin": "WeixinClient",
}


def _tree(platform: str) -> ast.Module:
    return ast.parse((PLATFORMS / platform / "api.py").read_text(encoding="utf-8"))


def _client_calls(tree: ast.Module) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == "_client"
        ):
            names.append(node.func.attr)
    return names


@pytest.mark.parametrize("platform", sorted(LAYERS))
def test_every_client_call_names_a_generated_method(platform: str) -> None:
    client = getattr(importlib.import_module(f"channelkit.clients.{platform}"), LAYERS[platform])
    calls = _client_calls(_tree(platform))
    assert calls, f"{platform}/api.py calls its generated client"
    for name in calls:
        assert callable(getattr(client, name, None)), f"{LAYERS[platform]}.{name}"


@pytest.mark.parametrize("platform", sorted(LAYERS))
def test_no_lookup_by_name_and_no_dict_walking(platform: str) -> None:
    tree = _tree(platform)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr")
        ):
            # reading optional attributes of an exception is the only reflection left
            assert ast.unparse(node.args[0]) == "exc", f"{platform}/api.py: {ast.unparse(node)}"
        if isinstance(node, ast.Name):
            assert node.id not in ("_OPERATIONS", "_get"), f"{platform}/api.py: {node.id}"
