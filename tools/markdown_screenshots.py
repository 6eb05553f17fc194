"""Screenshots of the playground page showing golden Markdown answers on each platform.

The pictures in ``docs/images/markdown/`` are made with this script, for a person to
review by eye what each platform's dialect looks like once the platform draws it:

    python tools/markdown_screenshots.py                      # the documented set
    python tools/markdown_screenshots.py --out /tmp/shots \\
        --platforms slack,feishu --vectors 05_links,14_small_table

For every platform and golden vector (``tests/markdown/golden/<name>/input.md``) it
starts a fresh `Playground` whose agent answers the vector's Markdown when sent the
vector's name, sends the name from the page in headless Chromium, waits until the
answer is fully drawn (no card still running, the typing indicator gone), sizes the
window to the conversation and saves ``<platform>-<name>.png``. Slack's live answer is a
stream (``markdown_text``, standard Markdown that Slack renders itself), so for Slack it
also posts the vector's golden mrkdwn (``slack.txt``, what ``chat.postMessage`` carries)
as the bot and saves ``slack-mrkdwn-<name>.png``. Console errors are printed and make
the exit status 1.

It needs Chromium and chromedriver (as the browser tests do) and, for CJK text, a CJK
font such as Debian's ``fonts-noto-cjk``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "playground"))

from channelkit.agents import FunctionAgent, Turn  # noqa: E402
from channelkit.playground import Playground  # noqa: E402
from channelkit.playground.slack import SlackEmulator  # noqa: E402
from webdriver import Browser, find_browser  # noqa: E402

GOLDEN = ROOT / "tests" / "markdown" / "golden"
PLATFORMS = ("telegram", "slack", "feishu", "dingtalk", "discord")
VECTORS = ("14_small_table", "19_mixed_cjk_emoji_bold", "25_long_mixed_answer")
WIDTH = 1100
MIN_HEIGHT = 800
WAIT = 20.0

#: True once the answer is drawn: a bot row exists, nothing runs, no draft, no typing.
DONE = """
const bot = document.querySelectorAll('#chat .row.bot');
const running = document.querySelector('.card[data-state="running"]');
return bot.length > 0 && !running && document.getElementById('draft').hidden
  && document.getElementById('typing').hidden;
"""
#: The height the whole conversation needs (top bar, every message, the composer).
NEEDED = """
const chat = document.getElementById('chat');
return document.body.scrollHeight - chat.clientHeight + chat.scrollHeight;
"""


def _answers(names: list[str]) -> dict[str, str]:
    return {name: (GOLDEN / name / "input.md").read_text(encoding="utf-8") for name in names}


def _post_mrkdwn(pg: Playground, text: str) -> None:
    """``text`` posted as the bot with ``chat.postMessage`` (Slack mrkdwn)."""
    emulator = pg.emulator
    assert isinstance(emulator, SlackEmulator)
    answer = requests.post(
        f"{pg.url}/chat.postMessage",
        json={"channel": emulator.channel, "text": text},
        headers={"Authorization": f"Bearer {emulator.bot_token}"},
        timeout=10,
    )
    if not answer.json().get("ok"):
        raise RuntimeError(f"chat.postMessage refused the golden mrkdwn: {answer.text}")


def shoot(
    browser: Browser, platform: str, name: str, markdown: str, out: Path, mrkdwn: str = ""
) -> Path:
    """One screenshot: ``name`` sent on ``platform``'s page, answered with ``markdown``
    (with ``mrkdwn``: that Slack mrkdwn posted by the bot instead of a run)."""

    def answer(turn: Turn) -> str:
        return markdown if turn.text.strip() == name else f"unknown vector {turn.text!r}"

    with Playground(platform=platform, agent=FunctionAgent(answer), demo_delay=0.0) as pg:
        try:
            browser.cmd("POST", "/window/rect", {"width": WIDTH, "height": MIN_HEIGHT})
            browser.browser_log()
            browser.get(pg.url + "/")
            browser.wait_js("return document.body.dataset.version !== undefined", "the page")
            if mrkdwn:
                _post_mrkdwn(pg, mrkdwn)
            else:
                browser.send_keys(browser.find("#composer"), name)
                browser.click(browser.find("#send"))
            browser.wait_js(DONE, f"{platform}: the answer to {name}", WAIT)
            time.sleep(0.3)  # the next poll: nothing changes any more
            browser.wait_js(DONE, f"{platform}: the answer to {name}", WAIT)
            for _ in range(3):  # the window's frame is not the page: settle on the page size
                inner = browser.script("return innerHeight")
                height = max(MIN_HEIGHT, int(browser.script(NEEDED)))
                if inner >= height:
                    break
                rect = browser.cmd("GET", "/window/rect")
                browser.cmd(
                    "POST",
                    "/window/rect",
                    {"width": WIDTH, "height": rect["height"] + height - inner},
                )
            browser.script("document.getElementById('chat').scrollTop = 0")
            kind = f"{platform}-mrkdwn" if mrkdwn else platform
            path = browser.screenshot(out / f"{kind}-{name}.png")
            errors = [e for e in browser.browser_log() if e.get("level") == "SEVERE"]
            if errors:
                raise RuntimeError(f"{platform} {name}: console errors: {errors}")
            return path
        finally:
            browser.get("about:blank")


def main(argv: list[str] | None = None) -> int:
    """Take the screenshots; the exit status is 1 when a page logged an error."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images" / "markdown")
    parser.add_argument("--platforms", default=",".join(PLATFORMS))
    parser.add_argument("--vectors", default=",".join(VECTORS))
    args = parser.parse_args(argv)
    found = find_browser()
    if found is None:
        sys.stderr.write("needs chromium and chromedriver\n")
        return 2
    names = [n for n in args.vectors.split(",") if n]
    answers = _answers(names)
    args.out.mkdir(parents=True, exist_ok=True)
    browser = Browser(*found)
    failed = False
    try:
        for platform in (p for p in args.platforms.split(",") if p):
            for name in names:
                golden = GOLDEN / name / "slack.txt"
                extra = [golden.read_text(encoding="utf-8")] if platform == "slack" else []
                for mrkdwn in ["", *extra]:
                    try:
                        path = shoot(browser, platform, name, answers[name], args.out, mrkdwn)
                        sys.stdout.write(f"{path} ({path.stat().st_size // 1024} KB)\n")
                    except (RuntimeError, AssertionError) as exc:
                        sys.stderr.write(f"{exc}\n")
                        failed = True
    finally:
        browser.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
