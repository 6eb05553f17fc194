"""A ``/deny`` settling a form while its card is being sent leaves the card cancelled.

The settlement makes the reserved form terminal and records its state; the delivery
that finishes meanwhile patches the delivered card to that state. The two steps of the
settlement are one under the registry lock: a delivery reading the state between them
showed the deny as expired. The interleaving is made certain here: the settlement is
held right after its compare-and-set until the delivery either waits for the lock or
has patched the card.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from typing import Any

from channelkit.core.types import SettlementReason
from channelkit.platforms.common.claims import StateCell
from channelkit.platforms.common.registry import MemoryCardRegistry
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.testing import wait_until
from feishu_helpers import FakeFeishu
from test_feishu_questions import FakeCtx, _present_blocked, make

LABELS = {"submitted": "*已提交*", "cancelled": "*已取消*", "expired": "*已过期*"}


class _ContendedLock:
    """The registry's lock, telling when a thread had to wait for it."""

    def __init__(self, lock: Any) -> None:
        self._lock = lock
        self.contended = threading.Event()

    def __enter__(self) -> _ContendedLock:
        if not self._lock.acquire(blocking=False):
            self.contended.set()
            self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


class _HeldCell(StateCell[str]):
    """A form's state whose reserved -> terminal step (the settlement) is held, once."""

    def __init__(self, initial: str, registry: _Registry) -> None:
        super().__init__(initial)
        self._registry = registry

    def compare_and_set(self, expected: str | Collection[str], new: str) -> bool:
        ok = super().compare_and_set(expected, new)
        if ok and expected == "reserved" and new == "terminal":
            self._registry.hold()
        return ok


class _Registry(MemoryCardRegistry[Any, Any]):
    def __init__(self, clock: Any, fake: FakeFeishu) -> None:
        super().__init__(clock)
        self._watched = _ContendedLock(super().lock)
        self._fake = fake
        self.held = threading.Event()
        self.released_by = ""

    @property
    def lock(self) -> Any:
        return self._watched

    def state(self, initial: Any) -> StateCell[Any]:
        return _HeldCell(initial, self)

    def _decided(self) -> str:
        if self._watched.contended.is_set():
            return "the delivery waits for the settlement"
        if self._fake.ops("patch"):
            return "the delivery patched the card first"
        return ""

    def hold(self) -> None:
        self.held.set()
        try:
            self.released_by = wait_until(self._decided, what="the delivery to go on")
        except AssertionError as exc:  # bounded: never hang the settling thread
            self.released_by = f"neither ({exc})"


def test_a_deny_while_the_form_is_sent_shows_the_card_cancelled(
    rt: Any, api: FeishuApi, fake: FakeFeishu
) -> None:
    registry = _Registry(rt.clock, fake)
    p = make(rt, api, fake, registry=registry)
    ctx = FakeCtx()
    box = _present_blocked(rt, fake, p, ctx)  # send_card held: the form is reserved
    deny = threading.Thread(target=ctx.settle, args=(SettlementReason.CANCELLED,))
    deny.start()
    assert registry.held.wait(10)  # the form is terminal, its state not yet recorded
    assert fake.gate is not None
    fake.gate.set()  # the card is delivered
    deny.join(10)
    box["thread"].join(10)
    assert not deny.is_alive() and not box["thread"].is_alive()
    rt.settle()

    labels = [str(c.card["body"]["elements"][-1]["content"]) for c in fake.ops("patch")]
    assert labels == [LABELS["cancelled"]], (labels, registry.released_by)
    assert registry.released_by == "the delivery waits for the settlement"
    assert p.get(ctx.request_id) is None
    assert p.tombstone(ctx.request_id) == ("run-1", "cancelled")
