from __future__ import annotations

from channelkit.core.types import ChannelUserQuestion, QuestionOption
from channelkit.platforms.telegram.questions import (
    build_keyboard,
    build_question_text,
    encode_callback,
    new_token,
    parse_callback,
)
from hypothesis import given
from hypothesis import strategies as st


def question(multi: bool = False, n: int = 3) -> ChannelUserQuestion:
    return ChannelUserQuestion(
        answer_key="0",
        header="Env",
        question="Where to deploy?",
        options=tuple(QuestionOption(f"Option {i}" * 10, f"desc {i}") for i in range(n)),
        multi_select=multi,
    )


def test_token_is_short_and_random() -> None:
    tokens = {new_token() for _ in range(200)}
    assert len(tokens) == 200
    assert all(len(t) == 11 for t in tokens)


def test_callback_round_trip_and_limit() -> None:
    token = new_token()
    for kind, q, o in [("option", 3, 3), ("submit", 2, 0), ("cancel", 0, 0)]:
        data = encode_callback(token, kind, q, o)
        assert len(data.encode()) <= 64
        parsed = parse_callback(data)
        assert parsed is not None and parsed.token == token and parsed.kind == kind
    assert parse_callback(encode_callback(token, "option", 1, 2)).option == 2  # type: ignore[union-attr]


@given(st.text(max_size=80))
def test_malformed_callback_data_is_rejected(data: str) -> None:
    parsed = parse_callback(data)
    if parsed is not None:
        assert (
            encode_callback(
                parsed.token, parsed.kind, max(parsed.question, 0), max(parsed.option, 0)
            )
            == data
        )


def test_malformed_examples() -> None:
    token = new_token()
    for data in [
        None,
        "",
        "ck:",
        f"ck:{token}",
        f"ck:{token}:o4.0",
        f"ck:{token}:o0.9",
        f"ck:{token}:s",
        f"ck:{token}:xx",
        f"zz:{token}:x",
        f"ck:{token[:-1]}:x",
        f"ck:{token}:x" + "a" * 64,
    ]:
        assert parse_callback(data) is None


def test_single_select_keyboard() -> None:
    token = new_token()
    kb = build_keyboard(token, 0, question(multi=False))
    rows = kb["inline_keyboard"]
    assert len(rows) == 4
    assert [b["text"] for b in rows[-1]] == ["Cancel"]
    for row in rows:
        for button in row:
            assert len(button["callback_data"].encode()) <= 64
    chosen = build_keyboard(token, 0, question(), {1})
    assert chosen["inline_keyboard"][1][0]["text"].startswith("✓ ")
    assert not chosen["inline_keyboard"][0][0]["text"].startswith("✓ ")


def test_multi_select_keyboard_has_submit_and_cancel() -> None:
    token = new_token()
    kb = build_keyboard(token, 2, question(multi=True), {0, 2})
    rows = kb["inline_keyboard"]
    assert [b["text"] for b in rows[-1]] == ["Submit", "Cancel"]
    assert parse_callback(rows[-1][0]["callback_data"]).question == 2  # type: ignore[union-attr]
    marked = [r[0]["text"].startswith("✓ ") for r in rows[:-1]]
    assert marked == [True, False, True]


def test_question_text() -> None:
    text = build_question_text(question(multi=True), 0, 2)
    assert "Env (1/2)" in text and "Where to deploy?" in text and "Submit" in text
    assert "desc 1" in text
