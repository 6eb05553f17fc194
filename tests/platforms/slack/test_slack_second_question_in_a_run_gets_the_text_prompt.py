"""At most one native form per session, owner and run on Slack: a second question the
run asks while its first form is live gets the text prompt, the first form stays
answerable, and once it ended the run's next question gets a form again. The real
``SlackChannel`` against the Slack emulator over real HTTP."""

from __future__ import annotations

import queue
import threading
from typing import Any

from channelkit.agents.function import FunctionAgent, Question, Turn

from tests.platforms.slack.slack_emulator import LONG, SlackRig

FIRST = Question("Which region?", ["eu", "us"], header="Region")
SECOND = Question("Which size of machine?", ["small", "large"], header="Size")
THIRD = Question("Which day?", ["today", "tomorrow"], header="Day")


class TwoAtOnce:
    """Asks FIRST; while it waits, a second thread of the same run asks SECOND (once the
    test says the first form is up); after FIRST is answered, asks THIRD."""

    def __init__(self) -> None:
        self.first_form_up = threading.Event()
        self.outcomes: queue.Queue[tuple[str, Any]] = queue.Queue()

    def __call__(self, turn: Turn) -> str:
        def second() -> None:
            assert self.first_form_up.wait(LONG)
            try:
                self.outcomes.put(("second", turn.ask([SECOND])))
            except Exception as exc:
                self.outcomes.put(("second", type(exc).__name__))

        helper = threading.Thread(target=second, name="second-question", daemon=True)
        helper.start()
        self.outcomes.put(("first", turn.ask([FIRST])))
        try:
            self.outcomes.put(("third", turn.ask([THIRD])))
        except Exception as exc:
            self.outcomes.put(("third", type(exc).__name__))
        helper.join(LONG)
        return "done"

    def next(self) -> tuple[str, Any]:
        return self.outcomes.get(timeout=LONG)


def test_the_second_question_of_a_run_gets_the_text_prompt_and_the_first_form_works() -> None:
    asker = TwoAtOnce()
    agent = FunctionAgent(asker, question_timeout=600.0, name="two-at-once")
    try:
        with SlackRig.start(agent) as rig:
            start = rig.send("ask me two things")
            first = rig.pending_form(start)
            assert first["questions"][0]["label"].endswith("Which region?")
            asker.first_form_up.set()
            rig.wait(lambda: len(rig.channel.pending_request_ids()) == 2, "two questions")

            def prompts() -> list[str]:
                return [t for t in rig.texts(start) if "/deny" in t]

            # the second question is shown: as a text prompt, or (wrongly) as a form
            rig.wait(lambda: prompts() or len(rig.forms(start)) > 1, "the second question")
            # it is no form: the first form is the only one ...
            assert [f["id"] for f in rig.forms(start)] == [first["id"]]
            # ... it is the text prompt (a plain message)
            (prompt,) = prompts()
            assert "Ask user 1 question" in prompt and "/approve" in prompt
            assert len(rig.channel.questions.live_forms()) == 1
            # the first form still answers its own question
            rig.click(first["id"], "submit", rig.choices(first, "us"))
            assert asker.next() == ("first", {"0": "us"})
            rig.wait(lambda: rig.view(first["id"]).get("text") == "Submitted", "Submitted")
            # that form ended: the run's next question gets a form again
            third = rig.pending_form(start)
            assert third["id"] != first["id"]
            assert third["questions"][0]["label"].endswith("Which day?")
            rig.click(third["id"], "submit", rig.choices(third, "today"))
            assert asker.next() == ("third", {"0": "today"})
            # the text prompt's question is still the agent's to get (ended by the close)
            assert asker.outcomes.empty()
            assert len(rig.channel.pending_request_ids()) == 1
    finally:
        agent.close()
