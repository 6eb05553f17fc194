"""`OutboundPacer`: the calls of a family wait for their bucket's token on the injected
clock, in the order they came, and two pacers on one store (two processes on one Redis)
share the buckets; a call waits at most ``max_wait_s`` and then goes (issue 28). Every
platform's table names real operations of its generated client, and the operations page
lists every table."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import pytest
from channelkit.errors import ConfigurationError
from channelkit.http.client import BaseClient
from channelkit.platforms.common.limits import TABLES, attach_pacer
from channelkit.platforms.common.rate_limit import LimitTable, OutboundLimit, OutboundPacer
from channelkit.runtime import FakeClock
from channelkit.state import MemoryStore

WAIT_S = 5.0  # bounded real wait for a thread's call to go
TABLE = LimitTable(
    platform="test",
    operations={"send": "post", "edit": "post", "typing": "cheap"},
    limits={
        "post": (OutboundLimit(1.0, 2.0, "chat"), OutboundLimit(100.0, 100.0, "bot")),
        "cheap": (OutboundLimit(100.0, 100.0, "bot"),),
    },
    scope_of=lambda op, args, body: args.get("chat"),
)
ROOT = Path(__file__).resolve().parents[3]


class Caller(threading.Thread):
    """One call through ``pacer`` on its own thread; ``went`` is set when it may go."""

    def __init__(self, pacer: OutboundPacer, chat: str, order: list[str], name: str) -> None:
        super().__init__(daemon=True)
        self.pacer, self.chat, self.order, self.label = pacer, chat, order, name
        self.went = threading.Event()

    def run(self) -> None:
        self.pacer.before_call("send", {"chat": self.chat}, None)
        self.order.append(self.label)
        self.went.set()


def _line(pacer: OutboundPacer, chat: str) -> int:
    lines: dict[str, Any] = pacer._lines  # the waiting callers, per bucket
    return len(lines.get(f"ratelimit:test:post:{chat}", ()))


def _wait(predicate: Any) -> bool:
    done = threading.Event()
    for _ in range(int(WAIT_S / 0.01)):
        if predicate():
            return True
        done.wait(0.01)
    return bool(predicate())


def test_calls_past_the_burst_wait_for_the_clock_in_the_order_they_came() -> None:
    clock = FakeClock()
    pacer = OutboundPacer(TABLE, clock=clock)
    order: list[str] = []
    pacer.before_call("send", {"chat": "c1"}, None)
    pacer.before_call("edit", {"chat": "c1"}, None)  # the burst of 2: at once
    callers = []
    for i in range(3):
        caller = Caller(pacer, "c1", order, f"call {i}")
        caller.start()
        callers.append(caller)
        assert _wait(lambda i=i: _line(pacer, "c1") == i + 1)  # in line, in this order
    assert not any(c.went.is_set() for c in callers)  # the clock stands: nobody goes
    pacer.before_call("send", {"chat": "c2"}, None)  # another chat has its own bucket
    pacer.before_call("typing", {"chat": "c1"}, None)  # another family too
    for i, caller in enumerate(callers):
        clock.advance(1.0)  # one token a second
        assert caller.went.wait(WAIT_S), f"call {i} did not go"
        assert _wait(lambda i=i: len(order) == i + 1)
    assert order == ["call 0", "call 1", "call 2"]
    assert pacer.waited == 3 and pacer.unpaced == 0
    assert pacer._lines == {}  # bounded: no line left behind


def test_two_pacers_on_one_store_share_the_bucket() -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    first, second = (OutboundPacer(TABLE, clock=clock, store=store) for _ in range(2))
    first.before_call("send", {"chat": "c1"}, None)
    second.before_call("send", {"chat": "c1"}, None)
    order: list[str] = []
    caller = Caller(first, "c1", order, "third")
    caller.start()
    assert _wait(lambda: _line(first, "c1") == 1)
    assert not caller.went.wait(0.05)  # the other process took the burst's second token
    clock.advance(1.0)
    assert caller.went.wait(WAIT_S)


def test_a_call_goes_after_max_wait_without_a_token_and_overrides_apply() -> None:
    clock = FakeClock()
    pacer = OutboundPacer(TABLE, clock=clock, max_wait_s=2.0)
    pacer.override("post", OutboundLimit(0.1, 1.0, "chat"))
    pacer.before_call("send", {"chat": "c1"}, None)
    order: list[str] = []
    caller = Caller(pacer, "c1", order, "late")
    caller.start()
    assert _wait(lambda: _line(pacer, "c1") == 1)
    clock.advance(2.5)  # past max_wait_s, still no token (one every 10 s)
    assert caller.went.wait(WAIT_S)
    assert pacer.unpaced == 1
    with pytest.raises(ConfigurationError):
        pacer.override("nope", OutboundLimit(1.0, 1.0))
    pacer.enabled = False
    pacer.before_call("send", {"chat": "c1"}, None)  # off: at once


def test_every_table_names_operations_of_its_generated_client() -> None:
    import importlib

    for platform, table in TABLES.items():
        if not table.operations:
            continue  # Telegram: listed for the documentation only
        module = importlib.import_module(f"channelkit.clients.{platform}.client")
        source = Path(module.__file__ or "").read_text(encoding="utf-8")
        known = set(re.findall(r'operation_id="([^"]+)"', source))
        assert set(table.operations) <= known, (platform, set(table.operations) - known)
        client = next(
            v
            for v in vars(module).values()
            if isinstance(v, type) and issubclass(v, BaseClient) and v is not BaseClient
        )
        assert client.__name__.lower().startswith(platform)


def test_attach_pacer_hooks_the_generated_client_only() -> None:
    from channelkit.clients.slack import SlackClient

    client = SlackClient(token="xoxb-test", base_url="http://127.0.0.1:9")
    try:
        pacer = attach_pacer(client, "slack", clock=FakeClock(), store=None)
        assert client.pace == pacer.before_call
        stand_in = object()
        attach_pacer(stand_in, "slack", clock=FakeClock(), store=None)  # left as it is
    finally:
        client.close()


def test_the_operations_page_lists_every_platforms_limits() -> None:
    page = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    section = page[page.index("## Rate limits") :]
    for platform, table in TABLES.items():
        rows = [line for line in section.splitlines() if line.lower().startswith(f"| {platform} ")]
        assert rows, platform
        for family in table.limits:
            if platform != "telegram":
                assert f"({family})" in section, (platform, family)
