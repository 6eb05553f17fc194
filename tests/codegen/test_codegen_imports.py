"""Generated clients import only what they use, and requests only for type checking."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CLIENTS = Path(__file__).resolve().parents[2] / "sdk" / "channelkit" / "clients"
CLIENT_MODULES = sorted(CLIENTS.glob("*/client.py"))


@pytest.mark.parametrize("path", CLIENT_MODULES, ids=lambda p: p.parent.name)
def test_requests_is_imported_for_annotations_only(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top_level = {
        alias.name for node in tree.body if isinstance(node, ast.Import) for alias in node.names
    }
    assert "requests" not in top_level
    guarded = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    ]
    assert [ast.unparse(stmt) for block in guarded for stmt in block.body] == ["import requests"]


@pytest.mark.parametrize("path", CLIENT_MODULES, ids=lambda p: p.parent.name)
def test_every_imported_name_is_used(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    used |= {
        node.value.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
    }
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            for alias in node.names:
                name = alias.asname or alias.name
                assert name in used, name
