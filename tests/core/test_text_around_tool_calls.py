"""Text around tool calls is never glued: the words after a tool call start a new
paragraph, in the streamed chunks and in the final response."""

from __future__ import annotations

from channelkit.testing import ScriptedBridge, chunk, final, inbound, tool


def test_text_after_a_tool_call_starts_a_new_paragraph(channel_factory):
    bridge = ScriptedBridge(
        [
            chunk("I will write a file."),
            tool("t1"),
            chunk("Continuing after WRITE."),
            final("I will write a file.Continuing after WRITE."),
        ]
    )
    ch = channel_factory(bridge)
    ch.handle_inbound(inbound("go")).result()
    assert [c[1] for c in ch.chunks] == ["I will write a file.", "\n\nContinuing after WRITE."]
    # the bridge returned everything it streamed: the final text keeps the break
    assert ch.completes[0][1] == "I will write a file.\n\nContinuing after WRITE."


def test_a_tool_call_before_any_text_adds_no_break(channel_factory):
    bridge = ScriptedBridge([tool("t1"), chunk("Hello"), tool("t2"), final("Hello")])
    ch = channel_factory(bridge)
    ch.handle_inbound(inbound("go")).result()
    assert [c[1] for c in ch.chunks] == ["Hello"]
    assert ch.completes[0][1] == "Hello"


def test_a_final_text_that_is_not_the_streamed_text_is_delivered_as_is(channel_factory):
    bridge = ScriptedBridge([chunk("a"), tool("t1"), chunk("b"), final("something else")])
    ch = channel_factory(bridge)
    ch.handle_inbound(inbound("go")).result()
    assert [c[1] for c in ch.chunks] == ["a", "\n\nb"]
    assert ch.completes[0][1] == "something else"
