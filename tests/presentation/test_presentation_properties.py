"""Property tests over random presentations and random capabilities: adapt never
exceeds a declared limit, never loses a button label, and is idempotent; and over random
(sometimes oversized) presentations for every platform: adapt + render never exceeds
that platform's documented payload limits and never loses a label."""

from __future__ import annotations

import json
import re
import unicodedata
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.presentation import (
    ActionLimits,
    Button,
    ButtonsBlock,
    ContextBlock,
    DividerBlock,
    MessagePresentation,
    PresentationCapabilities,
    PresentationLimits,
    SelectBlock,
    SelectLimits,
    SelectOption,
    TextBlock,
    TextLimits,
    adapt,
    render_fallback_text,
)
from channelkit.presentation.links import is_safe_link
from channelkit.presentation.text import measure, truncate
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from .limits import PLATFORMS, shown_labels, visible_text

ALPHABET = st.sampled_from(list("ab cé漢字😀👍🏽\n-:"))
words = st.text(alphabet=ALPHABET, min_size=1, max_size=24).filter(lambda s: s.strip() != "")
limit = st.none() | st.integers(min_value=1, max_value=8)


short_url = st.text(alphabet="abc", max_size=5).map(lambda path: "https://x.test/" + path)


@st.composite
def buttons(draw: Any, texts: Any = words, urls: Any = short_url) -> Button:
    target = draw(st.sampled_from(["value", "url", "command", "value+url"]))
    return Button(
        label=draw(words),
        value=draw(texts) if "value" in target else None,
        url=draw(urls) if "url" in target else None,
        command="/" + draw(texts) if target == "command" else None,
        style=draw(st.none() | st.sampled_from(["primary", "secondary", "success", "danger"])),
        priority=draw(st.none() | st.integers(min_value=-3, max_value=3)),
        disabled=draw(st.booleans()),
    )


def block_strategy(texts: Any, button: Any, max_buttons: int, max_options: int) -> Any:
    """Random blocks: text/context from ``texts``, buttons from ``button``."""
    return st.one_of(
        texts.map(TextBlock),
        texts.map(ContextBlock),
        st.just(DividerBlock()),
        st.lists(button, min_size=1, max_size=max_buttons).map(lambda b: ButtonsBlock(tuple(b))),
        st.builds(
            lambda options, placeholder: SelectBlock(tuple(options), placeholder),
            st.lists(
                st.builds(SelectOption, words, st.none() | words),
                min_size=1,
                max_size=max_options,
            ),
            st.none() | words,
        ),
    )


blocks = block_strategy(words, buttons(), max_buttons=7, max_options=6)

presentations = st.builds(
    MessagePresentation,
    title=st.none() | words,
    tone=st.none() | st.sampled_from(["neutral", "info", "success", "warning", "danger"]),
    blocks=st.lists(blocks, max_size=8).map(tuple),
)

capabilities = st.builds(
    PresentationCapabilities,
    buttons=st.booleans(),
    selects=st.booleans(),
    context=st.booleans(),
    divider=st.booleans(),
    limits=st.builds(
        PresentationLimits,
        actions=st.builds(
            ActionLimits,
            max_actions=limit,
            max_actions_per_row=limit,
            max_rows=limit,
            max_label_length=limit,
            max_value_bytes=st.none() | st.integers(min_value=1, max_value=40),
            supports_styles=st.booleans(),
            supports_disabled=st.booleans(),
        ),
        selects=st.builds(
            SelectLimits,
            max_options=limit,
            max_label_length=limit,
            max_value_bytes=st.none() | st.integers(min_value=1, max_value=40),
        ),
        text=st.builds(
            TextLimits,
            # >= 4 so that any single code point fits in every encoding
            max_length=st.none() | st.integers(min_value=4, max_value=30),
            encoding=st.sampled_from(["characters", "utf8-bytes", "utf16-units"]),
        ),
    ),
)

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def utf8(value: str) -> int:
    return len(value.encode("utf-8"))


@SETTINGS
@given(presentations, capabilities)
def test_adapt_never_exceeds_a_declared_limit(
    p: MessagePresentation, c: PresentationCapabilities
) -> None:
    out = adapt(p, c)
    actions, selects, text = c.limits.actions, c.limits.selects, c.limits.text
    total_actions = 0
    rows = 0
    for block in out.blocks:
        if isinstance(block, ButtonsBlock):
            assert c.buttons
            total_actions += len(block.buttons)
            rows += 1
            if actions.max_actions_per_row is not None:
                assert len(block.buttons) <= actions.max_actions_per_row
            for button in block.buttons:
                if actions.max_label_length is not None:
                    assert len(button.label) <= actions.max_label_length
                if actions.max_value_bytes is not None:
                    assert button.value is None or utf8(button.value) <= actions.max_value_bytes
                    assert button.command is None or utf8(button.command) <= actions.max_value_bytes
                if not actions.supports_styles:
                    assert button.style is None
                if not actions.supports_disabled:
                    assert not button.disabled
        elif isinstance(block, SelectBlock):
            assert c.selects
            total_actions += 1
            rows += 1
            if selects.max_options is not None:
                assert len(block.options) <= selects.max_options
            for option in block.options:
                if selects.max_label_length is not None:
                    assert len(option.label) <= selects.max_label_length
                if selects.max_value_bytes is not None:
                    assert utf8(option.option_value) <= selects.max_value_bytes
            if selects.max_label_length is not None and block.placeholder is not None:
                assert len(block.placeholder) <= selects.max_label_length
        elif isinstance(block, ContextBlock):
            assert c.context
        elif isinstance(block, DividerBlock):
            assert c.divider
        if isinstance(block, TextBlock | ContextBlock) and text.max_length is not None:
            assert measure(block.text, text.encoding) <= text.max_length
            block.text.encode("utf-8")  # no lone surrogate
    if actions.max_actions is not None:
        assert total_actions <= actions.max_actions
    if actions.max_rows is not None:
        assert rows <= actions.max_rows
    if out.title is not None and text.max_length is not None:
        assert measure(out.title, text.encoding) <= text.max_length


@SETTINGS
@given(presentations, capabilities)
def test_adapt_never_loses_a_button_label(
    p: MessagePresentation, c: PresentationCapabilities
) -> None:
    out = adapt(p, c)
    visible = "".join(render_fallback_text(out).split())
    for block in p.blocks:
        if isinstance(block, ButtonsBlock):
            for button in block.buttons:
                shown = truncate(button.label, c.limits.actions.max_label_length).strip()
                assert "".join(shown.split()) in visible, (button.label, visible)
        if isinstance(block, SelectBlock):
            for option in block.options:
                shown = truncate(option.label, c.limits.selects.max_label_length).strip()
                assert "".join(shown.split()) in visible


@SETTINGS
@given(presentations, capabilities)
def test_adapt_is_idempotent_and_deterministic(
    p: MessagePresentation, c: PresentationCapabilities
) -> None:
    once = adapt(p, c)
    assert adapt(once, c) == once
    assert adapt(p, c) == once


@SETTINGS
@given(presentations)
def test_json_round_trip_is_stable_after_normalization(p: MessagePresentation) -> None:
    try:
        normalized = MessagePresentation.from_dict(p.to_dict())
    except Exception:  # nothing left after trimming: rejected, which is the contract
        assert all(isinstance(b, TextBlock | ContextBlock) for b in p.blocks) or p.is_empty
        return
    assert MessagePresentation.from_dict(normalized.to_dict()) == normalized


# --------------------------------------------------------------------------- renderers

# Sometimes far over every platform's size limits: long texts, links and values.
big_words = st.builds(lambda w, n: w * n, words, st.sampled_from([1, 1, 1, 80, 1500]))
big_url = st.sampled_from(
    ["https://x.test/a", "https://x.test/" + "u" * 700, "https://x.test/" + "u" * 3500]
)


big_blocks = block_strategy(big_words, buttons(big_words, big_url), max_buttons=6, max_options=30)

big_presentations = st.builds(
    MessagePresentation,
    title=st.none() | big_words,
    tone=st.none() | st.sampled_from(["info", "danger"]),
    blocks=st.lists(big_blocks, max_size=10).map(tuple),
)

RENDER_SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


# Characters outside the BMP cost the most on the wire (12 bytes as a JSON escape pair,
# 4 in UTF-8, 2 in UTF-16). The first example is the case hypothesis found: Feishu's
# 2,000-character text pieces did not fit beside a 6,000-byte title header.
WIDE = "\U0001f3fd"


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
@RENDER_SETTINGS
@given(p=big_presentations, text=st.none() | big_words)
@example(p=MessagePresentation(title=WIDE * 3000), text=None)
@example(
    p=MessagePresentation(
        title=WIDE * 3000,
        tone="danger",
        blocks=(TextBlock(WIDE * 5000), ContextBlock('"\\' * 2000), DividerBlock()),
    ),
    text=WIDE * 4000,
)
def test_rendered_output_is_within_platform_limits_and_keeps_every_label(
    platform: str, p: MessagePresentation, text: str | None
) -> None:
    capabilities, render, check = PLATFORMS[platform]
    messages = render(adapt(p, capabilities), text=text)
    check(messages)
    seen = visible_text(platform, messages)
    for label in shown_labels(p, capabilities):
        assert label in seen, (platform, label)


# --------------------------------------------------------------------------- safety

# Hostile agent content: mass mentions, unsafe and platform-specific links, shared
# callback values, and grapheme clusters that a careless cut would split.
CLUSTERS = [
    "\U0001f468\u200d\U0001f469\u200d\U0001f467",  # ZWJ sequence
    "\U0001f44d\U0001f3fd",  # emoji modifier
    "\U0001f1ef\U0001f1f5",  # flag (regional-indicator pair)
    "1\ufe0f\u20e3",  # keycap
    "e\u0301",  # combining mark
    "\u2764\ufe0f",  # variation selector
    "\u1100\u1161\u11a8",  # Hangul jamo
]
MENTIONS = ["<!channel>", "<!here>", "<!everyone>", "<!subteam^S1|@team>", "@channel", "@all"]
UNSAFE_URLS = ["javascript:alert(1)", "data:text/html,boom", "/relative/x"]
SAFE_URLS = ["https://x.test/a", "tg://resolve?domain=x"]
atoms = st.sampled_from([*CLUSTERS, *MENTIONS, "@here", "a", "b ", "\n", "漢"])
hostile_words = st.lists(atoms, min_size=1, max_size=12).map("".join).filter(str.strip)
hostile_long = st.builds(lambda w, n: w * n, hostile_words, st.sampled_from([1, 1, 40, 250]))
shared_value = st.sampled_from(["same", "same", "other", "x:y"])


@st.composite
def hostile_buttons(draw: Any) -> Button:
    target = draw(st.sampled_from(["value", "url", "command", "value+url"]))
    return Button(
        label=draw(hostile_words),
        value=draw(shared_value) if "value" in target else None,
        url=draw(st.sampled_from(UNSAFE_URLS + SAFE_URLS)) if "url" in target else None,
        command="/" + draw(shared_value) if target == "command" else None,
    )


hostile_blocks = st.one_of(
    hostile_long.map(TextBlock),
    hostile_long.map(ContextBlock),
    st.lists(hostile_buttons(), min_size=1, max_size=6).map(lambda b: ButtonsBlock(tuple(b))),
    st.lists(
        st.builds(SelectOption, hostile_words, st.none() | shared_value), min_size=1, max_size=6
    ).map(lambda o: SelectBlock(tuple(o), "Pick " + CLUSTERS[0])),
)
hostile_presentations = st.builds(
    MessagePresentation,
    title=st.none() | hostile_words,
    blocks=st.lists(hostile_blocks, min_size=1, max_size=6).map(tuple),
)

_SLACK_MASS = re.compile(r"<!(?:channel|here|everyone|group|subteam)", re.IGNORECASE)
_MATTERMOST_MASS = re.compile(r"(?<![\w.@\-])@(?:channel|all|here)(?![\w\-])", re.IGNORECASE)
_LINK_KEYS = ("url", "uri", "default_url")


def _walk(value: Any, key: str = "", parent: Any = None) -> Iterator[tuple[str, Any, Any]]:
    """(key, value, the dict holding it) for every leaf."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "content" and isinstance(v, str) and v.startswith("{"):
                v = json.loads(v)  # Feishu: the card travels serialized
            yield from _walk(v, k, value)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item, key, parent)
    else:
        yield key, value, parent


def _split_cluster(text: str) -> bool:
    """A string that starts or ends inside one of CLUSTERS (the only clusters here)."""
    if not text:
        return False
    first, last = ord(text[0]), ord(text[-1])
    if unicodedata.category(text[0]) in ("Mn", "Me") or first in (0x200D, 0xFE0F, 0x1F3FD):
        return True
    if 0x1160 <= first <= 0x11FF or last == 0x200D or 0x1100 <= last <= 0x1160:
        return True
    return any(len(run) % 2 for run in re.findall("[\U0001f1e6-\U0001f1ff]+", text))


def _ids(platform: str, message: dict[str, Any]) -> list[list[str]]:
    """Groups of ids that the platform requires to be unique."""
    pairs = [(k, v) for k, v, _ in _walk(message)]
    if platform == "discord":
        groups = [[v for k, v in pairs if k == "custom_id"]]
        for item in _discord_selects(message):
            groups.append([o["value"] for o in item["options"]])
        return groups
    if platform == "slack":
        return [[v for k, v in pairs if k == "action_id"], [v for k, v in pairs if k == "block_id"]]
    if platform == "mattermost":
        return [[v for k, v in pairs if k == "id"]]
    return []


def _discord_selects(message: dict[str, Any]) -> list[dict[str, Any]]:
    rows = [c for c in message["components"][0]["components"] if c["type"] == 1]
    return [item for row in rows for item in row["components"] if item["type"] == 3]


SAFETY_SETTINGS = settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
@SAFETY_SETTINGS
@given(p=hostile_presentations, text=st.none() | hostile_words)
def test_rendered_output_is_safe_on_every_platform(
    platform: str, p: MessagePresentation, text: str | None
) -> None:
    capabilities, render, check = PLATFORMS[platform]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        messages = render(adapt(p, capabilities), text=text)
    check(messages)
    wire = json.dumps(messages, ensure_ascii=False)
    schemes = capabilities.limits.actions.link_schemes
    for url in UNSAFE_URLS:
        assert url not in wire, (platform, url)
    for message in messages:
        for key, value, parent in _walk(message):
            if not isinstance(value, str):
                continue
            if key in _LINK_KEYS:
                assert is_safe_link(value, schemes), (platform, value)
            if platform == "slack" and (parent is message or parent.get("type") == "mrkdwn"):
                assert not _SLACK_MASS.search(value), value  # plain_text never notifies
            if platform == "mattermost" and key == "message":
                assert not _MATTERMOST_MASS.search(value), value
            if key not in ("custom_id", "value", "callback_data", "data", "action_id"):
                assert not _split_cluster(value.strip()), (platform, key, value)
        if platform == "discord":
            assert message["allowed_mentions"] == {"parse": []}
        for group in _ids(platform, message):
            assert len(group) == len(set(group)), (platform, group)
