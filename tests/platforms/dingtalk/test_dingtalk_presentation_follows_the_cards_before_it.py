"""A presentation a run sends shows after the status card of the text said before it,
even while that card's creation is still on its way (card writes are asynchronous)."""

from __future__ import annotations

import threading
from typing import Any

from channelkit.agents.base import PresentationEvent
from channelkit.presentation import MessagePresentation, ReplyPayload
from channelkit.presentation.outbound import SenderBase


class RecordingSender(SenderBase):
    """Records each presentation send into the fake API's call log (one ordered log)."""

    def __init__(self, api: Any) -> None:
        self.api = api

    @property
    def platform(self) -> str:
        return "dingtalk"

    @property
    def presentation_capabilities(self) -> Any:
        return None

    def render(self, presentation: Any, *, text: str | None = None) -> list[dict[str, Any]]:
        return [{"text": text or ""}]

    def send(self, target: str, message: dict[str, Any]) -> str | None:
        self.api._record("presentation", target=target)
        return "pq-1"


def test_the_presentation_waits_for_the_card_of_the_text_before_it(adapter) -> None:
    sent = threading.Event()

    def script(bridge: Any, session_id: str, text: str, sink: Any) -> str:
        sink.text_chunk(session_id, "Here is the plan. ")
        payload = ReplyPayload(presentation=MessagePresentation.from_dict({"title": "Plan"}))
        sink.presentation(PresentationEvent(session_id, payload))
        sent.set()
        return "Here is the plan. Done."

    h = adapter(script)
    h.channel.presentation_sender = lambda target, silent=False: RecordingSender(h.api)  # type: ignore[method-assign]
    gate = h.api.gates["create"] = threading.Event()  # the card's creation is slow
    h.send("go")
    assert sent.wait(10)
    # the presentation waits behind the card; nothing was sent as a presentation yet
    assert h.wait_for(lambda: bool(h.api.ops("create")))
    # a presentation sent past the card would show up at once; give it half a second
    assert not threading.Event().wait(0.5) and h.api.ops("presentation") == []
    gate.set()
    assert h.wait_for(lambda: bool(h.api.ops("presentation")))
    h.idle()
    names = [c[0] for c in h.api.ops() if c[0] in ("create", "presentation")]
    assert names[:2] == ["create", "presentation"]
