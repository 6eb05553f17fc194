"""Wherever text is cut to a limit (characters, UTF-8 bytes, UTF-16 units), the cut
never splits a grapheme cluster; a lone surrogate in input is a PresentationError
naming its path, never a UnicodeEncodeError."""

from __future__ import annotations

import json

import pytest
from channelkit.platforms.telegram import renderer as telegram
from channelkit.presentation import (
    ActionLimits,
    Button,
    ButtonsBlock,
    MessagePresentation,
    PresentationCapabilities,
    PresentationError,
    PresentationLimits,
    ReplyPayload,
    SelectLimits,
    TextBlock,
    TextLimits,
    adapt,
    parse_reply_payload,
)
from channelkit.presentation.graphemes import grapheme_clusters
from channelkit.presentation.text import measure, split_text, truncate

FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466"  # ZWJ sequence
THUMB = "\U0001f44d\U0001f3fd"  # emoji + skin-tone modifier
FLAG_JP = "\U0001f1ef\U0001f1f5"  # regional-indicator pair
FLAG_FR = "\U0001f1eb\U0001f1f7"
KEYCAP = "1\ufe0f\u20e3"  # digit + VS16 + combining enclosing keycap
E_ACUTE = "e\u0301"  # combining mark
HEART = "\u2764\ufe0f"  # variation selector
SCOTLAND = "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"
HANGUL = "\u1100\u1161\u11a8"  # conjoining jamo (one syllable)
CLUSTERS = [FAMILY, THUMB, FLAG_JP, FLAG_FR, KEYCAP, E_ACUTE, HEART, SCOTLAND, HANGUL]
ENCODINGS = ["characters", "utf8-bytes", "utf16-units"]


def test_each_sample_is_one_cluster() -> None:
    assert grapheme_clusters("a" + "".join(CLUSTERS) + "\r\nb") == ["a", *CLUSTERS, "\r\n", "b"]
    assert grapheme_clusters(FLAG_JP + FLAG_FR + FLAG_JP[0]) == [FLAG_JP, FLAG_FR, FLAG_JP[0]]


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("cluster", CLUSTERS)
def test_truncate_never_splits_a_cluster(encoding: str, cluster: str) -> None:
    text = "ab" + cluster + cluster + "z"
    width = measure(cluster, encoding)  # type: ignore[arg-type]
    for limit in range(2, 2 + 2 * width + 2):
        out = truncate(text, limit, encoding)  # type: ignore[arg-type]
        assert measure(out, encoding) <= limit  # type: ignore[arg-type]
        assert grapheme_clusters(out) == grapheme_clusters(text)[: len(grapheme_clusters(out))]
        out.encode("utf-8")


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_split_text_cuts_only_between_clusters(encoding: str) -> None:
    text = "".join(CLUSTERS) * 3
    for limit in (30, 31, 32, 33, 40):
        parts = split_text(text, limit, encoding)  # type: ignore[arg-type]
        assert "".join(parts) == text
        boundaries = set()
        position = 0
        for cluster in grapheme_clusters(text):
            position += len(cluster)
            boundaries.add(position)
        position = 0
        for part in parts[:-1]:
            position += len(part)
            assert position in boundaries, (limit, part)


def test_adapt_cuts_titles_labels_and_text_at_cluster_boundaries() -> None:
    capabilities = PresentationCapabilities(
        limits=PresentationLimits(
            actions=ActionLimits(max_label_length=8),
            selects=SelectLimits(max_label_length=9),
            text=TextLimits(max_length=12, encoding="utf16-units"),
        )
    )
    presentation = MessagePresentation(
        title="T" + FAMILY + FAMILY,
        blocks=(
            TextBlock("ab" + FLAG_JP + FLAG_FR + FLAG_JP + FLAG_FR),
            ButtonsBlock((Button("Go" + FAMILY, value="v"),)),
        ),
    )
    out = adapt(presentation, capabilities)
    assert out.title == "T" + FAMILY  # 12 units would have cut the second family
    # 12 units would hold half of the third flag (a lone regional indicator)
    assert out.blocks[0] == TextBlock("ab" + FLAG_JP + FLAG_FR)
    assert out.blocks[1].buttons[0].label == "Go"  # type: ignore[union-attr]


LONE = json.loads('"bad \\ud83d text"')


@pytest.mark.parametrize(
    ("payload", "path"),
    [
        ({"text": LONE}, "text"),
        ({"presentation": {"title": LONE}}, "presentation.title"),
        (
            {"presentation": {"blocks": [{"type": "text", "text": LONE}]}},
            "presentation.blocks[0].text",
        ),
        (
            {
                "presentation": {
                    "blocks": [{"type": "buttons", "buttons": [{"label": "a", "value": LONE}]}]
                }
            },
            "presentation.blocks[0].buttons[0].value",
        ),
        (
            {"presentation": {"blocks": [{"type": "select", "options": [{"label": LONE}]}]}},
            "presentation.blocks[0].options[0].label",
        ),
    ],
)
def test_lone_surrogate_is_a_presentation_error_naming_the_path(
    payload: dict[str, object], path: str
) -> None:
    for parse in (parse_reply_payload, ReplyPayload.from_dict):
        with pytest.raises(PresentationError) as info:
            parse(payload)
        assert info.value.path == path
        assert "surrogate" in str(info.value)


def test_telegram_never_meets_a_lone_surrogate() -> None:
    with pytest.raises(PresentationError):
        Button("ok", value="\ud83d")
    keyboard = telegram.render(
        MessagePresentation(blocks=(ButtonsBlock((Button("ok", value=THUMB),)),))
    )
    assert keyboard[0]["reply_markup"]["inline_keyboard"][0][0]["callback_data"] == THUMB
