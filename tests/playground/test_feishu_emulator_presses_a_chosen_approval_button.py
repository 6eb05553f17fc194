"""On the Feishu emulator a person presses the approval button they choose (the page
names it by its data), and the agent receives exactly that option."""

from __future__ import annotations

import threading
from typing import Any

from channelkit.agents.function import PERMISSION_OPTIONS, FunctionAgent, Turn
from channelkit.playground import Playground
from playground_helpers import send, state, wait


def test_the_second_approval_button_sends_its_own_option() -> None:
    decisions: list[Any] = []
    done = threading.Event()

    def agent(turn: Turn) -> str:
        decisions.append(turn.request_permission("Write notes.txt"))
        done.set()
        return "ok"

    with Playground(platform="feishu", agent=FunctionAgent(agent, question_timeout=600.0)) as pg:
        send(pg, "go")

        def approval() -> dict[str, Any] | None:
            for view in state(pg)["views"].values():
                buttons = [b for row in view.get("keyboard") or [] for b in row if b.get("data")]
                if len(buttons) >= 2:
                    return {"id": view["id"], "buttons": buttons}
            return None

        card = wait(approval, "the approval card with its buttons")
        second = card["buttons"][1]
        result = pg.emulator.card_action(card["id"], "tap", {"data": second["data"]})
        assert result.status == 200, result.body
        assert done.wait(10)
        (decision,) = decisions
        expected = PERMISSION_OPTIONS[1]  # the buttons follow the agent's options
        assert second["text"] == expected.name
        assert (decision.option_id, decision.kind) == (expected.option_id, expected.kind)
