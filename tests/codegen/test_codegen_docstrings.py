"""Generated docstrings carry the spec's words: no filler, one clean module sentence."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from codegen.cli import render_all
from codegen.render import api_name
from codegen.spec import load

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
CLIENTS = ROOT / "sdk" / "channelkit" / "clients"
COMMITTED = sorted(CLIENTS.glob("*/*.py"))


def _classes(text: str) -> dict[str, ast.ClassDef]:
    tree = ast.parse(text)
    return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}


def test_a_schema_without_description_gets_no_docstring() -> None:
    models = _classes(render_all(FIXTURES)["acme/models.py"])
    assert ast.get_docstring(models["CardData"]) is None
    assert ast.get_docstring(models["TokenResponse"]) is None


def test_a_described_schema_keeps_exactly_its_description() -> None:
    doc = load(FIXTURES / "acme.json")
    described = {m.name: m.description for m in doc.models if m.description}
    described.update({e.name: e.description for e in doc.enums if e.description})
    assert described, "the fixture describes at least one schema"
    models = _classes(render_all(FIXTURES)["acme/models.py"])
    for name, description in described.items():
        assert " ".join((ast.get_docstring(models[name]) or "").split()) == " ".join(
            description.split()
        )


def test_methods_without_summary_start_with_their_http_line() -> None:
    doc = load(FIXTURES / "acme.json")
    client = _classes(render_all(FIXTURES)["acme/client.py"])["AcmeClient"]
    methods = {n.name: n for n in client.body if isinstance(n, ast.FunctionDef)}
    for op in doc.operations:
        text = ast.get_docstring(methods[op.method_name]) or ""
        first = text.split("\n", 1)[0]
        if op.summary:
            assert first.startswith(op.summary.split()[0])
        else:
            assert first.startswith(f"``{op.http_method} {op.path}``")


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_committed_clients_have_no_filler(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert 'schema."""' not in text and " schema.\n" not in text
    assert "Known values of" not in text
    assert "Open enum: a value not listed" not in text
    assert "#: Wire fields this schema does not list" not in text
    assert "for channelkit API" not in text
    assert "-\nclients.md" not in text and "regenerating-\n" not in text


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_module_docstring_names_the_api_once(path: Path) -> None:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = " ".join(doc.split("\n\n", 1)[0].split())
    assert "for channelkit" not in first
    assert first.endswith(".")
    assert f"openapi/{path.parent.name}.json" in doc


def test_api_name_drops_the_for_channelkit_suffix() -> None:
    doc = load(ROOT / "openapi" / "telegram.json")
    assert doc.title.endswith("for channelkit")
    assert api_name(doc) == "Telegram Bot API (subset)"
    assert api_name(load(FIXTURES / "acme.json")) == "Acme test API"


def test_the_model_base_class_documents_extra_fields_once() -> None:
    from channelkit.clients.telegram import models
    from channelkit.http.model import Model

    assert "extra_fields" in (inspect.getdoc(Model) or "")
    text = inspect.getsource(models)
    generated = [
        obj
        for obj in vars(models).values()
        if isinstance(obj, type) and issubclass(obj, Model) and obj.__module__ == models.__name__
    ]
    assert generated
    assert text.count("extra_fields: dict[str, Any]") == len(generated)
    written = [ast.get_docstring(node) or "" for node in _classes(text).values()]
    assert not any("extra_fields" in doc for doc in written)
