"""The Flask and Django quickstarts in docs/ are ~20-line
integrations (their single Python block, which tests/web/test_quickstarts.py executes,
stays at most 20 lines of code, comments and blank lines not counted)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize("name", ["quickstart-flask.md", "quickstart-django.md"])
def test_quickstart_is_a_twenty_line_integration(name: str) -> None:
    text = (DOCS / name).read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 1, f"{name} must have exactly one python block"
    code = [
        line
        for line in blocks[0].splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert len(code) <= 20, f"{name}: {len(code)} lines of code"
