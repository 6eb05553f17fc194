"""Contract: with ``locale`` zh-CN (what ``channelkit playground --set locale=zh-CN``
sets), the failure notice, the queue notice, the Stop button and the owner-only notice
are Chinese on DingTalk, Feishu and Telegram, and on Discord (both ingress modes), through
their emulators (issue 27); so are the buttons of a question form.

Telegram has no Stop button (a run is stopped with ``/cancel``): its reply to
``/cancel`` is checked instead, and its owner-only notice is the answer to a foreign
person tapping an approval button. The playground's Discord people use a Discord client
in the channel's language (their clicks carry ``locale`` zh-CN); a person whose client
speaks another language is the Discord platform test's."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest
from channelkit.agents import Turn
from channelkit.core import InboundMessage
from channelkit.core.catalog import CATALOG
from channelkit.playground.overrides import channel_options, parse_settings
from contract_drivers import BOUND_S, FOREIGN, Driver, wait_for
from contract_harness import (
    COLOR,
    Context,
    ask,
    hold_until_cancelled,
    new_token,
    open_platform,
    pending,
)

ZH = CATALOG["zh-CN"]
EN = CATALOG["en"]
#: the chat platforms issue 27 names for the Chinese notices, and Discord
PLATFORMS = ("dingtalk", "feishu", "telegram", "discord", "discord-interactions")
#: what each platform shows when a run fails before any output
FAILURE_KEY = {
    "dingtalk": "notice.failed",
    "feishu": "card.failed",
    "telegram": "notice.failed",
    "discord": "notice.failed",
}
#: what a foreign person pressing the owner's button is told
REFUSAL_KEYS = {
    "dingtalk": ("owner.card_group", "owner.card_direct"),
    "feishu": ("card.toast_not_owner",),
    "telegram": ("owner.answer",),
    "discord": ("owner.stop",),
}
#: the platforms whose queue notice is edited to "starting now" (Discord keeps the core's
#: single queue notice)
EDITS_QUEUE_NOTICES = ("dingtalk", "feishu", "telegram")
#: the buttons of a one-question, single-choice form (besides its options)
FORM_BUTTON_KEYS = {
    "dingtalk": ("button.submit",),
    "feishu": ("card.submit", "card.form_title"),
    "telegram": ("button.cancel",),
    "discord": ("button.submit", "question.other_typed", "button.cancel"),
}


@pytest.fixture(scope="module", params=PLATFORMS)
def chinese(request: pytest.FixtureRequest) -> Iterator[Context]:
    """A channel set up as ``--set locale=zh-CN`` does, running one run at a time."""
    options = channel_options(parse_settings(["locale=zh-CN"]))
    assert options == {"locale": "zh-CN"}
    with open_platform(request.param, max_concurrent_runs=1, **options) as context:
        yield context


@pytest.fixture
def zh(chinese: Context) -> Iterator[Context]:
    chinese.script.fn = lambda turn: "idle"
    while not chinese.script.outcomes.empty():
        chinese.script.outcomes.get_nowait()
    yield chinese
    if chinese.driver.pg.channel.pending_request_ids():
        chinese.driver.send("/cancel")
    chinese.driver.reset()


def _shown(d: Driver, text: str) -> bool:
    """``text`` is in a message or card of the chat, or a card's status line."""
    lines = [str(v.get("statusLine") or "") for v in d.bot_views()]
    return any(text in shown for shown in [*d.chat_texts(), *lines])


def test_the_failure_notice_is_chinese(zh: Context) -> None:
    d = zh.driver

    def fails(turn: Turn) -> str:
        raise RuntimeError("agent process exited")

    zh.script.fn = fails
    d.send("fail")
    expected = ZH[FAILURE_KEY[d.platform]]
    wait_for(lambda: _shown(d, expected), f"the failure notice {expected!r}", tick=d.tick)
    assert not _shown(d, "Failed, please retry"), d.chat_texts()


def test_the_queue_notice_is_chinese_from_queued_to_starting(zh: Context) -> None:
    d = zh.driver
    token = new_token()
    gate, entered = threading.Event(), threading.Event()

    def fn(turn: Turn) -> str | None:
        if turn.text == "run B":  # another person's run holds the only slot
            entered.set()
            gate.wait(BOUND_S)
            return None
        return f"after the queue {token}"

    zh.script.fn = fn
    channel = d.pg.channel
    channel.handle_inbound(
        InboundMessage(
            channel_name=channel.name, chat_id=d.other_chat, sender_id=FOREIGN, text="run B"
        )
    )
    assert entered.wait(BOUND_S)
    d.send("hello")
    wait_for(lambda: _shown(d, ZH["queue.next"]), "the Chinese queue notice", tick=d.tick)
    assert not _shown(d, EN["queue.next"]), d.chat_texts()
    gate.set()
    d.wait_segment(f"after the queue {token}", "completed")
    if d.platform in EDITS_QUEUE_NOTICES:
        wait_for(lambda: _shown(d, ZH["queue.starting"]), "the notice: starting now", tick=d.tick)


def test_the_stop_button_is_chinese(zh: Context) -> None:
    d = zh.driver
    token = new_token()
    said = threading.Event()
    zh.script.fn = hold_until_cancelled(zh.script, f"holding {token}", said)
    d.send("hold")
    assert said.wait(BOUND_S)
    if d.caps.stop_button is not None:  # Telegram: /cancel stops it, and says so in Chinese
        d.send("/cancel")
        assert zh.script.outcome() == "cancelled"
        wait_for(lambda: _shown(d, ZH["command.cancelled"]), "the /cancel reply", tick=d.tick)
        return
    running = d.wait_stoppable(token)
    view = next(v for v in d.bot_views() if v.get("id") == running.stop_id)
    assert view.get("stopLabel") == ZH["button.stop"], view
    d.stop(running)
    assert zh.script.outcome() == "cancelled"
    d.wait_segment(token, "cancelled")


def test_the_owner_only_notice_is_chinese(zh: Context) -> None:
    d = zh.driver
    token = new_token()
    expected = {ZH[key] for key in REFUSAL_KEYS[d.platform]}
    if d.caps.stop_button is None:  # a foreign person presses the owner's Stop button
        zh.script.fn = hold_until_cancelled(zh.script, f"holding {token}")
        d.send("hold")
        running = d.wait_stoppable(token)
        d.stop(running, user=FOREIGN)
        wait_for(lambda: d.notices(FOREIGN), "the notice to the foreign person", tick=d.tick)
        assert set(d.notices(FOREIGN)) <= expected, d.notices(FOREIGN)
        d.stop(running)
        assert zh.script.outcome() == "cancelled"
        return
    # Telegram: a foreign person taps the owner's approval button
    title = f"Run ls {token}"

    def asks(turn: Turn) -> str:
        zh.script.outcomes.put(turn.request_permission(title))
        return ""

    zh.script.fn = asks
    d.send("permission")
    shown = wait_for(
        lambda: (a := d.approval_buttons(title)) and a["buttons"] and a, "the approval buttons"
    )
    wait_for(lambda: d.pg.channel.pending_request_ids(), "the channel to hold the request")
    d.press(shown, "Reject", user=FOREIGN)
    wait_for(lambda: d.notices(FOREIGN), "the notice to the foreign person", tick=d.tick)
    assert set(d.notices(FOREIGN)) <= expected, d.notices(FOREIGN)
    d.press(shown, "Allow")
    assert zh.script.outcome().allowed


def test_the_question_forms_buttons_are_chinese(zh: Context) -> None:
    d = zh.driver
    d.require("native_questions")
    zh.script.fn = ask(zh.script, COLOR)
    d.send("ask")
    prompt = pending(d, "Pick a color?")
    shown = d.shown(prompt)  # the form as the chat shows it (its buttons and labels)
    for key in FORM_BUTTON_KEYS[d.platform]:
        assert ZH[key] in shown, (key, shown)
        assert json.dumps(EN[key]) not in shown, (key, shown)  # no English label
    d.answer(prompt, "Blue")  # the Chinese form answers as any other
    assert zh.script.outcome() == {"0": "Blue"}
