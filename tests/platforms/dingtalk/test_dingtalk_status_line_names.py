"""DingTalk status lines name the agent: the configured model, else the agent's name."""

from __future__ import annotations

from channelkit.agents.function import FunctionAgent
from channelkit.platforms.dingtalk.adapter import agent_label
from dingtalk_helpers import AdapterHarness


def _last_status_line(h: AdapterHarness) -> str:
    """The status line of the last card put in its terminal state (its final update, or
    its creation already finished when its segment ended before it went out)."""
    return str(h.api.finals()[-1][1]["params"]["statusLine"])


def test_agent_label_prefers_model_then_name() -> None:
    class Bridge:
        model = "qwen3-coder"
        name = "coder"

    assert agent_label(Bridge()) == "qwen3-coder"
    assert agent_label(FunctionAgent(lambda turn: "x", name="Helper")) == "Helper"
    assert agent_label(FunctionAgent(lambda turn: "x")) is None
    assert agent_label(object()) is None


def test_a_named_function_agent_is_shown_when_no_model_is_configured() -> None:
    def reply(turn: object) -> str:
        turn.say("hello")  # type: ignore[attr-defined]
        return "hello"

    from channelkit.platforms.dingtalk import DingtalkChannel, DingtalkConfig

    h = AdapterHarness(bridge=FunctionAgent(reply, name="Helper"))
    try:
        config = DingtalkConfig(
            client_id="ding-robot", client_secret="app-secret", interactive_cards={}
        )
        channel = DingtalkChannel(
            config,
            h.bridge,
            api=h.api,
            executor=h.pool,
            run_executor=h.run_pool,
            scheduler=h.scheduler,
            clock=h.clock,
        )
        h.channel.close(timeout=5)
        h.channel = channel
        h.send("hi")
        h.idle()
        line = _last_status_line(h)
        assert line.startswith("Completed · Helper · ")
        assert "demo" not in line
    finally:
        h.close()
