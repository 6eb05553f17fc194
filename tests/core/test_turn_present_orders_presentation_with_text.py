"""``Turn.present`` mid-run: the text before it ends its segment, the presentation is
delivered next (on the run's lane), later text opens a new segment; a presentation
sent to another conversation carries a context line naming the run's own."""

from __future__ import annotations

from typing import Any

import pytest
from channelkit.agents import FunctionAgent, Turn
from channelkit.agents.base import PresentationEvent
from channelkit.core import SegmentEndReason, SessionTarget
from channelkit.errors import PresentationError
from channelkit.presentation import (
    Button,
    ButtonsBlock,
    MessagePresentation,
    ReplyPayload,
    TextBlock,
)
from channelkit.testing import inbound, make_channel

CARD = {
    "title": "Deploy finished",
    "tone": "success",
    "blocks": [
        {"type": "text", "text": "All 3 services are up."},
        {"type": "buttons", "buttons": [{"label": "Open dashboard", "url": "https://ex.test/d"}]},
    ],
}


def _ordered(channel: Any) -> list[tuple[str, Any]]:
    """The hooks that show something, in call order (chunks merged per segment)."""
    out: list[tuple[str, Any]] = []
    for name, args in channel.records:
        if name == "on_response_chunk":
            out.append(("chunk", (args[1], args[3].segment_id)))
        elif name == "on_output_segment_end":
            out.append(("segment_end", (args[2].segment_id, args[3])))
        elif name == "send_message":
            out.append(("send", args[1]))
        elif name == "on_response_complete":
            out.append(("complete", args[1]))
    return out


def _agent(turn: Turn) -> str:
    turn.say("Deploying now.")
    turn.present(CARD)
    turn.say("Anything else?")
    return ""


def test_present_ends_the_segment_then_delivers_then_later_text_opens_a_new_one() -> None:
    channel = make_channel(FunctionAgent(_agent))
    try:
        result = channel.handle_inbound(inbound("deploy")).result(timeout=10)
        assert result.status == "completed"
        assert channel.wait_idle(10)
        events = _ordered(channel)
        kinds = [kind for kind, _ in events]
        assert kinds[:4] == ["chunk", "segment_end", "send", "chunk"], events
        first_segment = events[0][1][1]
        assert events[0][1][0] == "Deploying now."
        assert events[1][1] == (first_segment, SegmentEndReason.RESPONSE_BOUNDARY)
        # the recording channel has no renderer: the plain-text fallback
        sent = events[2][1]
        assert "Deploy finished" in sent and "Open dashboard: https://ex.test/d" in sent
        later_text, later_segment = events[3][1]
        assert "Anything else?" in later_text and later_segment != first_segment
    finally:
        channel.close()


def test_present_validates_the_json_and_names_the_block_path() -> None:
    errors: list[PresentationError] = []

    def agent(turn: Turn) -> str:
        try:
            turn.present(
                {
                    "blocks": [
                        {"type": "text", "text": "ok"},
                        {"type": "buttons", "buttons": [{"label": "", "url": "https://x.test"}]},
                    ]
                }
            )
        except PresentationError as exc:
            errors.append(exc)
        return "done"

    channel = make_channel(FunctionAgent(agent))
    try:
        assert channel.handle_inbound(inbound("go")).result(timeout=10).status == "completed"
        assert errors and errors[0].path == "presentation.blocks[1].buttons[0].label"
        assert channel.wait_idle(10)
        # nothing was presented; the run's text is its only output
        assert [args[1] for args in channel.calls("send_message")] == ["done"]
    finally:
        channel.close()


def test_present_accepts_model_objects_and_reply_payloads() -> None:
    presentation = MessagePresentation(
        title="Pick one",
        blocks=(TextBlock("Choose"), ButtonsBlock((Button("Yes", value="y"),))),
    )

    def agent(turn: Turn) -> str:
        turn.present(presentation)
        turn.present(ReplyPayload(text="plain words"))
        return ""

    channel = make_channel(FunctionAgent(agent))
    try:
        assert channel.handle_inbound(inbound("go")).result(timeout=10).status == "completed"
        assert channel.wait_idle(10)
        sent = [args[1] for name, args in channel.records if name == "send_message"]
        assert sent == ["Pick one\n\nChoose\n\n- Yes", "plain words"]
    finally:
        channel.close()


def test_a_presentation_sent_to_another_conversation_names_its_origin() -> None:
    def agent(turn: Turn) -> str:
        turn.present(CARD, to="ops-room", thread_id="t9")
        turn.present(CARD)
        return ""

    channel = make_channel(FunctionAgent(agent))
    try:
        assert channel.handle_inbound(inbound("go", chat_id="c1")).result(timeout=10)
        assert channel.wait_idle(10)
        sends = [args for name, args in channel.records if name == "send_message"]
        assert [(chat, thread) for chat, _, thread in sends] == [("ops-room", "t9"), ("c1", None)]
        elsewhere, own = sends[0][1], sends[1][1]
        assert elsewhere.endswith("Sent by the agent from another conversation (chat c1)")
        assert "another conversation" not in own
    finally:
        channel.close()


def test_send_presentation_marks_the_origin_as_content_only_when_it_differs() -> None:
    channel = make_channel(FunctionAgent(lambda turn: ""))
    try:
        origin = SessionTarget("test", "u1", "c1")
        assert channel.send_presentation("c2", CARD, origin=origin) is None
        assert channel.send_presentation(origin, CARD, origin=origin) is None
        sends = [args[1] for name, args in channel.records if name == "send_message"]
        assert "(chat c1)" in sends[0] and "another conversation" not in sends[1]
    finally:
        channel.close()


def test_send_presentation_rejects_bad_json_naming_the_path() -> None:
    channel = make_channel(FunctionAgent(lambda turn: ""))
    try:
        with pytest.raises(PresentationError) as info:
            channel.send_presentation("c1", {"presentation": {"blocks": [{"type": "chart"}]}})
        assert info.value.path == "presentation.blocks[0].type"
        assert not any(name == "send_message" for name, _ in channel.records)
    finally:
        channel.close()


def test_a_sink_without_presentation_gets_boundaries_and_the_text_form() -> None:
    events: list[tuple[str, Any]] = []

    class OldSink:
        def text_chunk(self, session_id: str, chunk: str) -> None:
            events.append(("chunk", chunk))

        def response_boundary(self, session_id: str) -> None:
            events.append(("boundary", None))

    turn = Turn(FunctionAgent(lambda t: ""), "s1", "hi", OldSink())  # type: ignore[arg-type]
    turn.present({"title": "T", "blocks": [{"type": "text", "text": "body"}]})
    assert events == [("boundary", None), ("chunk", "T\n\nbody"), ("boundary", None)]


def test_the_event_carries_the_validated_payload_and_destination() -> None:
    seen: list[PresentationEvent] = []

    class Sink:
        def presentation(self, event: PresentationEvent) -> None:
            seen.append(event)

    turn = Turn(FunctionAgent(lambda t: ""), "s1", "hi", Sink())  # type: ignore[arg-type]
    turn.present(CARD, to="c9")
    assert seen[0].payload.presentation is not None
    assert seen[0].payload.presentation.title == "Deploy finished"
    assert (seen[0].chat_id, seen[0].thread_id) == ("c9", None)
