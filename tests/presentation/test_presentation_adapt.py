"""The degrade matrix: every capability flag off, every limit at its edge, budgets,
priority cutting, text limits in every encoding."""

from __future__ import annotations

import pytest
from channelkit.errors import ConfigurationError
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
    TextBlock,
    TextLimits,
    adapt,
    render_fallback_text,
)


def caps(
    *,
    actions: ActionLimits | None = None,
    select_limits: SelectLimits | None = None,
    text: TextLimits | None = None,
    **flags: object,
) -> PresentationCapabilities:
    return PresentationCapabilities(
        limits=PresentationLimits(
            actions=actions or ActionLimits(),
            selects=select_limits or SelectLimits(),
            text=text or TextLimits(),
        ),
        **flags,  # type: ignore[arg-type]
    )


def buttons(*labels: str, **extra: object) -> ButtonsBlock:
    return ButtonsBlock(tuple(Button(label, value=label.lower(), **extra) for label in labels))  # type: ignore[arg-type]


def select(*labels: str, placeholder: str | None = None) -> SelectBlock:
    from channelkit.presentation import SelectOption

    return SelectBlock(tuple(SelectOption(label, label.lower()) for label in labels), placeholder)


def P(*blocks: object, title: str | None = None, tone: str | None = None) -> MessagePresentation:
    return MessagePresentation(title=title, tone=tone, blocks=tuple(blocks))  # type: ignore[arg-type]


SAMPLE = P(
    TextBlock("Body"),
    ContextBlock("Small print"),
    DividerBlock(),
    buttons("Approve", "Decline"),
    select("Canary", "Prod", placeholder="Environment"),
    title="Title",
    tone="warning",
)


def test_no_capabilities_means_unchanged() -> None:
    assert adapt(SAMPLE, None) is SAMPLE
    assert adapt(SAMPLE, PresentationCapabilities()) is SAMPLE


# ------------------------------------------------------------------ flags off


def test_buttons_off_become_actions_list_right_after_block() -> None:
    out = adapt(SAMPLE, caps(buttons=False))
    assert out.blocks[3] == ContextBlock("Actions:\n- Approve\n- Decline")
    assert isinstance(out.blocks[4], SelectBlock)


def test_selects_off_become_placeholder_list() -> None:
    out = adapt(SAMPLE, caps(selects=False))
    assert out.blocks[-1] == ContextBlock("Environment:\n- Canary\n- Prod")
    no_placeholder = adapt(P(select("A")), caps(selects=False))
    assert no_placeholder.blocks == (ContextBlock("Options:\n- A"),)


def test_context_off_becomes_text_including_generated_lists() -> None:
    out = adapt(SAMPLE, caps(context=False, selects=False))
    assert out.blocks[1] == TextBlock("Small print")
    assert out.blocks[-1] == TextBlock("Environment:\n- Canary\n- Prod")


def test_divider_off_is_dropped_without_placeholder() -> None:
    out = adapt(SAMPLE, caps(divider=False))
    assert DividerBlock() not in out.blocks
    assert len(out.blocks) == len(SAMPLE.blocks) - 1


def test_styles_kept_unless_unsupported() -> None:
    p = P(ButtonsBlock((Button("Go", value="go", style="danger"),)))
    assert adapt(p, caps()).blocks[0] == p.blocks[0]
    out = adapt(p, caps(actions=ActionLimits(supports_styles=False)))
    assert out.blocks[0] == ButtonsBlock((Button("Go", value="go"),))


def test_disabled_buttons_degrade_unless_supported() -> None:
    p = P(ButtonsBlock((Button("Wait", value="w", disabled=True), Button("Go", value="g"))))
    out = adapt(p, caps())
    assert out.blocks == (
        ButtonsBlock((Button("Go", value="g"),)),
        ContextBlock("Actions:\n- Wait"),
    )
    kept = adapt(p, caps(actions=ActionLimits(supports_disabled=True)))
    assert kept.blocks == p.blocks


def test_tones_not_declared_are_dropped() -> None:
    assert adapt(SAMPLE, caps(tones=("info",))).tone is None
    assert adapt(SAMPLE, caps(tones=("warning",))).tone == "warning"


# ------------------------------------------------------------------ action limits at the edge


def test_max_actions_edge() -> None:
    p = P(buttons("A", "B", "C"))
    assert adapt(p, caps(actions=ActionLimits(max_actions=3))).blocks == p.blocks
    out = adapt(p, caps(actions=ActionLimits(max_actions=2)))
    assert out.blocks == (buttons("A", "B"), ContextBlock("Actions:\n- C"))
    out = adapt(p, caps(actions=ActionLimits(max_actions=1)))
    assert out.blocks == (buttons("A"), ContextBlock("Actions:\n- B\n- C"))


def test_per_row_split_even_when_rows_unlimited() -> None:
    p = P(buttons("1", "2", "3", "4", "5", "6"))
    out = adapt(p, caps(actions=ActionLimits(max_actions_per_row=5)))
    assert out.blocks == (buttons("1", "2", "3", "4", "5"), buttons("6"))
    exact = adapt(
        P(buttons("1", "2", "3", "4", "5")), caps(actions=ActionLimits(max_actions_per_row=5))
    )
    assert len(exact.blocks) == 1


def test_max_rows_edge_with_per_row() -> None:
    p = P(buttons("1", "2", "3", "4", "5"))
    out = adapt(p, caps(actions=ActionLimits(max_actions_per_row=2, max_rows=2)))
    assert out.blocks == (buttons("1", "2"), buttons("3", "4"), ContextBlock("Actions:\n- 5"))


def test_max_rows_without_per_row_counts_blocks() -> None:
    p = P(buttons("A", "B"), buttons("C"))
    out = adapt(p, caps(actions=ActionLimits(max_rows=1)))
    assert out.blocks == (buttons("A", "B"), ContextBlock("Actions:\n- C"))


def test_label_length_edge_never_splits_code_points() -> None:
    p = P(ButtonsBlock((Button("😀😀😀", value="x"), Button("Exact", value="y"))))
    out = adapt(p, caps(actions=ActionLimits(max_label_length=5)))
    labels = [b.label for b in out.blocks[0].buttons]  # type: ignore[union-attr]
    assert labels == ["😀😀😀", "Exact"]
    out = adapt(p, caps(actions=ActionLimits(max_label_length=2)))
    assert [b.label for b in out.blocks[0].buttons] == ["😀😀", "Ex"]  # type: ignore[union-attr]


def test_value_bytes_edge() -> None:
    p = P(ButtonsBlock((Button("Fits", value="é" * 2), Button("Over", value="é" * 3))))
    out = adapt(p, caps(actions=ActionLimits(max_value_bytes=4)))
    assert out.blocks == (
        ButtonsBlock((Button("Fits", value="éé"),)),
        ContextBlock("Actions:\n- Over"),
    )


def test_link_button_keeps_link_when_value_too_big() -> None:
    p = P(ButtonsBlock((Button("Open report", value="x" * 50, url="https://r.test"),)))
    out = adapt(p, caps(actions=ActionLimits(max_value_bytes=10)))
    assert out.blocks == (ButtonsBlock((Button("Open report", url="https://r.test"),)),)


def test_command_too_big_goes_to_fallback_with_command_shown() -> None:
    p = P(ButtonsBlock((Button("Run", command="/" + "x" * 30),)))
    out = adapt(p, caps(actions=ActionLimits(max_value_bytes=24)))
    assert out.blocks == (ContextBlock(f"Actions:\n- Run: `/{'x' * 30}`"),)


def test_overflowed_link_buttons_keep_url_in_fallback() -> None:
    p = P(ButtonsBlock((Button("A", value="a"), Button("Docs", url="https://docs.example.test"))))
    out = adapt(p, caps(actions=ActionLimits(max_actions=1)))
    assert out.blocks[-1] == ContextBlock("Actions:\n- Docs: https://docs.example.test")


def test_values_kept_without_a_value_limit() -> None:
    p = P(ButtonsBlock((Button("Long", value="v" * 180),)))
    assert adapt(p, caps(actions=ActionLimits(max_label_length=10))).blocks == p.blocks


# ------------------------------------------------------------------ priority


def test_priority_keeps_highest_inside_capacity() -> None:
    p = P(
        ButtonsBlock(
            (
                Button("Low", value="l", priority=1),
                Button("High", value="h", priority=10),
                Button("Next", value="n", priority=5),
            )
        )
    )
    out = adapt(p, caps(actions=ActionLimits(max_actions=2)))
    assert [b.label for b in out.blocks[0].buttons] == ["High", "Next"]  # type: ignore[union-attr]
    assert out.blocks[1] == ContextBlock("Actions:\n- Low")


def test_authored_order_kept_when_nothing_dropped() -> None:
    p = P(
        ButtonsBlock((Button("Low", value="l", priority=1), Button("High", value="h", priority=9)))
    )
    assert adapt(p, caps(actions=ActionLimits(max_actions=2))).blocks == p.blocks


def test_priority_ties_keep_authored_order() -> None:
    p = P(buttons("A", "B", "C"))
    out = adapt(p, caps(actions=ActionLimits(max_actions=2)))
    assert [b.label for b in out.blocks[0].buttons] == ["A", "B"]  # type: ignore[union-attr]


def test_priority_across_blocks_shares_budget() -> None:
    p = P(
        ButtonsBlock((Button("Low", value="l", priority=1),)),
        ButtonsBlock((Button("High", value="h", priority=10),)),
    )
    out = adapt(p, caps(actions=ActionLimits(max_actions=1)))
    assert out.blocks == (
        ContextBlock("Actions:\n- Low"),
        ButtonsBlock((Button("High", value="h", priority=10),)),
    )


# ------------------------------------------------------------------ mixed budgets


def test_select_counts_against_action_budget() -> None:
    p = P(select("X"), buttons("One", "Two", "Three"))
    out = adapt(p, caps(actions=ActionLimits(max_actions=3)))
    assert out.blocks == (select("X"), buttons("One", "Two"), ContextBlock("Actions:\n- Three"))


def test_select_reserves_a_row() -> None:
    p = P(buttons("One", "Two", "Three"), select("X"))
    out = adapt(p, caps(actions=ActionLimits(max_actions_per_row=2, max_rows=2)))
    assert out.blocks == (buttons("One", "Two"), ContextBlock("Actions:\n- Three"), select("X"))


def test_select_without_budget_left_becomes_list() -> None:
    p = P(buttons("One"), select("X", "Y", placeholder="Pick"))
    out = adapt(p, caps(actions=ActionLimits(max_actions=1), select_limits=SelectLimits()))
    # The select is reserved first, so the button gives way.
    assert out.blocks == (ContextBlock("Actions:\n- One"), select("X", "Y", placeholder="Pick"))
    p2 = P(select("A"), select("B"))
    out2 = adapt(p2, caps(actions=ActionLimits(max_actions=1)))
    assert out2.blocks == (select("A"), ContextBlock("Options:\n- B"))


def test_max_options_edge_and_overflow_list() -> None:
    p = P(select("Staging", "Production", "Long", placeholder="Target"))
    assert adapt(p, caps(select_limits=SelectLimits(max_options=3))).blocks == p.blocks
    out = adapt(p, caps(select_limits=SelectLimits(max_options=1)))
    assert out.blocks == (
        select("Staging", placeholder="Target"),
        ContextBlock("Target:\n- Production\n- Long"),
    )


def test_option_value_and_label_limits() -> None:
    from channelkit.presentation import SelectOption

    p = P(
        SelectBlock((SelectOption("Short", "s"), SelectOption("Long callback", "x" * 20)), "Target")
    )
    out = adapt(p, caps(select_limits=SelectLimits(max_value_bytes=10, max_label_length=3)))
    assert out.blocks == (
        SelectBlock((SelectOption("Sho", "s"),), "Tar"),
        ContextBlock("Target:\n- Long callback"),
    )


def test_all_options_invalid_lists_every_option() -> None:
    from channelkit.presentation import SelectOption

    p = P(
        SelectBlock(
            (SelectOption("A", "x" * 20), SelectOption("B", "y" * 20)),
        )
    )
    out = adapt(p, caps(select_limits=SelectLimits(max_value_bytes=5)))
    assert out.blocks == (ContextBlock("Options:\n- A\n- B"),)


# ------------------------------------------------------------------ text limits


@pytest.mark.parametrize(
    ("encoding", "limit", "expected"),
    [
        ("characters", 3, "ab😀"),
        ("utf8-bytes", 6, "ab😀"),
        ("utf8-bytes", 5, "ab"),
        ("utf8-bytes", 9, "ab😀漢"),
        ("utf16-units", 3, "ab"),
        ("utf16-units", 4, "ab😀"),
        ("utf16-units", 5, "ab😀漢"),
    ],
)
def test_text_limit_in_each_encoding(encoding: str, limit: int, expected: str) -> None:
    p = P(TextBlock("ab😀漢字"), title="ab😀漢字")
    out = adapt(p, caps(text=TextLimits(max_length=limit, encoding=encoding)))  # type: ignore[arg-type]
    assert out.title == expected
    assert out.blocks == (TextBlock(expected),)


def test_text_limit_edge_exact_fit_unchanged() -> None:
    p = P(TextBlock("hello"), ContextBlock("world"), title="title")
    assert adapt(p, caps(text=TextLimits(max_length=5))) is p


def test_text_limits_apply_last_and_split_generated_lists() -> None:
    p = P(
        TextBlock("hello world"),
        ContextBlock("context!"),
        buttons("Deploy", "Rollback"),
        title="abcdefgh",
    )
    out = adapt(p, caps(buttons=False, text=TextLimits(max_length=12)))
    assert out.title == "abcdefgh"[:12]
    assert out.blocks[0] == TextBlock("hello world")
    fragments = out.blocks[2:]
    assert [b.continuation for b in fragments] == [False] + [True] * (len(fragments) - 1)  # type: ignore[union-attr]
    assert all(len(b.text) <= 12 for b in fragments)  # type: ignore[union-attr]
    text = render_fallback_text(out)
    assert text.endswith("Actions:\n- Deploy\n- Rollback")


def test_text_truncation_to_blank_drops_block() -> None:
    p = P(TextBlock("😀 rest"), TextBlock("ok"))
    out = adapt(p, caps(text=TextLimits(max_length=3, encoding="utf8-bytes")))
    assert out.blocks == (TextBlock("ok"),)


def test_emoji_and_cjk_utf16_no_split_surrogates() -> None:
    text = "漢😀" * 10
    p = P(TextBlock(text))
    for limit in range(1, 12):
        out = adapt(p, caps(text=TextLimits(max_length=limit, encoding="utf16-units")))
        for block in out.blocks:
            block.text.encode("utf-8")  # type: ignore[union-attr]
            assert len(block.text.encode("utf-16-le")) // 2 <= limit  # type: ignore[union-attr]


def test_adapt_is_idempotent_on_sample_matrix() -> None:
    matrix = [
        caps(buttons=False),
        caps(selects=False, context=False, divider=False),
        caps(actions=ActionLimits(max_actions=1, max_actions_per_row=1, max_rows=1)),
        caps(text=TextLimits(max_length=4, encoding="utf8-bytes")),
    ]
    for capabilities in matrix:
        once = adapt(SAMPLE, capabilities)
        assert adapt(once, capabilities) == once


def test_invalid_limits_rejected_with_field_name() -> None:
    with pytest.raises(ConfigurationError, match="limits.actions.max_actions"):
        ActionLimits(max_actions=0)
    with pytest.raises(ConfigurationError, match="limits.text.encoding"):
        TextLimits(encoding="latin1")  # type: ignore[arg-type]
