"""`unavailable_notice()`: the one rule every chat platform follows for a delivery its
shared store could not vouch for. The first time a person is met during an outage the
answer is the work that tells them `MSG_STORE_UNAVAILABLE` (in their language, through
the given send path, handed to the pool by ``post``); nothing else is done. Nobody is
told twice in one outage, the next outage tells them again, the set of people is bounded,
and a failed send is logged, not raised. (The platforms' use of it: the contract test
``test_a_store_outage_tells_each_person_once_and_runs_nothing_twice``.)"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from channelkit.core.catalog import messages
from channelkit.core.text import MSG_STORE_UNAVAILABLE
from channelkit.errors import StateStoreUnavailable
from channelkit.platforms.common.store_watch import unavailable_notice, watch_of
from channelkit.runtime import FakeClock
from channelkit.state import MemoryStore


class Pool:
    """Collects the work handed to it (run by the test, as the pool would)."""

    def __init__(self) -> None:
        self.work: list[Callable[[], None]] = []

    def post(self, fn: Callable[[], None]) -> None:
        self.work.append(fn)

    def run(self) -> None:
        work, self.work = self.work, []
        for fn in work:
            fn()


def test_each_person_is_told_once_per_outage_in_their_language_after_the_ack() -> None:
    store = MemoryStore(namespace="notice")
    watch = watch_of(store, FakeClock().time)
    watch.failed(StateStoreUnavailable("down"))
    sent: list[tuple[str, str]] = []
    pool = Pool()

    def notice(person: str, locale: str = "en") -> Callable[[], None] | None:
        return unavailable_notice(
            store,
            channel="bot",
            person=person,
            messages=messages(locale),
            send=lambda text: sent.append((person, text)),
            post=pool.post,
        )

    first = notice("ana", "de")
    assert first is not None and pool.work == [] and sent == []  # nothing before the ACK
    first()  # after the ACK: handed to the pool
    assert sent == []
    pool.run()
    assert sent == [("ana", messages("de").text(MSG_STORE_UNAVAILABLE))]
    assert notice("ana") is None  # once per outage, however often they write
    told_bo = notice("bo")
    assert told_bo is not None
    told_bo()
    pool.run()
    assert sent[-1] == ("bo", MSG_STORE_UNAVAILABLE)

    watch.answered()  # the store answers again: the next outage tells everyone again
    watch.failed(StateStoreUnavailable("down again"))
    again = notice("ana")
    assert again is not None


def test_nobody_is_told_without_a_store_or_a_person() -> None:
    store = MemoryStore(namespace="notice")
    pool = Pool()

    def send(text: str) -> None:
        raise AssertionError("nothing to send")

    assert unavailable_notice(None, channel="bot", person="ana", send=send, post=pool.post) is None
    for nobody in ("", None):
        tell = unavailable_notice(store, channel="bot", person=nobody, send=send, post=pool.post)
        assert tell is None


def test_people_are_told_per_channel_and_the_set_is_bounded() -> None:
    store = MemoryStore(namespace="notice")
    watch = watch_of(store, FakeClock().time)
    watch.max_notices = 2
    pool = Pool()

    def notice(channel: str, person: str) -> Callable[[], None] | None:
        return unavailable_notice(store, channel=channel, person=person, send=len, post=pool.post)

    assert notice("one", "ana") is not None
    assert notice("two", "ana") is not None  # the same id on another channel: another person
    assert notice("one", "bo") is None  # past the bound nobody else is told


def test_a_failed_notice_is_logged_not_raised_and_the_catalog_message_can_pass_through(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore(namespace="notice")
    pool = Pool()
    given: list[str] = []

    def send(text: str) -> None:
        given.append(text)
        raise StateStoreUnavailable("the platform refused it")

    tell = unavailable_notice(store, channel="bot", person="ana", send=send, post=pool.post)
    assert tell is not None
    tell()
    with caplog.at_level(logging.WARNING):
        pool.run()  # no exception
    assert given == [MSG_STORE_UNAVAILABLE]  # the catalog Message: the send path renders it
    assert getattr(given[0], "key", None) == "notice.store_unavailable"
    assert "the store-unavailable notice failed" in caplog.text
