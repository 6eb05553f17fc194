"""The playground page draws each platform's formatted text as that platform shows it,
never as raw markup (headless Chromium).

The demo's ``markdown`` answer on DingTalk, Feishu, Telegram and Slack: bold is bold,
code is code, the link is an http(s) link opening in a new tab, and the table follows
the platform's policy (Feishu's card and Slack's Markdown stream: a table; DingTalk and
Telegram: an aligned monospace block), with no ``**``, fences, ``&gt;`` or ``<url|text>``
left in sight and no console error. Slack's mrkdwn (what ``chat.postMessage`` carries)
is drawn as Slack shows it: ``*bold*``, ``_italic_``, ``~strike~``, ``<url|text>``,
entities decoded exactly once, ``<!here>`` as text, other link schemes refused. Every
golden answer of the Markdown dialects (``tests/markdown/golden``) is drawn without raw
markup in sight.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from channelkit.markdown import Dialect, render
from channelkit.playground import Playground
from channelkit.playground.demo import DEMO_MARKDOWN
from channelkit.playground.slack import SlackEmulator
from webdriver import Browser

pytestmark = pytest.mark.browser

WAIT = 15.0
LAST_WORDS = "never cut inside a code block"
ALIGNED_HEADER = "Service | Region   | Status   | Latency"
#: Where the table is a table (Slack: when the answer is a Markdown stream); elsewhere
#: it is the aligned block in a <pre>.
TABLES = ("feishu", "slack")
#: Markup a person must never see in a formatted answer.
RAW = ("**", "```", "&gt;", "&lt;", "&amp;", "](http", "|status page>", "## ", "|---|")

#: The text of the newest bot message holding ``arguments[0]``, once nothing is running.
ANSWER = """
const done = !document.querySelector('.card[data-state="running"]')
  && document.getElementById('draft').hidden;
const rows = Array.from(document.querySelectorAll('#chat .row.bot'))
  .filter(r => r.textContent.includes(arguments[0]));
const row = rows.length ? rows[rows.length - 1] : null;
return done && row ? row.querySelector('.msg-text, .card-content, .bubble') || row : null;
"""
#: What the page drew in an element: its text, tags, links, tables and code blocks.
DRAWN = """
const root = arguments[0];
const all = Array.from(root.querySelectorAll('*'));
return {
  text: root.textContent,
  bold: all.filter(e => ['B', 'STRONG'].includes(e.tagName)).map(e => e.textContent),
  italic: all.filter(e => ['I', 'EM'].includes(e.tagName)).map(e => e.textContent),
  strike: all.filter(e => ['S', 'DEL'].includes(e.tagName)).map(e => e.textContent),
  code: all.filter(e => e.tagName === 'CODE').map(e => e.textContent),
  pre: all.filter(e => e.tagName === 'PRE').map(e => e.textContent),
  links: Array.from(root.querySelectorAll('a')).map(a => [a.textContent,
    a.getAttribute('href'), a.getAttribute('target'), a.getAttribute('rel')]),
  tables: Array.from(root.querySelectorAll('table')).map(t =>
    Array.from(t.rows).map(r => Array.from(r.cells).map(c => c.textContent))),
  quotes: Array.from(root.querySelectorAll('blockquote')).map(q => q.textContent),
  attrs: all.flatMap(e => e.getAttributeNames()
    .filter(a => !['class', 'href', 'target', 'rel', 'title', 'style', 'role',
      'aria-level', 'data-lang', 'start'].includes(a))),
  tags: Array.from(new Set(all.map(e => e.tagName.toLowerCase()))),
};
"""


def _answer(browser: Browser, words: str, shots: Path, name: str) -> Any:
    """The bot element with ``words`` once drawn; on timeout a screenshot and the page."""
    deadline = time.monotonic() + WAIT
    while True:
        found = browser.script(ANSWER, words)
        if found:
            return found
        if time.monotonic() > deadline:
            browser.screenshot(shots / f"{name}-timeout.png")
            shown = browser.script("return document.getElementById('chat').textContent")
            raise AssertionError(f"{name}: no answer with {words!r}; page: {shown[-800:]!r}")
        time.sleep(0.05)


def _markup(pg: Playground, words: str) -> str | None:
    """How Slack reads the bot message holding ``words``: ``markdown`` (a stream's text)
    or ``mrkdwn`` (a posted or updated message: a run that ends before its stream opens
    is posted whole, its table an aligned block); None on other platforms."""
    views = (pg.emulator.state().get("views") or {}).values()
    found = [v.get("markup") for v in views if words in str(v.get("text", ""))]
    return found[-1] if found else None


def _assert_no_errors(browser: Browser) -> None:
    errors = browser.severe_errors()
    assert errors == [], json.dumps(errors, indent=1)
    bar = "document.getElementById('error-bar')"
    assert browser.script(f"return {bar}.hidden"), browser.script(f"return {bar}.textContent")


@pytest.mark.parametrize("platform", ["dingtalk", "feishu", "telegram", "slack", "discord"])
def test_the_markdown_sample_is_drawn_formatted(
    browser: Browser, tmp_path: Path, platform: str
) -> None:
    with Playground(platform=platform, demo_delay=0.0) as pg:
        try:
            browser.open_playground(pg.url)
            browser.send_message("markdown")
            drawn = browser.script(DRAWN, _answer(browser, LAST_WORDS, tmp_path, platform))
            text = drawn["text"]
            assert "ready" in drawn["bold"], drawn["bold"]
            assert "mostly" in drawn["italic"], drawn["italic"]
            assert any("def greet(name: str) -> str:" in p for p in drawn["pre"]), drawn["pre"]
            assert any("def greet" in c for c in drawn["code"]) or platform == "slack", drawn
            assert [
                "status page",
                "https://example.com/channelkit/status",
                "_blank",
                "noopener noreferrer",
            ] in drawn["links"], drawn["links"]
            if platform in TABLES and _markup(pg, LAST_WORDS) != "mrkdwn":
                assert drawn["tables"] == [
                    [
                        ["Service", "Region", "Status", "Latency"],
                        ["api", "eu-west", "up", "42 ms"],
                        ["worker", "us-east", "up", "57 ms"],
                        ["search", "ap-south", "degraded", "310 ms"],
                    ]
                ], drawn["tables"]
            else:
                assert drawn["tables"] == []
                assert any(p.startswith(ALIGNED_HEADER + "\n") for p in drawn["pre"]), drawn
            for raw in RAW:
                assert raw not in text, (raw, text)
            assert drawn["attrs"] == [], drawn["attrs"]  # no onclick, no src, no style text
            assert not {"script", "img", "iframe"} & set(drawn["tags"]), drawn["tags"]
            _assert_no_errors(browser)
        finally:
            browser.get("about:blank")  # stop polling before the playground closes


#: Slack mrkdwn a bot may post: every construct Slack draws, and what it must not run.
HOSTILE_MRKDWN = (
    "*bold* _it_ ~gone~ `x &lt; y` a*b*c snake_case_name\n"
    "> quoted <https://example.com/q?a=1&amp;b=2|a &amp; b>\n"
    "<https://example.com/bare> <javascript:window.__pwned=1|bad link> "
    "<!here> <!channel> <@U123|ann> <#C1|general>\n"
    "&amp;lt;b&amp;gt; stays text &lt;img src=x onerror=window.__pwned=2&gt;\n"
    "• bullet one\n◦ bullet two\n"
    "```\nif a &gt; b: *not bold*\n```"
)


def test_slack_mrkdwn_is_drawn_as_slack_shows_it(browser: Browser, tmp_path: Path) -> None:
    """What ``chat.postMessage`` carries (the SDK's mrkdwn for the sample, and a hostile
    message) drawn as Slack shows it, with nothing run and no entity decoded twice."""
    with Playground(platform="slack", demo_delay=0.0) as pg:
        try:
            browser.open_playground(pg.url)
            emulator = pg.emulator
            assert isinstance(emulator, SlackEmulator)
            headers = {"Authorization": f"Bearer {emulator.bot_token}"}
            for text in ("\n\n".join(render(DEMO_MARKDOWN, Dialect.SLACK)), HOSTILE_MRKDWN):
                body = {"channel": emulator.channel, "text": text}
                answer = requests.post(
                    f"{pg.url}/chat.postMessage", json=body, headers=headers, timeout=10
                )
                assert answer.json()["ok"], answer.text
            sample = browser.script(DRAWN, _answer(browser, LAST_WORDS, tmp_path, "sample"))
            assert "ready" in sample["bold"] and "Release notes" in sample["bold"], sample
            assert "mostly" in sample["italic"], sample["italic"]
            assert any(p.startswith(ALIGNED_HEADER + "\n") for p in sample["pre"]), sample
            assert any("def greet(name: str) -> str:" in p for p in sample["pre"]), sample
            assert [
                "status page",
                "https://example.com/channelkit/status",
                "_blank",
                "noopener noreferrer",
            ] in sample["links"], sample["links"]
            for raw in RAW:
                assert raw not in sample["text"], (raw, sample["text"])

            hostile = browser.script(DRAWN, _answer(browser, "bullet two", tmp_path, "hostile"))
            assert hostile["bold"] == ["bold"], hostile["bold"]  # not a*b*c, not in the block
            assert hostile["italic"] == ["it"] and hostile["strike"] == ["gone"], hostile
            assert hostile["code"] == ["x < y"], hostile["code"]
            assert hostile["quotes"] == ["quoted a & b"], hostile["quotes"]
            assert hostile["pre"] == ["if a > b: *not bold*"], hostile["pre"]
            assert hostile["links"] == [
                ["a & b", "https://example.com/q?a=1&b=2", "_blank", "noopener noreferrer"],
                [
                    "https://example.com/bare",
                    "https://example.com/bare",
                    "_blank",
                    "noopener noreferrer",
                ],
            ], hostile["links"]
            text = hostile["text"]
            for shown in (
                "a*b*c snake_case_name",
                "bad link",
                "@here @channel @ann #general",
                "&lt;b&gt; stays text <img src=x onerror=window.__pwned=2>",
                "• bullet one\n◦ bullet two",
            ):
                assert shown in text, (shown, text)
            assert "javascript:" not in json.dumps(hostile["links"])
            assert browser.script("return window.__pwned === undefined")
            assert hostile["attrs"] == [] and "img" not in hostile["tags"], hostile
            _assert_no_errors(browser)
        finally:
            browser.get("about:blank")


GOLDEN = Path(__file__).resolve().parents[1] / "markdown" / "golden"
DIALECTS = ("slack", "feishu", "dingtalk", "discord")
#: Raw markup no golden answer may show once drawn ...
GOLDEN_RAW = ("**", "```", "~~", "&gt;", "&lt;", "&amp;", "&#", "](", "<http", "|http", "\\")
#: ... but where the answer itself is that text: a refused link, code, an escaped backslash.
LITERAL = {
    ("05_links", "]("),
    ("10_code_fence_no_language", "**"),
    ("11_tilde_fence_with_backticks", "```"),
    ("23_escaped_markdown", "\\"),
}
#: Every golden answer of every Markdown dialect drawn on a detached element.
DRAW_ALL = """
return arguments[0].map(([name, dialect, text]) => {
  const node = document.createElement('div');
  renderMarkup(node, text, dialect);
  return [name, dialect, node.textContent,
    Array.from(new Set(Array.from(node.querySelectorAll('*')).map(e => e.tagName.toLowerCase())))];
});
"""


def test_every_golden_answer_is_drawn_without_raw_markup(browser: Browser) -> None:
    """The checked-in golden renderings of every Markdown dialect, drawn by the page:
    no markup left in sight, and each construct of the formatting sample as an element."""
    jobs = [
        [vector.name, dialect, (vector / f"{dialect}.txt").read_text(encoding="utf-8")]
        for vector in sorted(GOLDEN.iterdir())
        if (vector / "input.md").is_file()
        for dialect in DIALECTS
    ]
    assert len(jobs) == 30 * len(DIALECTS)
    with Playground(platform="weixin") as pg:  # the page's scripts; any platform will do
        try:
            browser.open_playground(pg.url)
            drawn = {
                (name, dialect): (text, tags)
                for name, dialect, text, tags in browser.script(DRAW_ALL, jobs)
            }
            for (name, dialect), (text, _) in drawn.items():
                for raw in GOLDEN_RAW:
                    assert raw not in text or (name, raw) in LITERAL, (name, dialect, raw, text)
            for dialect in DIALECTS:
                tags = set(drawn["03_bold_italic_strike_code", dialect][1])
                strike = {"s"} if dialect != "dingtalk" else set()  # DingTalk has none
                assert {"b", "i", "code"} | strike <= tags, (dialect, tags)
                table = drawn["14_small_table", dialect][1]
                assert ("table" in table) == (dialect == "feishu"), (dialect, table)
                assert ("pre" in table) == (dialect != "feishu"), (dialect, table)
                assert {"ol", "ul", "li"} <= set(drawn["07_nested_lists", dialect][1]) or (
                    dialect == "slack"  # mrkdwn has no lists: bullet lines as written
                ), dialect
            _assert_no_errors(browser)
        finally:
            browser.get("about:blank")
