"""Suite-wide test settings and shared fixtures."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FIXTURE_SPEC = ROOT / "tests" / "codegen" / "fixtures" / "acme.json"

# Property tests assert behaviour, never speed: a loaded CI machine must not turn a slow
# example into a DeadlineExceeded failure. Modules that need other settings pass their own.
settings.register_profile("channelkit", deadline=None)
settings.load_profile("channelkit")


@pytest.fixture(scope="session")
def acme(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """The fixture spec generated into a scratch dir and imported as channelkit.clients.acme."""
    from codegen.sandbox import load_generated

    return load_generated(FIXTURE_SPEC, tmp_path_factory.mktemp("generated"))
