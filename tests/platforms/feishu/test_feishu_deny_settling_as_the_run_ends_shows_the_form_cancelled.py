"""A ``/deny`` still settling when its run ends leaves the form cancelled, never expired.

The deny's answer reaches the agent before the request is settled: the agent's
question raises at once and its turn can end while the ``/deny`` thread has taken the
request out of the live index but not yet called the settlement listeners. The run
must wait for that answer before it ends: its end ends every form still live in
``expired``, so a run that did not wait showed a won deny as expired (seen once in a
loaded parallel run of ``test_feishu_answer_races``).

The interleaving is made certain here: the form's settlement listener holds the
``/deny`` thread (inside the settlement, after the request left the index) until the
run either waits for the answer (read through the request's response future) or has
ended the form itself.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import Future
from typing import Any

from channelkit.agents.function import FunctionAgent, Question, Turn
from channelkit.core import InboundMessage
from channelkit.core.text import MSG_DENIED
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.testing import wait_until
from feishu_helpers import FakeFeishu, acking_like_the_web_layer, channel_on

OWNER = "ou_owner"
LABELS = {"submitted": "*已提交*", "cancelled": "*已取消*", "expired": "*已过期*"}
QUESTIONS = [Question("Which region?", ["Beijing", "Shanghai"], header="Region")]


class _WatchedFuture:
    """The request's response future, telling when someone waits for its result."""

    def __init__(self, future: Future[bool]) -> None:
        self._future = future
        self.waited = threading.Event()

    def result(self, timeout: float | None = None) -> bool:
        self.waited.set()
        return self._future.result(timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._future, name)


class _Held:
    """Holds the form's settlement listener until the run waits or ends the form."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.watched: _WatchedFuture | None = None
        self.record: Any = None
        self.released_by = ""

    def _decided(self) -> str:
        if self.watched is not None and self.watched.waited.is_set():
            return "the run waits for the answer"
        if self.record is not None and self.record.cell.state != "pending":
            return f"the run ended the form first (terminal={self.record.terminal!r})"
        return ""

    def wrap(self, listener: Any) -> Any:
        def held(reason: Any) -> None:
            self.entered.set()
            try:
                self.released_by = wait_until(self._decided, what="the run to wait or end")
            except AssertionError as exc:  # bounded: never hang the deny thread
                self.released_by = f"neither ({exc})"
            listener(reason)

        return held


class _HeldContext:
    """The presenter's request context, its settlement listener held by ``held``."""

    def __init__(self, ctx: Any, held: _Held) -> None:
        self._ctx = ctx
        self._held = held

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)

    def on_settled(self, listener: Any) -> Any:
        return self._ctx.on_settled(self._held.wrap(listener))


def test_a_deny_settling_while_its_run_ends_shows_the_form_cancelled(
    rt: Any, api: FeishuApi, fake: FakeFeishu
) -> None:
    outcome: list[Any] = []
    held = _Held()

    def behaviour(turn: Turn) -> str:
        try:
            outcome.append(turn.ask(QUESTIONS))
        except Exception as exc:
            outcome.append(type(exc).__name__)
        return "done"

    bridge = FunctionAgent(behaviour, question_timeout=600.0, scheduler=rt.scheduler)
    ch = channel_on(rt, api, bridge)
    acking_like_the_web_layer(ch)
    contexts: list[Any] = []
    present = ch.present_user_input_request

    def holding_present(ctx: Any) -> Any:
        contexts.append(ctx)
        return present(_HeldContext(ctx, held))  # type: ignore[arg-type]

    ch.present_user_input_request = holding_present  # type: ignore[method-assign]
    respond = ch.bridge.respond_to_permission

    def watching(request_id: str, response: Any) -> bool:
        # the deny's answer is on its way: its future exists, the agent still waits
        pending = ch._requests.get(request_id)
        assert pending is not None and pending.response_future is not None
        held.watched = _WatchedFuture(pending.response_future)
        pending.response_future = held.watched  # type: ignore[assignment]
        return respond(request_id, response)

    ch.bridge.respond_to_permission = watching  # type: ignore[method-assign]
    try:
        start = len(fake.calls)
        handle = ch.handle_inbound(InboundMessage("feishu", "oc_chat", OWNER, "go"))
        wait_until(lambda: contexts and ch.questions.get(contexts[0].request_id), what="a form")
        held.record = ch.questions.get(contexts[0].request_id)
        wait_until(lambda: held.record.cell.state == "pending", what="the form delivered")

        deny = ch.handle_inbound(InboundMessage("feishu", "oc_chat", OWNER, "/deny"))
        assert held.entered.wait(10)
        assert deny.result(10).reply == MSG_DENIED
        assert handle.result(10).status == "completed"
        rt.settle()

        assert outcome == ["QuestionCancelled"]
        form = next(
            f"/om_{i + 1}"
            for i, c in enumerate(fake.calls)
            if i >= start and c.op == "send" and c.card
        )
        terminals = [
            json.dumps(c.card, ensure_ascii=False)
            for c in fake.calls[start:]
            if c.op == "patch" and c.path.endswith(form)
        ]
        assert len(terminals) == 1, terminals
        shown = f"{terminals[0]} ({held.released_by})"
        assert LABELS["cancelled"] in terminals[0], shown
        assert LABELS["expired"] not in terminals[0] and LABELS["submitted"] not in terminals[0]
        assert held.released_by == "the run waits for the answer"
    finally:
        ch.close(timeout=2.0)
