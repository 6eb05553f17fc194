"""Telegram updates: a replay never starts a second run; blank text is answered quietly."""

from __future__ import annotations

import pytest
from channelkit.testing import ScriptedBridge, final

from tests.platforms.telegram.tg_env import CHAT, OWNER, Env


def _update(update_id: int, text: str) -> dict[str, object]:
    return {
        "update_id": update_id,
        "message": {
            "message_id": update_id,
            "date": 0,
            "chat": {"id": CHAT, "type": "private"},
            "from": {"id": OWNER, "is_bot": False, "first_name": "o"},
            "text": text,
        },
    }


def test_an_update_replayed_after_1000_other_updates_is_ignored(rt, mock) -> None:  # type: ignore[no-untyped-def]
    bridge = ScriptedBridge([final("ok")])
    env = Env(rt, mock, bridge)
    original = _update(10, "hello")
    first = env.respond(original)
    assert first.status == 200 and first.after
    for n in range(1_000):
        # a message the channel does not act on still passes through the dedup log
        env.respond({"update_id": 11 + n, "edited_message": {}})
    replay = env.respond(original)
    assert replay.status == 200 and not replay.after


@pytest.mark.parametrize("text", ["", " ", "\n\t ", "\u3000"])
def test_a_message_with_blank_text_is_acknowledged_without_a_traceback(
    rt,
    mock,
    caplog,
    text,  # type: ignore[no-untyped-def]
) -> None:
    bridge = ScriptedBridge([])
    env = Env(rt, mock, bridge)
    assert env.post(_update(20, text)) == 200
    env.settle()
    assert not [r for r in caplog.records if r.exc_info]
    assert bridge.prompts == []
