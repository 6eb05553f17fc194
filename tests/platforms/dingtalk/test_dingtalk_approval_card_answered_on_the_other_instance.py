"""Two instances of one bot share one store (a MemoryStore: the store seam): an approval
card shown by the instance that owns the run is a card on every instance. A click that
reaches the other instance is claimed there and applied by the owner: the agent gets the
chosen option once, and the card ends in place (issue 23, item 10)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from channelkit.agents.base import PermissionOption, PermissionRequest
from cluster_helpers import Bot
from dingtalk_helpers import ScriptBridge

OWNER = "staff-1"
OPTIONS = (
    PermissionOption("allow", "Allow", "allow_once"),
    PermissionOption("reject", "Reject", "reject_once"),
)


def approval_script(bridge: Any, sid: str, text: str, sink: Any) -> str:
    event = bridge.answered.setdefault("perm-1", threading.Event())
    bridge.cancel_events[sid] = event
    sink.response_boundary(sid)
    tool = {"toolCallId": "t-1", "kind": "execute", "title": "Run ls"}
    sink.permission_request(PermissionRequest("perm-1", sid, tool, OPTIONS))
    assert event.wait(5), "neither answered nor cancelled"
    return "done"


@pytest.fixture
def bot():
    made = Bot(ScriptBridge)
    yield made
    made.close()


def click(instance: Any, track: str, choice: str) -> Any:
    private = {"actionIds": ["submit"], "params": {"form": {"0": choice}}}
    payload = {
        "type": "actionCallback",
        "outTrackId": track,
        "userId": OWNER,
        "content": json.dumps({"cardPrivateData": private}),
    }
    return instance.card_request(payload)


def test_an_approval_card_answered_on_the_other_instance_reaches_the_agent_once(bot) -> None:
    owner, other = bot.instance(approval_script), bot.instance()
    owner.send("go", sender=OWNER)
    track = owner.wait_for(lambda: owner.question_tracks())[0]
    assert not any("/approve" in t for t in bot.api.texts())  # a card, not the text prompt
    owner.wait_for(lambda: any(track in k for k in bot.memory.scan("dingtalk:card:")))
    response = click(other, track, "Allow")
    assert response.status == 200
    owner.wait_for(lambda: owner.bridge.responses)
    assert owner.bridge.responses == [
        ("perm-1", {"outcome": {"outcome": "selected", "optionId": "allow"}})
    ]
    assert other.bridge.responses == []
    owner.wait_for(
        lambda: any(
            c[1].get("out_track_id") == track and "card_status" in c[1]["params"]
            for c in bot.api.ops("update")
        )
    )
    ended = [
        c[1]["params"]
        for c in bot.api.ops("update")
        if c[1].get("out_track_id") == track and "card_status" in c[1]["params"]
    ]
    assert len(ended) == 1 and ended[0]["card_status"] == "submitted", ended
    assert click(other, track, "Reject").status == 200  # a late second click: nothing
    owner.idle()
    assert len(owner.bridge.responses) == 1
