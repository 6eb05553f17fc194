"""An adapter with no interaction support (only send_message) keeps plain text
behaviour end to end: streamed text is delivered once at the end, permissions and
questions use the text prompt, and /approve answers them."""

from __future__ import annotations

import threading

from channelkit.agents.function import FunctionAgent, Question, Turn
from channelkit.core import ChannelBase, ChannelConfig, InboundMessage
from channelkit.runtime import FakeClock


class PlainChannel(ChannelBase):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.sent: list[tuple[str, str, str | None]] = []
        self.cond = threading.Condition()

    def send_message(self, chat_id: str, text: str, *, thread_id: str | None = None) -> None:
        with self.cond:
            self.sent.append((chat_id, text, thread_id))
            self.cond.notify_all()

    def wait_sent(self, n: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.sent) >= n, 5), self.sent


def agent(turn: Turn) -> str:
    turn.say("Checking. ")
    decision = turn.request_permission(
        "List files", tool_name="run_shell_command", raw_input={"command": "ls"}
    )
    answers = turn.ask([Question("Which region?", ["Beijing", "Shanghai"], header="Region")])
    return f"allowed={decision.allowed} answers={answers}"


def msg(text: str) -> InboundMessage:
    return InboundMessage("plain", "chat1", "alice", text, message_id="m1", thread_id="t1")


def test_plain_text_adapter_end_to_end():
    ch = PlainChannel(ChannelConfig(name="plain"), FunctionAgent(agent), clock=FakeClock())
    try:
        handle = ch.handle_inbound(msg("go"))
        ch.wait_sent(1)
        assert ch.sent[0][0] == "chat1" and ch.sent[0][2] == "t1"
        assert ch.sent[0][1].startswith("Permission required to run a tool")
        assert "Action: List files" in ch.sent[0][1]
        approve = ch.handle_inbound(msg("/approve"))
        assert approve.reply == "Permission approved."  # type: ignore[union-attr]
        ch.wait_sent(3)
        # the reply (chat lane) and the run's next prompt (run lane) are not ordered
        reply, question = sorted(ch.sent[1:3], key=lambda s: s[1] != "Permission approved.")
        assert reply[1] == "Permission approved."
        assert "Tool: ask_user_question" in question[1]
        assert "/approve        Submit" in question[1]
        # a text client cannot carry answers: /approve resumes with no answers
        assert ch.handle_inbound(msg("/approve")).reply == "Permission approved."  # type: ignore[union-attr]
        result = handle.result()
        assert result.status == "completed"
        ch.wait_sent(5)
        assert sorted(ch.sent[3:5]) == [
            ("chat1", "Checking. allowed=True answers={}", "t1"),
            ("chat1", "Permission approved.", "t1"),
        ]
    finally:
        ch.close()
