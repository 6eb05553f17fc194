"""A DingTalk card failure degrades only what it concerns.

One chat the platform refuses to deliver into gets Markdown while every other chat
keeps its status cards; one card with an invalid parameter falls back alone; only a
refused template (or refused credentials) switches a card type off for everyone, and
then only for a cool-down, after which the next card tries again.
"""

from __future__ import annotations

import logging

import pytest
from channelkit.errors import AuthError, BadRequest, CardDeliveryError

CHATS = [f"cid-{i}" for i in range(6)]
COOLDOWN = 300.0  # the global cool-down of a refused card type, seconds


def _refuse_chat(chat: str):
    """A ``fail`` hook for createAndDeliver: the per-space delivery into ``chat`` fails."""

    def fail(kw):
        if kw["target"].chat_id == chat:
            return CardDeliveryError("tpl", "robot not in the group")
        return None

    return fail


def _stream_in(h, chat: str, run: str, text: str) -> bool:
    """One segment of a run in ``chat``: streamed and closed; True if a card took it."""
    h.run(run, session=f"s-{run}", owner=f"o-{run}", chat=chat)
    seg = h.segment(run, session=f"s-{run}", owner=f"o-{run}", chat=chat)
    took = h.presenter.append_output(seg, text)
    if not h.presenter.close_output(seg, text, "completed"):
        # no card carried the segment: the adapter sends it as Markdown itself
        h.fallbacks.append((chat, text, "adapter"))
    return took


def _carded_chats(h) -> set[str]:
    return {c[1]["target"].chat_id for c in h.api.ops("create")}


def test_one_chat_refusing_delivery_leaves_the_other_five_on_cards(harness):
    h = harness()
    h.api.fail["create"] = _refuse_chat(CHATS[0])
    for i, chat in enumerate(CHATS):
        _stream_in(h, chat, f"run-{i}", f"answer {i}")
    # the refused chat got its answer as Markdown, once
    assert [f[1] for f in h.fallbacks] == ["answer 0"]
    # the other five streamed into status cards, and keep doing so
    for i, chat in enumerate(CHATS[1:], start=1):
        assert _stream_in(h, chat, f"again-{i}", "more") is True
    # the refused chat stays on Markdown for now (no card creation is tried there)
    creates_before = len(h.api.ops("create"))
    assert _stream_in(h, CHATS[0], "again-0", "still refused") is False
    assert len(h.api.ops("create")) == creates_before
    assert h.fallbacks[-1][1] == "still refused"
    assert _carded_chats(h) == set(CHATS)


def test_a_refused_chat_gets_cards_again_after_its_cool_down(harness):
    h = harness()
    h.api.fail["create"] = _refuse_chat(CHATS[0])
    _stream_in(h, CHATS[0], "run-a", "first")
    h.api.fail.clear()
    assert _stream_in(h, CHATS[0], "run-b", "second") is False
    h.advance(601)
    assert _stream_in(h, CHATS[0], "run-c", "third") is True


def test_an_invalid_parameter_fails_only_its_own_card(harness):
    h = harness()
    h.api.fail["create"] = BadRequest("bad param", status=400, code="param.invalid")
    _stream_in(h, CHATS[0], "run-a", "first")
    assert [f[1] for f in h.fallbacks] == ["first"]
    h.api.fail.clear()
    assert _stream_in(h, CHATS[0], "run-b", "second") is True  # same chat, next card
    assert _stream_in(h, CHATS[1], "run-c", "third") is True


@pytest.mark.parametrize(
    "refusal",
    [
        BadRequest("no template", status=400, code="param.templateNotExist"),
        AuthError("token rejected", status=401),
    ],
    ids=["template", "credentials"],
)
def test_a_refused_card_type_is_off_for_everyone_for_a_cool_down_then_retried(
    harness, caplog, refusal
):
    h = harness()
    h.api.fail["create"] = refusal
    with caplog.at_level(logging.ERROR):
        _stream_in(h, CHATS[0], "run-a", "first")
    refused = [r for r in caplog.records if "refused by the platform" in r.getMessage()]
    assert len(refused) == 1 and refused[0].levelno == logging.ERROR
    h.api.fail.clear()
    # every chat is on Markdown during the cool-down, without trying a card
    for i, chat in enumerate(CHATS[1:], start=1):
        assert _stream_in(h, chat, f"off-{i}", "text") is False
    assert len(h.api.ops("create")) == 1
    # after the cool-down the next card is the retry, and it works again
    h.advance(COOLDOWN + 1)
    assert _stream_in(h, CHATS[1], "back", "card again") is True
    assert len(h.api.ops("create")) == 2


def test_a_second_refusal_after_the_cool_down_switches_it_off_again(harness):
    h = harness()
    h.api.fail["create"] = BadRequest("no template", status=400, code="param.templateUnpublished")
    _stream_in(h, CHATS[0], "run-a", "first")
    h.advance(COOLDOWN + 1)
    assert _stream_in(h, CHATS[1], "retry", "retried") is True  # the retry card was tried...
    assert [f[1] for f in h.fallbacks] == ["first", "retried"]  # ...refused, sent as Markdown
    assert _stream_in(h, CHATS[2], "after", "off again") is False
    assert len(h.api.ops("create")) == 2


def test_a_question_card_template_refusal_uses_text_prompts_until_its_cool_down(harness):
    h = harness()
    h.api.fail["create"] = BadRequest("no template", status=400, code="param.templateNotExist")
    h.run()
    assert h.presenter.present_input(h.ctx()) in ("handled", "unsupported", "presented")
    h.api.fail.clear()
    h.run("run-2", session="s-2", owner="o-2", chat="cid-2")
    ctx = h.ctx("run-2", session="s-2", owner="o-2", chat="cid-2")
    assert h.presenter.present_input(ctx) == "unsupported"
    h.advance(COOLDOWN + 1)
    h.run("run-3", session="s-3", owner="o-3", chat="cid-3")
    ctx = h.ctx("run-3", session="s-3", owner="o-3", chat="cid-3")
    assert h.presenter.present_input(ctx) == "presented"
