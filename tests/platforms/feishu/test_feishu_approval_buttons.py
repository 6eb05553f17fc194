"""Feishu approval buttons: an ordinary tool permission as an owner-only card."""

from __future__ import annotations

import json
import threading
from typing import Any

import test_feishu_adapter as fa
from channelkit.core.text import MSG_DENIED
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.platforms.feishu.approvals import APPROVAL_ACTION, TEXTS
from channelkit.platforms.feishu.ingress import parse_card_action
from channelkit.testing import wait_until
from feishu_helpers import FakeFeishu, card_action, request

S = TEXTS["zh"]


class Run:
    """A Feishu channel whose run asks permission to write a file, then reports."""

    def __init__(self, rt: Any, api: FeishuApi, fake: FakeFeishu, **overrides: Any) -> None:
        self.rt, self.fake = rt, fake
        self.decisions: list[Any] = []
        self.message_id: str | None = None
        script = fa.Script()

        def behaviour(turn: Any) -> str:
            self.decisions.append(turn.request_permission("Write notes.txt", tool_name="write"))
            return "done"

        script.behaviour = behaviour
        self.channel = fa.build(rt, api, script, **overrides)
        self.handle = fa.inbound(self.channel, "write it")

    def card(self) -> tuple[str, dict[str, Any]]:
        wait_until(lambda: self._card_send() is not None)
        call = self._card_send()
        assert call is not None
        if self.message_id is None:  # remembered: the record is gone once it ended
            self.message_id = wait_until(self._stored_message_id)
        return str(self.message_id), call.card

    def _stored_message_id(self) -> Any:
        """The card's message id once the presenter stored it (just after the send)."""
        records = self.channel.approvals.registry.records()
        return records[0].message_id if records else None

    def _card_send(self) -> Any:
        for call in self.fake.ops("send"):
            card = call.card
            if card is not None and "ck_perm" in json.dumps(card):
                return call
        return None

    def buttons(self) -> dict[str, dict[str, Any]]:
        _, card = self.card()
        return {
            e["text"]["content"]: e["behaviors"][0]["value"]
            for e in card["body"]["elements"]
            if e["tag"] == "button"
        }

    def click(self, label: str, *, who: str = fa.OWNER) -> dict[str, Any]:
        message_id, _ = self.card()
        value = self.buttons()[label]
        payload = card_action(value, open_id=who, message_id=message_id)
        response = self.channel.handle_card_request(request(payload))
        assert response.status == 200
        body: dict[str, Any] = json.loads(response.body)
        return body

    def patched(self) -> list[str]:
        return [json.dumps(c.card, ensure_ascii=False) for c in self.fake.ops("patch") if c.card]

    def done(self) -> None:
        self.handle.result(5)
        self.rt.settle()

    def close(self) -> None:
        self.channel.close(timeout=2.0)


def test_card_offers_one_button_per_agent_option(rt: Any, api: FeishuApi, fake: FakeFeishu) -> None:
    run = Run(rt, api, fake)
    try:
        _, card = run.card()
        text = json.dumps(card, ensure_ascii=False)
        assert "Write notes" in text and "/approve" in text
        buttons = run.buttons()
        assert list(buttons) == ["Allow", "Always allow", "Reject"]  # the agent's order
        # Each button carries only the action, the card's opaque token and the option's
        # index: never the agent's request or option ids.
        assert [v["option"] for v in buttons.values()] == [0, 1, 2]
        for value in buttons.values():
            assert set(value) == {"action", "token", "option"}
            assert value["action"] == APPROVAL_ACTION
            assert "proceed" not in json.dumps(value)
        assert not any("Permission required" in json.dumps(c.body) for c in fake.ops("send"))
    finally:
        run.close()


def test_allow_button_answers_the_agent_with_that_option(
    rt: Any, api: FeishuApi, fake: FakeFeishu
) -> None:
    run = Run(rt, api, fake)
    try:
        body = run.click("Allow")
        assert body["toast"]["content"] == S["sent"]
        run.done()
        assert [(d.option_id, d.kind) for d in run.decisions] == [("proceed_once", "allow_once")]
        (patched,) = run.patched()
        assert "✅ Allow" in patched and "ck_perm" not in patched  # buttons gone
    finally:
        run.close()


def test_reject_button_answers_the_agent_with_its_reject_option(
    rt: Any, api: FeishuApi, fake: FakeFeishu
) -> None:
    run = Run(rt, api, fake)
    try:
        run.click("Reject")
        run.done()
        assert [(d.option_id, d.kind) for d in run.decisions] == [("cancel", "reject_once")]
        assert "❌ Reject" in run.patched()[0]
        late = run.click("Allow")  # a late click changes nothing
        assert late["toast"]["content"] == S["stale"]
        assert len(run.decisions) == 1
    finally:
        run.close()


def test_a_foreign_users_click_is_refused(rt: Any, api: FeishuApi, fake: FakeFeishu) -> None:
    run = Run(rt, api, fake)
    try:
        body = run.click("Allow", who="ou_intruder")
        assert body["toast"]["content"] == S["not_owner"]
        assert run.channel.pending_request_ids() != [] and run.patched() == []
        fa.inbound(run.channel, "/deny", message_id="om_in2")
        run.done()
        assert [d.option_id for d in run.decisions] == ["cancel"]
    finally:
        run.close()


def test_a_click_racing_the_owners_deny_has_one_winner_shown_on_the_card(
    rt: Any, api: FeishuApi, fake: FakeFeishu
) -> None:
    winners: set[str] = set()
    for round_ in range(9):
        fake.calls.clear()
        run = Run(rt, api, fake)
        try:
            run.card()
            mode = round_ % 3  # 0: together; 1: the click first; 2: the /deny first
            start = threading.Barrier(2)

            def click(run: Run = run) -> None:
                start.wait(5)  # noqa: B023
                run.click("Allow")

            thread = threading.Thread(target=click)
            thread.start()
            if mode == 2:
                fa.inbound(run.channel, "/deny", message_id="om_in2").result(5)
            start.wait(5)
            if mode == 1:
                wait_until(lambda run=run: run.decisions)
            if mode != 2:
                fa.inbound(run.channel, "/deny", message_id="om_in2")
            thread.join(5)
            run.done()
            (decision,) = run.decisions
            (patched,) = run.patched()
            sent = [json.dumps(c.body, ensure_ascii=False) for c in fake.ops("send")]
            if decision.option_id == "proceed_once":
                winners.add("button")
                assert "✅ Allow" in patched and not any(MSG_DENIED in s for s in sent)
            else:
                winners.add("deny")
                assert decision.option_id == "cancel" and "❌ Reject" in patched
        finally:
            run.close()
    assert winners == {"button", "deny"}


def test_expiry_on_the_fake_clock_ends_the_card(rt: Any, api: FeishuApi, fake: FakeFeishu) -> None:
    run = Run(rt, api, fake)
    try:
        run.card()
        rt.clock.advance(run.channel.permission_lifetime())
        run.done()
        assert run.decisions[0].cancelled
        assert "⌛ Expired" in run.patched()[0]
        message_id, _ = run.card()
        late = parse_card_action(card_action(run.buttons()["Allow"], message_id=message_id))
        assert late is not None
        decision = run.channel.approvals.handle_action(late)  # a late click: no work
        assert decision.body["toast"]["content"] == S["stale"] and decision.after == ()
    finally:
        run.close()


def test_forms_disabled_keeps_the_text_prompt(rt: Any, api: FeishuApi, fake: FakeFeishu) -> None:
    run = Run(rt, api, fake, forms={"enabled": False})
    try:
        wait_until(lambda: any("/approve" in json.dumps(c.body) for c in fake.ops("send")))
        assert run._card_send() is None
        fa.inbound(run.channel, "/approve", message_id="om_in2")
        run.done()
        assert [d.option_id for d in run.decisions] == ["proceed_once"]
    finally:
        run.close()


def test_a_second_click_while_the_first_answer_is_on_its_way_is_busy(
    rt: Any, api: FeishuApi, fake: FakeFeishu
) -> None:
    run = Run(rt, api, fake)
    try:
        message_id, _ = run.card()
        buttons = run.buttons()

        def decide(label: str) -> Any:
            action = parse_card_action(card_action(buttons[label], message_id=message_id))
            assert action is not None
            return run.channel.approvals.handle_action(action)

        first = decide("Allow")  # claimed; its answer not handed on yet
        assert first.body["toast"]["content"] == S["sent"] and first.after != ()
        second = decide("Reject")
        assert second.body["toast"]["content"] == S["busy"] and second.after == ()
        first.run_after()
        run.done()
        assert [d.option_id for d in run.decisions] == ["proceed_once"]  # the first click's
    finally:
        run.close()
