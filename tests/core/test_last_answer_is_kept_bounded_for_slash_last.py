"""``LastAnswers``: each scope's last answer, bounded in size (20,000 characters), age
(``last_answer_max_age``) and number of scopes (1,000), in the state store when one is
configured; the hint about ``/last`` is earned once, only by an uncertain or failed
delivery."""

from __future__ import annotations

import pytest
from channelkit.core import ChannelConfig
from channelkit.core.last_answers import LAST_ANSWER_MAX_CHARS, LastAnswers
from channelkit.errors import ConfigurationError
from channelkit.runtime import FakeClock
from channelkit.state import MemoryStore


def _answers(**kwargs: object) -> tuple[LastAnswers, FakeClock]:
    clock = FakeClock()
    return LastAnswers("test", clock=clock, max_age=60.0, **kwargs), clock  # type: ignore[arg-type]


def test_an_answer_is_kept_with_its_newest_20000_characters() -> None:
    answers, _ = _answers()
    long = "a" * 30_000 + "THE END"
    answers.record("s1", "r1", long)
    kept = answers.last("s1")
    assert kept is not None and len(kept) == LAST_ANSWER_MAX_CHARS
    assert kept.endswith("THE END") and kept.startswith("[...]")


def test_an_answer_older_than_the_max_age_is_gone() -> None:
    answers, clock = _answers()
    answers.record("s1", "r1", "hello")
    clock.advance(59.0)
    assert answers.last("s1") == "hello"
    clock.advance(2.0)
    assert answers.last("s1") is None


@pytest.mark.parametrize(
    ("outcome", "hinted"),
    [("delivered", False), ("refused", False), ("uncertain", True), ("failed", True)],
)
def test_only_an_uncertain_or_failed_delivery_earns_the_hint_once(
    outcome: str, hinted: bool
) -> None:
    answers, _ = _answers()
    answers.record("s1", "r1", "hello")
    assert not answers.take_hint("s1")  # pending: nothing known yet
    answers.settle("r1", outcome)  # type: ignore[arg-type]
    assert answers.take_hint("s1") is hinted
    assert not answers.take_hint("s1")


def test_asking_for_the_answer_ends_the_hint_and_a_newer_answer_replaces_it() -> None:
    answers, _ = _answers()
    answers.record("s1", "r1", "first")
    answers.settle("r1", "uncertain")
    assert answers.last("s1") == "first"
    assert not answers.take_hint("s1")
    answers.record("s1", "r2", "second")
    answers.settle("r1", "uncertain")  # the older run's outcome no longer counts
    assert not answers.take_hint("s1")
    assert answers.last("s1") == "second"


def test_the_map_of_scopes_is_bounded() -> None:
    answers, _ = _answers(maxsize=3)
    for i in range(5):
        answers.record(f"s{i}", f"r{i}", f"answer {i}")
    assert answers.last("s0") is None and answers.last("s1") is None
    assert answers.last("s4") == "answer 4"


def test_with_a_state_store_another_channel_instance_sees_the_answer() -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    one = LastAnswers("test", clock=clock, max_age=60.0, store=lambda: store)
    two = LastAnswers("test", clock=clock, max_age=60.0, store=lambda: store)
    one.record("s1", "r1", "shared")
    one.settle("r1", "uncertain")
    assert two.take_hint("s1")
    assert two.last("s1") == "shared"
    clock.advance(61.0)
    assert two.last("s1") is None


def test_a_bad_outcome_and_a_bad_age_are_refused_by_name() -> None:
    answers, _ = _answers()
    with pytest.raises(ValueError, match="outcome"):
        answers.settle("r1", "lost")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="last_answer_max_age"):
        ChannelConfig(name="x", last_answer_max_age=0)
