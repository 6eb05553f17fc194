"""Link buttons become links only for http(s) URLs (plus a platform's own documented
schemes, e.g. Telegram ``tg:``); any other link is dropped to plain text with a logged
warning, on every platform, adapted or not."""

from __future__ import annotations

import json
import logging

import pytest
from channelkit.platforms.slack import renderer as slack
from channelkit.platforms.telegram import renderer as telegram
from channelkit.presentation import (
    Button,
    ButtonsBlock,
    MessagePresentation,
    PresentationCapabilities,
    adapt,
    render_fallback_text,
)
from channelkit.presentation.links import is_safe_link

from .limits import PLATFORMS

UNSAFE = [
    "javascript:alert(1)",
    "JavaScript:alert(1)",
    "data:text/html;base64,PHNjcmlwdD4=",
    "vbscript:msgbox(1)",
    "file:///etc/passwd",
    "mailto:ops@example.test",
    "/relative/path",
    "//evil.test/x",
    "https:no-host",
    "java\nscript:alert(1)",
    " https://padded.test/",
    "https://x.test/a b",
]


@pytest.mark.parametrize("url", UNSAFE)
def test_unsafe_link_table(url: str) -> None:
    assert not is_safe_link(url)
    assert not is_safe_link(url, ("https", "http", "tg"))


@pytest.mark.parametrize(
    "url", ["https://x.test/a?b=c#d", "http://x.test", "HTTPS://X.TEST/", "https://[::1]:8/"]
)
def test_web_links_are_safe(url: str) -> None:
    assert is_safe_link(url)


def test_platform_schemes_only_where_declared() -> None:
    assert is_safe_link("tg://resolve?domain=channelkit", ("https", "http", "tg"))
    assert not is_safe_link("tg://resolve?domain=channelkit")


def _presentation(url: str) -> MessagePresentation:
    return MessagePresentation(
        blocks=(ButtonsBlock((Button("Open me", url=url), Button("Both", value="v", url=url))),)
    )


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
@pytest.mark.parametrize("url", ["javascript:alert(1)", "data:text/html,hi", "/relative"])
def test_unsafe_link_never_reaches_any_platform(
    platform: str, url: str, caplog: pytest.LogCaptureFixture
) -> None:
    capabilities, render, check = PLATFORMS[platform]
    presentation = _presentation(url)
    with caplog.at_level(logging.WARNING, logger="channelkit.presentation.links"):
        adapted = adapt(presentation, capabilities)
    assert any("Link button URL dropped" in r.getMessage() for r in caplog.records)
    for candidate in (adapted, presentation):  # the renderer re-checks unadapted input
        messages = render(candidate)
        check(messages)
        wire = json.dumps(messages)
        assert url not in wire and json.dumps(url)[1:-1] not in wire, platform
        assert "Open me" in wire
    assert all(b.url is None for b in adapted.blocks[0].buttons)  # type: ignore[union-attr]
    assert Button("Both", value="v") in adapted.blocks[0].buttons  # type: ignore[union-attr]


def test_unsafe_link_reads_as_bare_label_in_text() -> None:
    presentation = _presentation("javascript:alert(1)")
    assert render_fallback_text(presentation) == "- Open me\n- Both"
    off = adapt(presentation, PresentationCapabilities(buttons=False))
    assert render_fallback_text(off) == "Actions:\n- Open me\n- Both"


def test_telegram_keeps_its_tg_links_and_slack_does_not() -> None:
    presentation = _presentation("tg://resolve?domain=channelkit")
    keyboard = telegram.render(adapt(presentation, telegram.CAPABILITIES))[0]["reply_markup"]
    assert keyboard["inline_keyboard"][0][0] == {
        "text": "Open me",
        "url": "tg://resolve?domain=channelkit",
    }
    assert "tg://" not in json.dumps(slack.render(adapt(presentation, slack.CAPABILITIES)))
