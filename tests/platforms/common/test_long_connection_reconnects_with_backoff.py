"""A long connection reconnects after failures with a capped, jittered backoff (never a
tight loop), resets the backoff once connected, reports its state, and stops cleanly."""

from __future__ import annotations

import threading

import pytest
from channelkit.platforms.common.connection import (
    Backoff,
    LongConnection,
    connections_of,
    start_connections,
    stop_connections,
)
from channelkit.testing import wait_until


class Scripted(LongConnection):
    """Fails ``failures`` times, then stays connected until stopped."""

    def __init__(self, failures: int, **kw: object) -> None:
        self.delays: list[float] = []
        self.attempts = 0
        self.failures = failures
        self.up = threading.Event()
        self.released = threading.Event()
        super().__init__(
            "scripted", backoff=Backoff(0.5, 4.0, jitter=lambda: 1.0), wait=self._record
        )

    def _record(self, stop: threading.Event, seconds: float) -> bool:
        self.delays.append(seconds)
        return stop.is_set()

    def serve_once(self) -> None:
        self.attempts += 1
        if self.attempts <= self.failures:
            raise ConnectionError(f"refused {self.attempts}")
        self.connected()
        self.up.set()
        self.released.wait(10)

    def interrupt(self) -> None:
        self.released.set()


def test_failures_back_off_exponentially_up_to_the_cap_then_connect() -> None:
    conn = Scripted(failures=5)
    conn.start()
    try:
        assert conn.up.wait(10)
        assert conn.delays == [0.5, 1.0, 2.0, 4.0, 4.0]  # jitter 1.0: the full ceiling
        state = conn.state()
        assert state.status == "connected" and state.attempt == 0 and state.last_error is None
        assert conn.backoff.failures == 0
    finally:
        assert conn.stop(5)
    assert conn.state().status == "stopped"


def test_state_names_the_attempt_and_last_error_while_reconnecting() -> None:
    gate = threading.Event()
    seen: list[object] = []

    class Stuck(Scripted):
        def _record(self, stop: threading.Event, seconds: float) -> bool:
            seen.append(self.state())
            gate.wait(10)
            return stop.is_set()

    conn = Stuck(failures=1)
    conn.start()
    try:
        wait_until(lambda: seen)
        state = seen[0]
        assert state.status == "reconnecting"  # type: ignore[attr-defined]
        assert state.attempt == 1  # type: ignore[attr-defined]
        assert state.last_error == "ConnectionError: refused 1"  # type: ignore[attr-defined]
        assert state.to_dict()["status"] == "reconnecting"  # type: ignore[attr-defined]
    finally:
        gate.set()
        assert conn.stop(5)


def test_stop_during_a_backoff_ends_the_thread_without_another_attempt() -> None:
    conn = Scripted(failures=100)
    conn._wait = lambda stop, seconds: True  # type: ignore[method-assign]  # stopped meanwhile
    conn.start()
    wait_until(lambda: conn.state().status == "stopped")
    assert conn.attempts == 1
    assert conn.stop(5)


def test_channels_expose_their_connections_and_stop_them_within_the_grace_period() -> None:
    class Channel:
        def __init__(self) -> None:
            self.connections = [Scripted(failures=0), Scripted(failures=0)]

    channels = [Channel(), object()]
    started = start_connections(channels)
    assert len(started) == 2 and connections_of(channels[1]) == ()
    for conn in started:
        assert conn.up.wait(10)  # type: ignore[attr-defined]
    assert stop_connections(started, timeout=5.0)
    assert all(c.state().status == "stopped" for c in started)


_RealThread = threading.Thread


def test_a_stop_racing_the_start_joins_a_started_thread_or_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Ctrl+C right after a channel started: stop() ran while start() had made the thread
    # but not yet started it, and joining it raised "cannot join thread before it is
    # started" out of the channel's close.
    creating = threading.Event()
    release = threading.Event()

    class SlowStart(_RealThread):
        def start(self) -> None:
            creating.set()
            assert release.wait(10)
            super().start()

    conn = Scripted(failures=0)
    errors: list[BaseException] = []
    results: list[bool] = []

    def stop() -> None:
        try:
            results.append(conn.stop(5))
        except BaseException as exc:  # the failure under test
            errors.append(exc)

    monkeypatch.setattr(threading, "Thread", SlowStart)  # the connection's thread only:
    starter = _RealThread(target=conn.start, daemon=True)  # helpers are real threads
    starter.start()
    assert creating.wait(10)
    stopper = _RealThread(target=stop, daemon=True)
    stopper.start()
    stopper.join(0.2)  # bounded: the stop has had its chance to meet the unstarted thread
    release.set()
    starter.join(10)
    stopper.join(10)
    assert errors == [] and results == [True]
    assert conn.state().status == "stopped"
