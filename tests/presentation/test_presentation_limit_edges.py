"""Issue 6 acceptance, degrade matrix: every declared limit exactly at its edge.

For each limit a presentation that fits exactly is left unchanged, and the same
presentation one unit over the limit is degraded (the overflow moves to a readable list or
is cut), so an off-by-one in either direction fails here.
"""

from __future__ import annotations

from typing import Any

import pytest
from channelkit.presentation import (
    ActionLimits,
    Button,
    ButtonsBlock,
    ContextBlock,
    MessagePresentation,
    PresentationCapabilities,
    PresentationLimits,
    SelectBlock,
    SelectLimits,
    SelectOption,
    TextBlock,
    TextLimits,
    adapt,
)


def _caps(
    actions: ActionLimits | None = None,
    selects: SelectLimits | None = None,
    text: TextLimits | None = None,
) -> PresentationCapabilities:
    return PresentationCapabilities(
        limits=PresentationLimits(
            actions=actions or ActionLimits(),
            selects=selects or SelectLimits(),
            text=text or TextLimits(),
        )
    )


def _buttons(*labels: str) -> ButtonsBlock:
    return ButtonsBlock(tuple(Button(label, value=label.lower()) for label in labels))


def _p(*blocks: Any, title: str | None = None) -> MessagePresentation:
    return MessagePresentation(title=title, blocks=tuple(blocks))


# (limit name, capabilities, presentation that fits exactly, the same one unit over,
#  the expected degraded blocks for the one-over case)
EDGES: list[Any] = [
    pytest.param(
        _caps(actions=ActionLimits(max_actions=4)),
        _p(_buttons("A", "B", "C", "D")),
        _p(_buttons("A", "B", "C", "D", "E")),
        (_buttons("A", "B", "C", "D"), ContextBlock("Actions:\n- E")),
        id="actions.max_actions",
    ),
    pytest.param(
        _caps(actions=ActionLimits(max_actions_per_row=3)),
        _p(_buttons("A", "B", "C")),
        _p(_buttons("A", "B", "C", "D")),
        (_buttons("A", "B", "C"), _buttons("D")),
        id="actions.max_actions_per_row",
    ),
    pytest.param(
        _caps(actions=ActionLimits(max_actions_per_row=2, max_rows=2)),
        _p(_buttons("A", "B"), _buttons("C", "D")),
        _p(_buttons("A", "B", "C", "D", "E")),
        (_buttons("A", "B"), _buttons("C", "D"), ContextBlock("Actions:\n- E")),
        id="actions.max_rows(with per-row)",
    ),
    pytest.param(
        _caps(actions=ActionLimits(max_rows=2)),
        _p(_buttons("A"), _buttons("B")),
        _p(_buttons("A"), _buttons("B"), _buttons("C")),
        (_buttons("A"), _buttons("B"), ContextBlock("Actions:\n- C")),
        id="actions.max_rows(blocks)",
    ),
    pytest.param(
        _caps(actions=ActionLimits(max_label_length=4)),
        _p(ButtonsBlock((Button("漢字😀a", value="v"),))),
        _p(ButtonsBlock((Button("漢字😀ab", value="v"),))),
        (ButtonsBlock((Button("漢字😀a", value="v"),)),),
        id="actions.max_label_length",
    ),
    pytest.param(
        _caps(actions=ActionLimits(max_value_bytes=6)),
        _p(ButtonsBlock((Button("Go", value="漢字"),))),  # 6 UTF-8 bytes
        _p(ButtonsBlock((Button("Go", value="漢字a"),))),  # 7
        (ContextBlock("Actions:\n- Go"),),
        id="actions.max_value_bytes",
    ),
    pytest.param(
        _caps(selects=SelectLimits(max_options=2)),
        _p(SelectBlock((SelectOption("A", "a"), SelectOption("B", "b")), "Pick")),
        _p(
            SelectBlock(
                (SelectOption("A", "a"), SelectOption("B", "b"), SelectOption("C", "c")), "Pick"
            )
        ),
        (
            SelectBlock((SelectOption("A", "a"), SelectOption("B", "b")), "Pick"),
            ContextBlock("Pick:\n- C"),
        ),
        id="selects.max_options",
    ),
    pytest.param(
        _caps(selects=SelectLimits(max_label_length=3)),
        _p(SelectBlock((SelectOption("a😀c", "x"),), "Tar")),
        _p(SelectBlock((SelectOption("a😀cd", "x"),), "Targ")),
        (SelectBlock((SelectOption("a😀c", "x"),), "Tar"),),
        id="selects.max_label_length",
    ),
    pytest.param(
        _caps(selects=SelectLimits(max_value_bytes=4)),
        _p(SelectBlock((SelectOption("A", "😀"), SelectOption("B", "b")), "Pick")),
        _p(SelectBlock((SelectOption("A", "😀a"), SelectOption("B", "b")), "Pick")),
        (SelectBlock((SelectOption("B", "b"),), "Pick"), ContextBlock("Pick:\n- A")),
        id="selects.max_value_bytes",
    ),
    pytest.param(
        _caps(text=TextLimits(max_length=3, encoding="characters")),
        _p(TextBlock("a😀漢"), title="a😀漢"),
        _p(TextBlock("a😀漢b"), title="a😀漢b"),
        (TextBlock("a😀漢"),),
        id="text.max_length(characters)",
    ),
    pytest.param(
        _caps(text=TextLimits(max_length=8, encoding="utf8-bytes")),
        _p(TextBlock("a😀漢"), title="a😀漢"),  # 1 + 4 + 3 bytes
        _p(TextBlock("a😀漢b"), title="a😀漢b"),
        (TextBlock("a😀漢"),),
        id="text.max_length(utf8-bytes)",
    ),
    pytest.param(
        _caps(text=TextLimits(max_length=4, encoding="utf16-units")),
        _p(TextBlock("a😀漢"), title="a😀漢"),  # 1 + 2 + 1 units
        _p(TextBlock("a😀漢b"), title="a😀漢b"),
        (TextBlock("a😀漢"),),
        id="text.max_length(utf16-units)",
    ),
]


@pytest.mark.parametrize(("caps", "exact", "over", "expected"), EDGES)
def test_limit_exactly_at_the_edge_is_kept_and_one_over_degrades(
    caps: PresentationCapabilities,
    exact: MessagePresentation,
    over: MessagePresentation,
    expected: tuple[Any, ...],
) -> None:
    assert adapt(exact, caps) == exact
    degraded = adapt(over, caps)
    assert degraded.blocks == expected
    if over.title is not None:
        assert degraded.title == exact.title
    # Degrading is stable: the result already fits.
    assert adapt(degraded, caps) == degraded


@pytest.mark.parametrize("cut", [1, 2, 3])
def test_utf16_limit_inside_a_surrogate_pair_drops_the_whole_emoji(cut: int) -> None:
    caps = _caps(text=TextLimits(max_length=cut, encoding="utf16-units"))
    out = adapt(_p(TextBlock("a😀b")), caps)
    expected = {1: "a", 2: "a", 3: "a😀"}[cut]
    assert out.blocks == (TextBlock(expected),)
    assert all(not 0xD800 <= ord(c) <= 0xDFFF for c in expected)
