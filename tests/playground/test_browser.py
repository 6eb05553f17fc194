"""Headless Chromium drives the playground page (WebDriver over HTTP, no selenium)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from channelkit.playground import Playground
from webdriver import Browser, WebDriverError, find_browser

pytestmark = pytest.mark.browser

CARD_LIST = "Array.from(document.querySelectorAll('.card[data-card-id]'))"
CARDS = "return " + CARD_LIST


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
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


def test_playground_in_headless_chromium(browser: Browser, tmp_path: Path) -> None:
    with Playground(demo_delay=0.01) as pg:
        browser.get(pg.url + "/")
        browser.wait_js("return document.body.dataset.version !== undefined", "the first poll")
        assert "dingtalk" in browser.text(browser.find("#platform"))

        # send a message: a status card streams, then the question form
        box = browser.find("#composer")
        browser.send_keys(box, "hello browser")
        browser.click(browser.find("#send"))
        browser.wait_js(
            "return Array.from(document.querySelectorAll('.user-message'))"
            ".some(e => e.textContent === 'hello browser')",
            "the user's message",
        )
        browser.wait_js(
            CARDS + ".some(c => c.dataset.kind === 'status' && "
            "c.querySelector('.card-content').textContent.includes('hello browser'))",
            "the status card with streamed text",
        )
        browser.wait_js(
            CARDS + ".some(c => c.dataset.kind === 'question' && c.dataset.state === 'pending')",
            "the question form",
        )
        # the form waits for the person: no "agent is working", though the eye reaction
        # stays on the message for the whole run
        browser.wait_js(
            "return document.body.dataset.waiting === '1'"
            " && document.getElementById('typing').hidden"
            " && document.querySelector('.question-card').classList.contains('awaiting')"
            " && Array.from(document.querySelectorAll('.reactions'))"
            ".some(e => e.textContent.includes('👀'))",
            "the waiting state with the eye reaction but without the working indicator",
        )
        # answer: one single-select, two multi-select options
        browser.click(browser.find('.question-card input[data-q="0"][value="Green"]'))
        browser.click(browser.find('.question-card input[data-q="1"][value="Cheese"]'))
        browser.click(browser.find('.question-card input[data-q="1"][value="Olives"]'))

        def submitted() -> bool:
            return bool(
                browser.script(
                    "return document.querySelector('.question-card').dataset.state === 'submitted'"
                )
            )

        # click Submit (again if the first click raced the card's activation)
        for _ in range(20):
            if not browser.script(
                "return document.querySelector('.question-card .submit-btn').disabled"
            ):
                browser.click(browser.find(".question-card .submit-btn"))
            try:
                browser.wait_js(
                    "return document.querySelector('.question-card').dataset.state === 'submitted'",
                    "the submitted state",
                    timeout=2,
                )
                break
            except AssertionError:
                continue
        assert submitted()
        assert (
            browser.script("return document.querySelector('.question-card .badge').textContent")
            == "Submitted"
        )
        continuation = browser.wait_js(
            "const cs = " + CARD_LIST + "; const last = cs[cs.length - 1];"
            "return last.dataset.kind === 'status' && last.dataset.state === 'completed'"
            " && last.querySelector('.card-content').textContent",
            "the continuation card",
        )
        assert "You picked Green and Cheese, Olives" in continuation
        browser.screenshot(tmp_path / "conversation.png")

        # a second run: streams until Stop is pressed
        browser.send_keys(box, "long")
        browser.click(browser.find("#send"))
        browser.wait_js(
            "const cs = " + CARD_LIST + "; const last = cs[cs.length - 1];"
            "return last.dataset.kind === 'status' && last.dataset.state === 'running'"
            " && !last.querySelector('.stop-btn').hidden"
            " && last.querySelector('.card-content').textContent.includes('Step 1')",
            "the long run's streaming card with Stop",
        )
        first_len = browser.script(
            "const cs = " + CARD_LIST + "; return cs[cs.length - 1]"
            ".querySelector('.card-content').textContent.length"
        )
        browser.wait_js(
            "const cs = " + CARD_LIST + "; return cs[cs.length - 1]"
            ".querySelector('.card-content').textContent.length > arguments[0]",
            "the card to keep streaming",
            15.0,
            first_len,
        )
        assert browser.script("return !document.getElementById('typing').hidden")
        # somebody else in the chat presses Stop: refused with a notice, the run goes on
        browser.click(browser.find(".card[data-state='running'] .stop-teammate-btn"))
        browser.wait_js(
            "return Array.from(document.querySelectorAll('.bot-message'))"
            ".some(e => e.textContent.includes('Only the task owner'))",
            "the owner-only notice",
        )
        assert (
            browser.script("const cs = " + CARD_LIST + "; return cs[cs.length - 1].dataset.state")
            == "running"
        )
        for _ in range(20):
            if not browser.script(
                "const cs = "
                + CARD_LIST
                + "; return cs[cs.length - 1].querySelector('.stop-btn').disabled"
            ):
                browser.click(browser.find(".card[data-state='running'] .stop-btn"))
            try:
                browser.wait_js(
                    "const cs = "
                    + CARD_LIST
                    + "; return cs[cs.length - 1].dataset.state === 'stopped'",
                    "the stopped state",
                    timeout=2,
                )
                break
            except AssertionError:
                continue
        line = browser.script(
            "const cs = " + CARD_LIST + "; return cs[cs.length - 1]"
            ".querySelector('.status-line').textContent"
        )
        assert line.startswith("Stopped")
        shot = browser.screenshot(tmp_path / "playground.png")
        assert shot.stat().st_size > 10_000


MESSAGES = "Array.from(document.querySelectorAll('.card[data-kind=\"message\"]'))"


def test_telegram_playground_in_headless_chromium(browser: Browser, tmp_path: Path) -> None:
    """Telegram: plain messages and inline-keyboard questions, edited in place."""
    with Playground(platform="telegram", demo_delay=0.01) as pg:
        browser.get(pg.url + "/")
        browser.wait_js("return document.body.dataset.version !== undefined", "the first poll")
        assert "telegram" in browser.text(browser.find("#platform"))
        browser.send_keys(browser.find("#composer"), "hello keyboard")
        browser.click(browser.find("#send"))
        browser.wait_js(
            "return " + MESSAGES + ".filter(c => c.querySelectorAll('.kb-btn').length).length == 2",
            "two question messages with inline keyboards",
        )

        def tap(suffix: str, then: str) -> None:
            browser.click(browser.find(f'.kb-btn[data-data$="{suffix}"]'))
            browser.wait_js("return " + then, f"the result of tapping {suffix}")

        tap(":o0.2", MESSAGES + ".some(c => c.textContent.includes('✓ Blue'))")
        tap(":o1.0", MESSAGES + ".some(c => c.textContent.includes('✓ Cheese'))")
        tap(":o1.2", MESSAGES + ".some(c => c.textContent.includes('✓ Basil'))")
        tap(":s1", MESSAGES + ".some(c => c.textContent.includes('Submitted: Cheese, Basil'))")
        final = browser.wait_js(
            "const m = " + MESSAGES + ".find(c => c.textContent.includes('You picked'));"
            "return m && m.querySelector('.msg-text').textContent",
            "the continuation message",
        )
        # the agent's Markdown arrives as Telegram HTML (parse_mode), never literal asterisks
        assert "You picked <b>Blue</b> and <b>Cheese, Basil</b>" in final
        assert browser.script("return document.querySelectorAll('.kb-btn').length") == 0
        browser.screenshot(tmp_path / "telegram.png")
