from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests_mock as rm

from tests.platforms import _shared
from tests.platforms.telegram.tg_env import mock_bot_api

rt = _shared.rt  # the shared runtime fixture (tests/platforms/_shared.py)


@pytest.fixture
def mock() -> Iterator[rm.Mocker]:
    """The Bot API on requests-mock (see ``tg_env.mock_bot_api``)."""
    with mock_bot_api() as m:
        yield m
