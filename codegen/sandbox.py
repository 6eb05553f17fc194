"""Generate one spec into a scratch directory and import it (for tests and spec authors).

``load_generated(Path("tests/codegen/fixtures/acme.json"), tmp)`` writes
``tmp/acme/{__init__,models,client}.py``, adds ``tmp`` to ``channelkit.clients.__path__``
and returns the imported ``channelkit.clients.acme`` package. Requires channelkit to be
importable (the generator itself does not).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

from codegen.render import render
from codegen.spec import load


def load_generated(spec_path: Path, target: Path) -> ModuleType:
    """Generate ``spec_path`` under ``target`` and import it as ``channelkit.clients.<name>``."""
    import channelkit.clients

    spec = load(spec_path)
    name = f"channelkit.clients.{spec.platform}"
    if name in sys.modules:
        return sys.modules[name]
    for rel, text in render(spec).items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="\n")
    if str(target) not in channelkit.clients.__path__:
        channelkit.clients.__path__.append(str(target))
    importlib.invalidate_caches()
    return importlib.import_module(name)
