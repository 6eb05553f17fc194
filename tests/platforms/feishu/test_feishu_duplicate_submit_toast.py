"""A second submit of a Feishu question that was already answered says so."""

from __future__ import annotations

from channelkit.platforms.feishu import cards


def test_strings_tell_an_answered_question_from_an_expired_one() -> None:
    for table in cards.STRINGS.values():
        assert table["toast_already_answered"] != table["toast_stale"]
    assert cards.strings("en")["toast_already_answered"] == "This question was already answered."
