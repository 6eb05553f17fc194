"""channelkit.state sits below platforms and core: it imports only channelkit.runtime and
channelkit.errors (and itself), and importing it does not import redis-py."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

STATE = Path(__file__).resolve().parents[2] / "sdk" / "channelkit" / "state"
ALLOWED = ("channelkit.state", "channelkit.runtime", "channelkit.errors")


def _channelkit_imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level:
            names.append("channelkit.state")  # relative: inside the package
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return [n for n in names if n == "channelkit" or n.startswith("channelkit.")]


def test_state_modules_import_only_runtime_errors_and_state() -> None:
    files = sorted(STATE.glob("*.py"))
    assert {f.name for f in files} >= {"__init__.py", "base.py", "memory.py", "redis.py"}
    bad = [
        f"{f.name}: {name}"
        for f in files
        for name in _channelkit_imports(f)
        if not any(name == a or name.startswith(a + ".") for a in ALLOWED)
    ]
    assert bad == []


def test_importing_channelkit_state_does_not_import_redis() -> None:
    code = "import sys, channelkit.state; print('redis' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
