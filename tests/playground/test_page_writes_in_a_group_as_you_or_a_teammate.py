"""The playground page lets a person write in a group with two people, not only in a
direct chat (headless Chromium): "Group: teammate" with "@bot" unticked sends a message
that does not address the bot, and no run answers it; ticked, the bot answers. Each sent
message is labelled with where it went. Weixin, whose people write to the bot in direct
chats only, offers no group."""

from __future__ import annotations

import pytest
from channelkit.playground import Playground
from webdriver import Browser

pytestmark = pytest.mark.browser

#: The last words of the demo's ``markdown`` answer (a fixed sample, no question).
LAST_WORDS = "never cut inside a code block"
#: Bot rows holding the demo's ``markdown`` answer, once nothing runs any more.
ANSWERS = """
const done = !document.querySelector('.card[data-state="running"]')
  && document.getElementById('draft').hidden;
const rows = Array.from(document.querySelectorAll('#chat .row.bot'))
  .filter(r => r.textContent.includes(arguments[0]));
return done ? rows.length : -1;
"""
#: Whether a message of the person's with text ``arguments[0]`` carries the label
#: ``arguments[1]`` (where the page sent it).
LABELLED = """
return Array.from(document.querySelectorAll('#chat .row.user')).some(r => {
  const where = r.querySelector('.where');
  // a mention shows as the platform writes it (Slack's "<@U0BOT> text")
  return r.querySelector('.bubble').textContent.endsWith(arguments[0])
    && where !== null && where.textContent === arguments[1];
});
"""


def _send(browser: Browser, text: str, where: str) -> None:
    """Send ``text`` and wait until the page labelled it with ``where``."""
    browser.send_message(text)
    browser.wait_js(
        LABELLED,
        f"{text!r} labelled {where!r}",
        15.0,
        text,
        where,
    )


@pytest.mark.parametrize("platform", ["dingtalk", "feishu", "telegram", "slack", "discord"])
def test_a_teammate_in_the_group_is_answered_only_when_addressing_the_bot(
    browser: Browser, platform: str
) -> None:
    with Playground(platform=platform, demo_delay=0.0) as pg:
        try:
            browser.open_playground(pg.url)
            assert browser.script("return document.getElementById('mention-label').hidden")
            browser.click(browser.find("#chat-as option[value='teammate']"))
            assert not browser.script("return document.getElementById('mention-label').hidden")
            browser.click(browser.find("#mention"))  # untick: the message does not address
            _send(browser, "markdown", "group, teammate, not addressed")
            browser.click(browser.find("#mention"))  # ticked again
            _send(browser, "markdown", "group, teammate, @bot")
            answers = browser.wait_js(
                "const n = (() => {" + ANSWERS + "})(); return n > 0 ? n : null;",
                "the answer to the addressed message",
                15.0,
                LAST_WORDS,
            )
            assert answers == 1  # the message that did not address the bot started no run
            sent = [m for m in pg.emulator.timeline() if m.get("from") == "user"]
            assert len(sent) == 2, sent
            assert browser.severe_errors() == []
        finally:
            browser.get("about:blank")  # stop polling before the playground closes


def test_weixin_offers_no_group(browser: Browser) -> None:
    with Playground(platform="weixin", demo_delay=0.0) as pg:
        try:
            browser.open_playground(pg.url)
            browser.wait_js(
                "return document.getElementById('chat-as').hidden", "the chat choice hidden"
            )
            assert browser.script("return document.getElementById('mention-label').hidden")
            assert browser.severe_errors() == []
        finally:
            browser.get("about:blank")
