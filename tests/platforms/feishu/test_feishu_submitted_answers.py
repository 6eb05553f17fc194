"""A submitted Feishu form shows what was submitted: the answers, escaped and bounded."""

from __future__ import annotations

import json
import threading
from typing import Any

from channelkit.agents.function import FunctionAgent, Question, Turn
from channelkit.core import InboundMessage
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.platforms.feishu.cards import (
    MAX_SHOWN_ANSWER_CHARS,
    MAX_SHOWN_ANSWERS_CHARS,
    escape_markdown,
    form_terminal_card,
)
from channelkit.testing import wait_until
from feishu_helpers import (
    FakeFeishu,
    acking_like_the_web_layer,
    card_action,
    channel_on,
    request,
)

HOSTILE = "**bold** <at id=all></at> <font color='red'>x</font> [click](http://evil.test) `c` # h"
QUESTIONS = [
    Question("Which region?", ["Beijing", "Shanghai"], header="Region"),
    Question("What?", ["Logs", "Metrics", "Traces"], header="Signals", multi_select=True),
]


def answer_form(rt: Any, api: FeishuApi, fake: FakeFeishu, form_value: dict[str, Any]) -> Any:
    """Run one question through a channel, submit ``form_value``; (answers, terminal card)."""
    answers: list[Any] = []
    asked: list[Any] = []
    done = threading.Event()

    def behaviour(turn: Turn) -> str:
        answers.append(turn.ask(QUESTIONS))
        done.set()
        return "ok"

    ch = channel_on(
        rt, api, FunctionAgent(behaviour, question_timeout=600.0, scheduler=rt.scheduler)
    )
    acking_like_the_web_layer(ch)
    present = ch.present_user_input_request

    def recording(ctx: Any) -> Any:
        asked.append(ctx)
        return present(ctx)

    ch.present_user_input_request = recording  # type: ignore[method-assign]
    try:
        handle = ch.handle_inbound(InboundMessage("feishu", "oc_chat", "ou_owner", "go", "om_in1"))
        wait_until(lambda: bool(asked))
        rid = asked[0].request_id
        wait_until(lambda: ch.questions.get(rid) is not None and ch.questions.get(rid).message_id)
        record = ch.questions.get(rid)
        wait_until(lambda: record.cell.state == "pending")
        body = card_action(
            {"action": "ck_submit", "request": rid},
            form_value=form_value,
            message_id=record.message_id,
        )
        toast = json.loads(ch.handle_card_request(request(body)).body)["toast"]
        assert toast["type"] == "success"
        assert done.wait(5)
        assert handle.result(5.0).status == "completed"
        rt.settle()
        (patch,) = [c for c in fake.ops("patch") if c.path.endswith("/" + record.message_id)]
        return answers[0], patch.card
    finally:
        ch.close(timeout=2.0)


def shown_answers(card: Any) -> list[str]:
    return [
        e["content"].split("**→** ", 1)[1]
        for e in card["body"]["elements"]
        if "**→** " in e.get("content", "")
    ]


def test_submitted_form_shows_the_chosen_answers(rt: Any, api: FeishuApi, fake: FakeFeishu) -> None:
    answers, card = answer_form(rt, api, fake, {"0": "1", "1": ["0", "2"]})
    assert answers == {"0": "Shanghai", "1": "Logs, Traces"}
    assert card["body"]["elements"][-1]["content"] == "*已提交*"
    assert shown_answers(card) == ["Shanghai", "Logs, Traces"]


def test_a_hostile_answer_is_escaped_and_bounded_on_the_form(
    rt: Any, api: FeishuApi, fake: FakeFeishu
) -> None:
    custom = HOSTILE + "\n\n# heading\n" + "y" * 5_000
    answers, card = answer_form(rt, api, fake, {"0": "0", "0_other": custom, "1": ["1"]})
    # the agent receives the answer as typed (trimmed); only the card escapes it
    assert answers["0"] == custom.strip()
    first, second = shown_answers(card)
    assert second == "Metrics"
    for char in "*<>[]()`#'&":
        assert char not in first.replace("&#", "").replace(";", "")  # only as references
    assert "\n" not in first
    assert escape_markdown("**bold**") in first and "&#60;at id=all&#62;" in first
    assert first.endswith("…") and len(first) < MAX_SHOWN_ANSWER_CHARS * 8
    assert first.count("y") < MAX_SHOWN_ANSWER_CHARS


def test_all_answers_together_are_bounded() -> None:
    normalized = [_Normalized(str(i), f"Q{i}?") for i in range(4)]
    card = form_terminal_card(
        normalized, "submitted", "en", answers={str(i): "z" * 400 for i in range(4)}
    )
    shown = shown_answers(card)
    assert sum(len(a) for a in shown) <= MAX_SHOWN_ANSWERS_CHARS
    assert all(len(a) <= MAX_SHOWN_ANSWER_CHARS for a in shown)


class _Normalized:
    """A normalized question as the presenter holds it."""

    def __init__(self, key: str, text: str) -> None:
        self.answer_key = key
        self.header = ""
        self.question = text
        self.options = (("a", ""), ("b", ""))
        self.multi_select = False
