"""Docstrings are Markdown, the style the docs site renders: no Sphinx roles.

The API reference is built by mkdocstrings from the docstrings and rendered as Markdown,
so a Sphinx role (``:class:`Name```) would reach a reader as raw text. The docs build
fails on one too (docs/hooks/no_sphinx_roles.py); this check finds them in the suite,
with file and line, for the hand-written package, the generated clients and the
generator's templates.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROLE = re.compile(r":(?:class|meth|func|mod|attr|data|exc|obj|const|py:\w+):`[^`]+`")


def _violations() -> list[str]:
    found = []
    for folder in (ROOT / "sdk" / "channelkit", ROOT / "codegen"):
        for path in sorted(folder.rglob("*.py")):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                for role in ROLE.findall(line):
                    found.append(f"{path.relative_to(ROOT).as_posix()}:{number}: {role}")
    return found


def test_no_sphinx_role_in_a_docstring() -> None:
    violations = _violations()
    assert not violations, f"Sphinx roles ({len(violations)}):\n  " + "\n  ".join(violations)


def test_the_check_sees_a_role() -> None:
    assert ROLE.search("see :class:`~channelkit.core.ChannelBase` and :meth:`close`")
    assert not ROLE.search("see `ChannelBase` and `close()`")


def test_the_docs_build_hook_stops_on_a_rendered_role() -> None:
    import importlib.util

    import pytest

    pytest.importorskip("mkdocs")
    spec = importlib.util.spec_from_file_location(
        "no_sphinx_roles", ROOT / "docs" / "hooks" / "no_sphinx_roles.py"
    )
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)

    class Page:
        class file:  # the shape MkDocs hands the hook
            src_uri = "reference/core.md"

    clean = "<p>See <code>ChannelBase</code> and <code>close()</code>.</p>"
    assert hook.on_page_content(clean, page=Page) == clean
    from mkdocs.exceptions import PluginError

    with pytest.raises(PluginError, match="reference/core.md"):
        hook.on_page_content("<p>See :class:<code>ChannelBase</code>.</p>", page=Page)
