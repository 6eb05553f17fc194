"""Tables follow each platform's policy: native on Feishu, an aligned monospace block
where it fits the width, else "column: value" lines; the caller can choose."""

from __future__ import annotations

from channelkit.markdown import Dialect, render

SMALL = "| Name | Qty |\n|:--|--:|\n| Apple | 3 |\n| 梨 | 10 |\n"
WIDE = "| Service | Region | Status | Notes |\n|---|---|---|---|\n" + (
    "| api-gateway | eu-west-1 | healthy | canary at ten percent of traffic |\n"
)


def test_feishu_gets_a_native_table() -> None:
    [out] = render(SMALL, Dialect.FEISHU)
    assert out == "| Name | Qty |\n| :-- | --: |\n| Apple | 3 |\n| 梨 | 10 |"


def test_a_table_that_fits_is_an_aligned_monospace_block_wide_characters_counted_twice() -> None:
    [out] = render(SMALL, Dialect.TELEGRAM)
    assert out == "<pre>Name  | Qty\n------+----\nApple |   3\n梨    |  10</pre>"
    [out] = render(SMALL, Dialect.DINGTALK)
    assert out == "```\nName  | Qty\n------+----\nApple |   3\n梨    |  10\n```"


def test_a_table_wider_than_the_width_becomes_column_value_lines() -> None:
    [out] = render(WIDE, Dialect.TELEGRAM)
    assert out.splitlines() == [
        "<b>Service</b>: api-gateway",
        "<b>Region</b>: eu-west-1",
        "<b>Status</b>: healthy",
        "<b>Notes</b>: canary at ten percent of traffic",
    ]
    [out] = render(WIDE, Dialect.SLACK)
    assert out.startswith("*Service*: api-gateway\n")


def test_the_policy_and_width_are_configurable() -> None:
    [lines] = render(SMALL, Dialect.FEISHU, table="lines")
    assert lines == "**Name**: Apple\n**Qty**: 3\n\n**Name**: 梨\n**Qty**: 10"
    [mono] = render(WIDE, Dialect.TELEGRAM, table="monospace")
    assert mono.startswith("<pre>Service")
    [wide] = render(WIDE, Dialect.TELEGRAM, table_width=120)
    assert wide.startswith("<pre>Service")
    [native] = render(SMALL, Dialect.DISCORD, table="native")  # no native table: as auto
    assert native.startswith("```\nName")


def test_a_long_table_split_repeats_its_header_in_every_part() -> None:
    rows = "".join(f"| item {i} | {i} |\n" for i in range(100))
    parts = render("| Name | Qty |\n|---|---|\n" + rows, Dialect.FEISHU, limit=300)
    assert len(parts) > 3
    assert all(p.startswith("| Name | Qty |\n| --- | --- |\n") for p in parts)
    assert sum(p.count("| item ") for p in parts) == 100
