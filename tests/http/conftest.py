from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FIXTURE_SPEC = ROOT / "tests" / "codegen" / "fixtures" / "acme.json"


@pytest.fixture(scope="session")
def acme(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """The fixture spec generated into a scratch dir and imported as channelkit.clients.acme."""
    from codegen.sandbox import load_generated

    return load_generated(FIXTURE_SPEC, tmp_path_factory.mktemp("generated"))
