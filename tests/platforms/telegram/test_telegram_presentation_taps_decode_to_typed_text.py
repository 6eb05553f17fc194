"""A tap on a presentation button decodes to what the person would have typed: the
value, or the command of ``tgcmd:<command>``, sent by the tapper in the tapped message's
chat and topic; taps without text or message, or by a bot, are not messages."""

from __future__ import annotations

from typing import Any

import pytest
from channelkit.platforms.telegram.ingress import parse_update, presentation_tap
from channelkit.platforms.telegram.renderer import COMMAND_PREFIX


def _query(data: Any, *, message: bool = True, bot: bool = False) -> Any:
    update: dict[str, Any] = {
        "update_id": 7,
        "callback_query": {
            "id": "q1",
            "from": {"id": 55, "is_bot": bot, "first_name": "Ann"},
            "chat_instance": "ci",
            "data": data,
        },
    }
    if message:
        update["callback_query"]["message"] = {
            "message_id": 12,
            "date": 1,
            "chat": {"id": -100777, "type": "supergroup", "is_forum": True},
            "message_thread_id": 9,
            "is_topic_message": True,
            "text": "Deploy finished",
        }
    query = parse_update(update).callback_query
    assert query is not None
    return query


def test_a_value_is_typed_by_the_tapper_in_the_messages_chat_and_topic() -> None:
    tap = presentation_tap(_query("roll back v1.4"))
    assert tap is not None
    assert tap.text == "roll back v1.4"
    assert tap.from_user is not None and tap.from_user.id == 55
    assert (tap.chat.id, tap.message_thread_id, tap.is_topic_message) == (-100777, 9, True)


def test_a_command_button_decodes_to_the_command() -> None:
    assert COMMAND_PREFIX == "tgcmd:"
    tap = presentation_tap(_query("tgcmd:/cancel"))
    assert tap is not None and tap.text == "/cancel"


@pytest.mark.parametrize(
    "query",
    [
        pytest.param(lambda: _query(None), id="no data"),
        pytest.param(lambda: _query("tgcmd:  "), id="blank command"),
        pytest.param(lambda: _query("v", message=False), id="inline message"),
        pytest.param(lambda: _query("v", bot=True), id="a bot tapped"),
    ],
)
def test_taps_that_are_no_message(query: Any) -> None:
    assert presentation_tap(query()) is None
