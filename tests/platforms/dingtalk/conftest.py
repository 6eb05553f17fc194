from __future__ import annotations

import pytest
from dingtalk_helpers import AdapterHarness, Harness


@pytest.fixture
def harness():
    made = []

    def make(*args, **kwargs):
        h = Harness(*args, **kwargs)
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()


@pytest.fixture
def adapter():
    made = []

    def make(*args, **kwargs):
        h = AdapterHarness(*args, **kwargs)
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()
