"""The playground page in headless Chromium on every platform (WebDriver over HTTP).

Each platform's page runs the demo end to end as a person would: send a message, see
the streamed answer, answer the question through the page's form or buttons (Weixin:
by typing), see the continuation with its bold text, then a ``long`` run: its output
grows past the window while the composer stays in view, and Stop ends it. Any console
error (an uncaught exception, ``console.error``, a failed request) fails the test, and
so does the page's error bar. Screenshots land in ``tmp_path``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from channelkit.playground import Playground, TelegramEmulator
from channelkit.playground.app import PLATFORMS
from webdriver import ELEMENT, Browser

pytestmark = pytest.mark.browser

WAIT = 15.0  # a loaded 2-core machine; a healthy page answers well within a second or two
#: The platforms whose page this test drives: every one the playground offers.
PAGES = ("dingtalk", "feishu", "telegram", "slack", "weixin", "discord")
FORMS = ("dingtalk", "feishu", "slack")  # questions as a form with Submit
STATUS_CARDS = ("dingtalk", "feishu")  # output in status cards with a Stop button

#: Everything the bot shows (cards, messages, the draft being written), as text.
BOT_TEXT = (
    "return Array.from(document.querySelectorAll('#chat .row.bot, #draft:not([hidden])'))"
    ".map(e => e.textContent).join('\\n')"
)
#: The bot's newest output element (the draft while Telegram writes one).
LATEST = """
const draft = document.getElementById('draft');
if (!draft.hidden) return draft;
const rows = document.querySelectorAll('#chat .row.bot');
return rows.length ? rows[rows.length - 1] : null;
"""


class Page:
    """The playground page of one platform, driven as a person would."""

    def __init__(self, browser: Browser, pg: Playground, shots: Path) -> None:
        self.browser = browser
        self.pg = pg
        self.platform = pg.platform
        self.shots = shots
        self.errors: list[dict[str, Any]] = []

    # -- waiting and checking --------------------------------------------------------------
    def console_errors(self) -> list[dict[str, Any]]:
        """Every console entry of level SEVERE so far (errors, failed requests)."""
        self.errors += self.browser.severe_errors()
        return self.errors

    def wait(self, source: str, what: str, *args: Any) -> Any:
        """Poll a script (``return ...``) until it is truthy; on timeout, fail with what the
        page showed (its bot text, console errors, error bar) and a screenshot."""
        deadline = time.monotonic() + WAIT
        polls = 0
        while True:
            value = self.browser.script(source, *args)
            if value:
                return value
            polls += 1
            if time.monotonic() > deadline or (polls % 10 == 0 and self.console_errors()):
                break  # a console error fails at once: the page is broken
            time.sleep(0.05)
        self.browser.screenshot(self.shots / f"{self.platform}-timeout.png")
        shown = self.browser.script(BOT_TEXT)
        bar = self.browser.script("return document.getElementById('error-text')?.textContent")
        raise AssertionError(
            f"{self.platform}: gave up waiting for {what}\n"
            f"console errors: {json.dumps(self.console_errors(), indent=1)}\n"
            f"error bar: {bar!r}\nbot text (end): {shown[-600:]!r}"
        )

    def wait_text(self, text: str) -> None:
        self.wait(BOT_TEXT + ".includes(arguments[0])", repr(text), text)

    def shot(self, name: str) -> Path:
        path = self.browser.screenshot(self.shots / f"{self.platform}-{name}.png")
        assert path.stat().st_size > 10_000
        return path

    def assert_no_errors(self) -> None:
        assert self.console_errors() == [], f"{self.platform}: console errors"
        bar = "document.getElementById('error-bar')"
        assert self.browser.script(f"return {bar}?.hidden"), self.browser.script(
            f"return {bar}?.textContent"
        )

    # -- actions ---------------------------------------------------------------------------
    def open(self) -> None:
        self.browser.browser_log()  # what an earlier page left behind is not this page's
        self.browser.get(self.pg.url + "/")
        self.wait("return document.body.dataset.version !== undefined", "the first poll")
        assert self.platform in self.browser.text(self.browser.find("#platform"))

    def send(self, text: str) -> None:
        self.browser.send_message(text)
        self.wait(
            "return Array.from(document.querySelectorAll('.user-message'))"
            ".some(e => e.textContent === arguments[0])",
            f"the message {text!r} in the chat",
            text,
        )

    def click_until(self, button_js: str, done_js: str, what: str) -> None:
        """Click a button until the page shows ``done_js`` (a click that raced the card's
        activation is ignored by the SDK; the page re-enables the button after 1.5 s)."""
        deadline = time.monotonic() + WAIT
        while not self.browser.script(done_js):
            if time.monotonic() > deadline:
                self.wait(done_js, what)  # fails with the page's state
            enabled = self.browser.script(
                f"const b = (() => {{ {button_js} }})(); return b && !b.disabled"
            )
            if enabled:
                self.browser.click(self.browser.find_js(button_js))
            time.sleep(0.1)

    def answer_question(self) -> None:
        """Green for the color, Cheese and Olives for the toppings."""
        if self.platform in FORMS:
            card = "document.querySelector('.question-card[data-state=\"pending\"]')"
            self.wait("return " + card, "the question form")
            card_id = self.browser.script(f"return {card}.dataset.cardId")
            for label in ("Green", "Cheese", "Olives"):
                self.browser.click(
                    self.browser.find_js(
                        f"return Array.from({card}.querySelectorAll('label.option'))"
                        ".find(l => l.textContent.trim() === arguments[0]).querySelector('input')",
                        label,
                    )
                )
            this_card = f"document.querySelector('[data-card-id=\"{card_id}\"]')"
            self.click_until(
                f"return {this_card}.querySelector('.submit-btn')",
                f"return !{this_card}.querySelector('.badge.pending')",  # as the person sees it
                "the form to leave Pending",
            )
        elif self.platform == "discord":
            # a select menu per question: pick, Choose (recorded), then Submit
            card = (
                "Array.from(document.querySelectorAll('.card')).find(c => "
                "c.querySelectorAll('.dc-select select:not([disabled])').length === 2)"
            )
            self.wait(f"return {card}", "the question's select menus")
            card_id = self.browser.script(f"return {card}.dataset.cardId")
            this_card = f"document.querySelector('[data-card-id=\"{card_id}\"]')"
            for labels in (["Green"], ["Cheese", "Olives"]):
                menu = (
                    f"Array.from({this_card}.querySelectorAll('.dc-select')).find(r => "
                    "Array.from(r.querySelectorAll('option')).some(o => o.textContent === "
                    "arguments[0]))"
                )
                for label in labels:  # as a person picks in the menu
                    self.browser.script(
                        f"const row = {menu}; Array.from(row.querySelectorAll('option'))"
                        ".find(o => o.textContent === arguments[1]).selected = true",
                        labels[0],
                        label,
                    )
                choose = f"return {menu}.querySelector('.dc-choose:not([disabled])')"
                self.wait(choose, "the menu's Choose button", labels[0])  # after the last
                self.browser.click(self.browser.find_js(choose, labels[0]))
            self.click_until(
                "return Array.from("
                + this_card
                + ".querySelectorAll('.kb-btn')).find(b => b.textContent === 'Submit')",
                f"return !{this_card}.querySelector('.dc-select')",  # settled: no menus
                "the question to be submitted",
            )
        elif self.platform == "telegram":
            self.wait("return document.querySelectorAll('.kb-btn').length >= 8", "the keyboards")
            for label, shown in (
                ("Green", "✓ Green"),
                ("Cheese", "✓ Cheese"),
                ("Olives", "✓ Olives"),
                ("Submit", "Submitted: Cheese, Olives"),  # the form is answered
            ):
                self.browser.click(
                    self.browser.find_js(
                        "return Array.from(document.querySelectorAll('.kb-btn'))"
                        ".find(b => b.textContent === arguments[0])",
                        label,
                    )
                )
                self.wait_text(shown)
        else:  # Weixin: a text prompt answered by typing
            self.wait_text("/approve")
            self.send("/approve")

    def stop(self) -> None:
        if self.platform in STATUS_CARDS:
            running = "document.querySelector('.card[data-kind=status][data-state=running]')"
            if self.platform == "dingtalk":
                # somebody else in the chat presses Stop: refused, the run goes on
                mate = f"return {running}.querySelector('.stop-teammate-btn')"
                self.browser.click(self.browser.find_js(mate))
                self.wait_text("Only the task owner")
                assert self.browser.script(f"return !!{running}")
            card_id = self.browser.script(f"return {running}.dataset.cardId")
            this_card = f"document.querySelector('[data-card-id=\"{card_id}\"]')"
            self.click_until(
                f"return {this_card}.querySelector('.stop-btn')",
                f"return {this_card}.dataset.state === 'stopped'",
                "the card to stop",
            )
            line = self.browser.script(
                f"return {this_card}.querySelector('.status-line').textContent"
            )
            assert line.startswith("Stopped"), line
        elif self.platform == "discord":
            stop = "document.querySelector('.kb-btn[data-data^=\"ck:stop:\"]')"
            self.wait("return " + stop, "the Stop button")
            self.click_until(
                f"return {stop}",
                f"return !{stop}",
                "the message to stop and its Stop button to go",
            )
            # the stopped message ends with *Stopped.*: italic, no asterisks shown
            self.wait(
                "return Array.from(document.querySelectorAll('.msg-text em, .msg-text i'))"
                ".some(i => i.textContent === 'Stopped.')",
                "the italic Stopped. mark",
            )
            assert "*Stopped.*" not in self.browser.script(BOT_TEXT)
        elif self.platform == "slack":
            stop = "document.querySelector('.kb-btn[data-data^=\"ck:stop\"]')"
            self.wait("return " + stop, "the Stop button")
            self.click_until(
                f"return {stop}",
                f"return !{stop} && !document.querySelector('.card[data-state=\"running\"]')",
                "the stream to stop and its Stop button to go",
            )
            # the stopped stream ends with Slack's _Stopped._: italic, no underscores shown
            self.wait(
                "return Array.from(document.querySelectorAll('.msg-text i'))"
                ".some(i => i.textContent === 'Stopped.')",
                "the italic Stopped. mark",
            )
            assert "_Stopped._" not in self.browser.script(BOT_TEXT)
        else:  # Telegram and Weixin stop a run with the /cancel command
            self.send("/cancel")
            self.wait_text("Cancelled current request.")
            self.wait("return document.getElementById('draft').hidden", "the draft to go")
        self.wait("return document.getElementById('typing').hidden", "the working indicator to go")


def test_every_playground_platform_has_its_page_tested() -> None:
    assert set(PLATFORMS) == set(PAGES)


@pytest.mark.parametrize("platform", PAGES)
def test_the_page_runs_the_demo_without_a_glitch(
    browser: Browser, tmp_path: Path, platform: str
) -> None:
    with Playground(platform=platform, demo_delay=0.005) as pg:
        if platform == "discord":
            # Discord shows "typing" for 10 s after the bot's last request and nothing
            # ends it sooner, so the page waits that out after Stop; a shorter showing
            # here. That no request follows a run's end is shown on a fake clock by
            # tests/platforms/discord/test_discord_typing_refreshes_while_a_run_works.py
            pg.emulator.typing_seconds = 2.0
        page = Page(browser, pg, tmp_path)
        try:
            page.open()
            page.send("hello browser")
            if platform != "weixin":  # Weixin sends the whole answer once the run ends
                page.wait_text("hello browser")  # the streamed answer repeats it
            page.answer_question()
            picked = "? and ?" if platform == "weixin" else "Green and Cheese, Olives"
            page.wait_text(f"You picked {picked}.")
            page.wait_text("You wrote: hello browser.")  # formatted: no markup in sight
            if platform != "weixin":  # the agent's **bold** is bold on the page, no markup shown
                bold = page.browser.script(
                    "return Array.from(document.querySelectorAll('#chat .row.bot b'))"
                    ".map(b => b.textContent)"
                )
                assert "Green" in bold and "Cheese, Olives" in bold, bold
                shown = page.browser.script(BOT_TEXT)
                assert "<b>" not in shown and "**" not in shown, shown[-400:]
            page.shot("conversation")

            page.send("long")
            if platform == "weixin":  # plain text only: the run shows as "typing"
                page.wait("return !document.getElementById('typing').hidden", "typing")
            else:
                page.wait_text("Step 1:")
                # it streams: the newest output grows until it outgrows the message list
                page.wait(
                    "const chat = document.getElementById('chat');"
                    "return chat.scrollHeight > chat.clientHeight + 200",
                    "the long answer to outgrow the window",
                )
                # the composer stays on screen and the list follows the newest output
                view = page.browser.script(
                    "const r = document.getElementById('composer').getBoundingClientRect();"
                    "const chat = document.getElementById('chat');"
                    "const latest = (() => {" + LATEST + "})().getBoundingClientRect();"
                    "const list = chat.getBoundingClientRect();"
                    "return {top: r.top, bottom: r.bottom, height: innerHeight,"
                    " pageScroll: document.scrollingElement.scrollTop,"
                    " latestBottom: latest.bottom, listBottom: list.bottom}"
                )
                assert view["top"] >= 0 and view["bottom"] <= view["height"], view
                assert view["pageScroll"] == 0, view
                assert view["latestBottom"] <= view["listBottom"] + 40, view
                assert view["latestBottom"] >= view["listBottom"] - 120, view
            page.shot("long")
            page.stop()
            page.shot("stopped")
            page.assert_no_errors()
        finally:
            browser.get("about:blank")  # stop polling before the playground closes


HOSTILE_HTML = (
    "<b>bold</b> <strong>strong</strong> <i>it</i> <em>em</em> <u>u</u> <ins>ins</ins> "
    "<s>s</s> <strike>strike</strike> <del>del</del> <code>x &lt; y</code>\n"
    '<pre><code class="language-py">print(1)</code></pre>'
    '<a href="https://example.com/ok">ok link</a> <a href="javascript:window.__pwned=3">bad '
    'link</a> <a href="tg://user?id=1">tg link</a> <A HREF=" data:text/html,x">data</A>\n'
    "<blockquote>quote</blockquote><tg-spoiler>secret</tg-spoiler> "
    '<span class="tg-spoiler">hidden</span> <span>plain span</span> '
    '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script> '
    '<b onclick="window.__pwned=4">no handler</b> </i> &amp;amp; &#65;&#x42; &nbsp; &quot;'
)


def test_telegram_html_shows_only_the_tags_telegram_allows(
    browser: Browser, tmp_path: Path
) -> None:
    """A bot message with ``parse_mode`` HTML: Telegram's tags render, a link only with an
    http(s) or tg: href, anything else is shown as the text it is and never runs."""
    with Playground(platform="telegram", demo_delay=0.005) as pg:
        page = Page(browser, pg, tmp_path)
        try:
            page.open()
            emulator = pg.emulator
            assert isinstance(emulator, TelegramEmulator)
            api = f"{pg.url}/bot{emulator.bot_token}/sendMessage"
            chat = emulator.chat_id
            for body in (
                {"chat_id": chat, "text": HOSTILE_HTML, "parse_mode": "HTML"},
                {"chat_id": chat, "text": "plain <b>not bold</b> &amp;"},  # no parse_mode
            ):
                assert requests.post(api, json=body, timeout=10).json()["ok"]
            page.wait(
                "return document.querySelectorAll('.msg-text').length === 2",
                "both messages",
            )
            html, plain = browser.script(
                "return Array.from(document.querySelectorAll('.msg-text'))"
                ".map(m => m.textContent)"
            )
            tags = browser.script(
                "const m = document.querySelector('.msg-text');"
                "return Array.from(m.querySelectorAll('*')).map(e => [e.tagName.toLowerCase(),"
                " e.textContent, e.getAttribute('href'),"
                " e.getAttributeNames().filter(a => !['class', 'href', 'target', 'rel',"
                " 'title'].includes(a))])"
            )
            found = {(tag, text) for tag, text, _, _ in tags}
            for tag, text in [
                ("b", "bold"),
                ("b", "strong"),
                ("i", "it"),
                ("i", "em"),
                ("u", "u"),
                ("u", "ins"),
                ("s", "s"),
                ("s", "strike"),
                ("s", "del"),
                ("code", "x < y"),
                ("pre", "print(1)"),
                ("code", "print(1)"),
                ("blockquote", "quote"),
                ("span", "secret"),
                ("span", "hidden"),
                ("b", "no handler"),
            ]:
                assert (tag, text) in found, (tag, text, tags)
            links = {text: href for tag, text, href, _ in tags if tag == "a"}
            assert links == {"ok link": "https://example.com/ok", "tg link": "tg://user?id=1"}
            assert all(extra == [] for _, _, _, extra in tags), tags  # no onclick, no style
            allowed = {"b", "i", "u", "s", "code", "pre", "a", "blockquote", "span"}
            assert {t for t, _, _, _ in tags} <= allowed, tags
            # what Telegram would refuse is shown as text, entities decoded once
            for literal in (
                "bad link",
                '<img src=x onerror="window.__pwned=1">',
                "<script>window.__pwned=2</script>",
                "<span>plain span</span>",
                "</i>",
                '&amp; AB &nbsp; "',
            ):
                assert literal in html, (literal, html)
            assert browser.script("return window.__pwned === undefined")
            assert plain == "plain <b>not bold</b> &amp;"  # no parse mode: the text as sent
            spoiler = page.browser.find(".msg-text .tg-spoiler")
            assert "revealed" not in browser.script(
                "return arguments[0].className", {ELEMENT: spoiler}
            )
            browser.click(spoiler)
            assert "revealed" in browser.script("return arguments[0].className", {ELEMENT: spoiler})
            page.shot("html")
            page.assert_no_errors()
        finally:
            browser.get("about:blank")
