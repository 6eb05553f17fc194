"""Clicking a button a card or message does not have is ``400`` over HTTP on every
emulated platform (an unknown card is ``404``), and nothing reaches the channel."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from channelkit.playground import Playground
from playground_helpers import callbacks, send, views, wait


def _action(pg: Playground, card_id: str, payload: dict[str, Any]) -> requests.Response:
    return requests.post(f"{pg.url}/_emulator/cards/{card_id}/action", json=payload, timeout=5)


def _pending_question(pg: Playground, platform: str) -> dict[str, Any]:
    def find() -> dict[str, Any] | None:
        for view in views(pg):
            if view["state"] != "pending":
                continue
            if platform == "telegram" and view.get("keyboard"):
                return view
            if platform != "telegram" and view.get("kind") == "question":
                return view
        return None

    return dict(wait(find, f"a {platform} question waiting for an answer"))


# (platform, a click on the question the platform has no button for)
MISSING = [
    ("dingtalk", {"action": "stop"}),
    ("dingtalk", {"action": "approve"}),
    ("feishu", {"action": "stop"}),
    ("feishu", {"action": "approve"}),
    ("telegram", {"action": "tap", "form": {"data": "ck-no-such-button"}}),
    ("telegram", {"action": "tap", "form": {"text": "No such button"}}),
]


@pytest.mark.parametrize("platform", ["dingtalk", "feishu", "telegram"])
def test_a_missing_button_is_400_and_an_unknown_card_404(platform: str) -> None:
    with Playground(platform=platform, demo_delay=0.01) as pg:
        send(pg, "hello")
        question = _pending_question(pg, platform)
        delivered = len(callbacks(pg))
        for payload in (p for name, p in MISSING if name == platform):
            missing = _action(pg, question["id"], payload)
            assert missing.status_code == 400, (payload, missing.text)
            assert "button" in missing.json()["error"], missing.text
        unknown = _action(pg, "no-such-card", {"action": "submit", "form": {}})
        assert unknown.status_code == 404, unknown.text
        assert len(callbacks(pg)) == delivered  # nothing was sent to the channel
        still = next(v for v in views(pg) if v["id"] == question["id"])
        assert still["state"] == "pending"
        # a button the question does have is delivered (so the count above can move)
        if platform == "telegram":
            data = next(b["data"] for row in question["keyboard"] for b in row if b["data"])
            present: dict[str, Any] = {"action": "tap", "form": {"data": data}}
        else:
            present = {"action": "cancel"}
        assert _action(pg, question["id"], present).status_code == 200
        wait(lambda: len(callbacks(pg)) > delivered, "the real click's callback")
