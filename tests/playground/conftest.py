"""Fixtures shared by the playground tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from webdriver import Browser, WebDriverError, find_browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium session (through chromedriver) for a test module's page
    tests; the tests skip, saying what to install, when Chromium or chromedriver is
    missing or cannot start a session."""
    found = find_browser()
    if found is None:
        pytest.skip(
            "headless browser test needs Debian's chromium and chromium-driver "
            "(apt-get install -y chromium chromium-driver; .ci/run installs them)"
        )
    try:
        driver = Browser(*found)
    except WebDriverError as exc:
        pytest.skip(f"chromium/chromedriver could not start a session: {exc}")
    try:
        yield driver
    finally:
        driver.close()
