"""The one busy/closed ACK policy every message ingress shares (common.inbound)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from channelkit.core import ChannelBusy, ChannelClosed
from channelkit.platforms.common.inbound import (
    CLOSED_STATUS,
    ack_status,
    deliver_inbound,
    hand_inbound,
)


class _Channel:
    name = "stub"

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error
        self.calls: list[Any] = []

    def handle_inbound(self, message: Any, *, defer: Any = None) -> str:
        self.calls.append((message, defer))
        if self.error is not None:
            raise self.error
        return "handle"


def test_accepted_busy_and_closed_outcomes() -> None:
    after: list[Any] = []
    assert deliver_inbound(_Channel(), "m", defer=after) == "accepted"  # type: ignore[arg-type]
    assert deliver_inbound(_Channel(ChannelBusy("full")), "m") == "busy"  # type: ignore[arg-type]
    assert deliver_inbound(_Channel(ChannelClosed("x")), "m") == "closed"  # type: ignore[arg-type]
    assert [ack_status(o) for o in ("accepted", "busy", "closed")] == [200, 200, CLOSED_STATUS]
    assert CLOSED_STATUS == 503


def test_handle_is_returned_only_when_accepted() -> None:
    assert hand_inbound(_Channel(), "m") == ("accepted", "handle")  # type: ignore[arg-type]
    assert hand_inbound(_Channel(ChannelBusy("b")), "m") == ("busy", None)  # type: ignore[arg-type]


def test_closed_logs_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="channelkit.platforms.common.inbound"):
        deliver_inbound(_Channel(ChannelClosed("closed")), "m")  # type: ignore[arg-type]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "closed" in warnings[0].getMessage()


def test_other_errors_propagate() -> None:
    with pytest.raises(RuntimeError):
        deliver_inbound(_Channel(RuntimeError("boom")), "m")  # type: ignore[arg-type]
