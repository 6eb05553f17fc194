"""StreamedText: the prefix a run already showed, tracked by length + digest."""

from __future__ import annotations

import threading

from channelkit.platforms.common import StreamedText
from hypothesis import given
from hypothesis import strategies as st


def test_nothing_taken_leaves_the_text_whole() -> None:
    taken = StreamedText()
    assert taken.length == 0
    assert taken.after_prefix("abc") == "abc" and taken.remainder("abc") == "abc"


def test_the_taken_prefix_is_dropped() -> None:
    taken = StreamedText()
    for chunk in ("Before", " the ", "question. ", ""):
        taken.add(chunk)
    assert taken.length == len("Before the question. ")
    assert taken.after_prefix("Before the question. After.") == "After."
    assert taken.after_prefix("Before the question. ") == ""


def test_a_text_that_does_not_start_with_the_prefix() -> None:
    taken = StreamedText()
    taken.add("Before.")
    assert taken.after_prefix("Other!.More") is None  # same length, different text
    assert taken.after_prefix("Bef") is None  # shorter
    assert taken.remainder("Other!.More") == "Other!.More"


def test_copy_is_an_independent_checkpoint() -> None:
    taken = StreamedText()
    taken.add("one ")
    checkpoint = taken.copy()
    taken.add("two ")
    assert checkpoint.after_prefix("one two three") == "two three"
    assert taken.after_prefix("one two three") == "three"


def test_surrogates_and_non_ascii() -> None:
    taken = StreamedText()
    taken.add("naïve 🚀 \ud800")
    assert taken.after_prefix("naïve 🚀 \ud800!") == "!"


@given(st.lists(st.text(max_size=20), max_size=8), st.text(max_size=20))
def test_any_chunking_strips_exactly_the_concatenation(chunks: list[str], rest: str) -> None:
    taken = StreamedText()
    for chunk in chunks:
        taken.add(chunk)
    assert taken.after_prefix("".join(chunks) + rest) == rest


def test_concurrent_adds_are_all_counted() -> None:
    taken = StreamedText()

    def add() -> None:
        for _ in range(500):
            taken.add("x")

    threads = [threading.Thread(target=add) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert taken.length == 2000 and taken.after_prefix("x" * 2001) == "x"
