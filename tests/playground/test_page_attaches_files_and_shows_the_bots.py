"""The playground page sends the person's file and shows the bot's (headless Chromium,
Telegram): a file chosen with the page's file input is read in the browser and posted
in ``files``; the demo's answer describing it appears (a PNG travels as a Telegram
photo, which keeps its bytes but not its name, so the answer gives its size and sniffed
type; a text file keeps its name). ``picture`` makes the bot send a PNG that the page
shows inline as an image the browser decoded (Telegram, Slack, Discord). Any
console error fails the test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from channelkit.playground import Playground
from channelkit.playground.demo import DEMO_PICTURE_NAME, demo_png
from webdriver import Browser

pytestmark = pytest.mark.browser

WAIT = 15.0
#: The text of every bot row.
BOT_TEXT = (
    "return Array.from(document.querySelectorAll('#chat .row.bot'))"
    ".map(e => e.textContent).join('\\n')"
)
#: The bot's image whose alt is ``arguments[0]``, once the browser decoded it.
DECODED_IMAGE = """
const img = Array.from(document.querySelectorAll('#chat .row.bot .files img'))
  .find(i => i.alt === arguments[0]);
return img && img.complete && img.naturalWidth > 0
  ? [img.naturalWidth, img.naturalHeight, img.getAttribute('src')] : null;
"""


@pytest.fixture(scope="module")
def page(browser: Browser) -> Iterator[tuple[Browser, Playground]]:
    with Playground(platform="telegram", demo_delay=0.0) as pg:
        try:
            browser.open_playground(pg.url)
            yield browser, pg
        finally:
            browser.get("about:blank")  # stop polling before the playground closes


def _attach_and_send(browser: Browser, path: Path) -> None:
    browser.send_keys(browser.find("#attach"), str(path))
    browser.click(browser.find("#send"))
    browser.wait_js(
        "return document.getElementById('attach').value === ''", "the attachment sent", WAIT
    )


def test_a_png_attached_on_the_page_reaches_the_demo(
    page: tuple[Browser, Playground], tmp_path: Path
) -> None:
    browser, pg = page
    png = demo_png(12, 9)
    path = tmp_path / "dot.png"
    path.write_bytes(png)
    _attach_and_send(browser, path)
    expected = f"image/png, {len(png)} bytes"
    browser.wait_js(
        BOT_TEXT.replace("return ", "return (") + ").includes(arguments[0])",
        "the demo's description of the PNG",
        WAIT,
        expected,
    )
    sent = [m for m in pg.emulator.timeline() if m.get("from") == "user"]
    assert [f["size"] for m in sent for f in m.get("files", ())] == [len(png)]
    # the person's message shows the file it carried
    assert browser.script(
        "return Array.from(document.querySelectorAll('#chat .row.user .files .file'))"
        f".some(f => f.textContent.includes('({len(png)} bytes)'))"
    )
    assert browser.severe_errors() == []


def test_a_text_file_attached_with_a_message_is_named_in_the_answer(
    page: tuple[Browser, Playground], tmp_path: Path
) -> None:
    browser, _ = page
    path = tmp_path / "release-notes.txt"
    path.write_bytes(b"version 7: faster\n" * 4)
    browser.send_keys(browser.find("#composer"), "what is in it?")
    _attach_and_send(browser, path)
    browser.wait_js(
        BOT_TEXT.replace("return ", "return (") + ").includes(arguments[0])",
        "the demo naming release-notes.txt",
        WAIT,
        "release-notes.txt: text/plain",
    )
    assert "72 bytes" in browser.script(BOT_TEXT)
    assert browser.severe_errors() == []


@pytest.mark.parametrize(
    "platform", ["telegram", "slack", "discord", "dingtalk", "feishu", "weixin"]
)
def test_picture_shows_the_bots_image_inline(browser: Browser, platform: str) -> None:
    with Playground(platform=platform, demo_delay=0.0) as pg:
        try:
            browser.open_playground(pg.url)
            browser.send_message("picture")
            # an iLink image message carries no file name: the page calls it "image"
            name = "image" if platform == "weixin" else DEMO_PICTURE_NAME
            width, height, src = browser.wait_js(DECODED_IMAGE, "the decoded picture", WAIT, name)
            assert (width, height) == (96, 64)  # demo_png's default size, decoded
            assert src.startswith("/_emulator/files/")
            assert browser.severe_errors() == []
        finally:
            browser.get("about:blank")
