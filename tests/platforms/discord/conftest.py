from __future__ import annotations

from tests.platforms import _shared

rt = _shared.rt  # the shared runtime fixture (tests/platforms/_shared.py)
