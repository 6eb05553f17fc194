"""DingTalk question and approval cards show their own labels (Other, the custom-answer
field and hint, Submit, the end states) in the language of the card's owner, from the
message catalog; the custom "Other" choice is recognised by its value, never by its
label, so a translated card still takes a custom answer and an approval card still
drops the choice (issue 27). English cards are unchanged."""

from __future__ import annotations

import json
from typing import Any

import pytest
from channelkit.agents.base import PermissionOption
from channelkit.core.catalog import CATALOG, messages
from channelkit.core.config import ChannelConfig
from channelkit.platforms.dingtalk.api import QUESTION_CARD_TEMPLATE_ID
from channelkit.platforms.dingtalk.ingress import CardCallback
from channelkit.platforms.dingtalk.questions import OTHER_OPTION_VALUE
from dingtalk_helpers import AdapterHarness, Harness
from test_dingtalk_approval_buttons import card_fields, click, script_with, terminal

OWNER = "staff-1"


def _question_card(locale: str | None) -> tuple[Harness, Any, dict[str, Any]]:
    texts_for = None if locale is None else (lambda _person: messages(locale))
    h = Harness(texts_for=texts_for)
    h.run()
    ctx = h.ctx()
    assert h.presenter.present_input(ctx) == "presented"
    create = [c for c in h.api.ops("create") if c[1]["template_id"] == QUESTION_CARD_TEMPLATE_ID]
    return h, ctx, create[0][1]


def _ends(h: Harness) -> list[dict[str, Any]]:
    return [c[1]["params"] for c in h.api.ops("update") if "card_status" in c[1]["params"]]


@pytest.mark.parametrize("locale", ["zh-CN", "de"])
def test_a_question_card_shows_its_labels_in_the_owners_language(locale: str) -> None:
    table = CATALOG[locale]
    h, ctx, card = _question_card(locale)
    try:
        params = card["params"]
        region, region_other = params["form"]["fields"][:2]
        assert region["options"][-1] == {"value": OTHER_OPTION_VALUE, "text": table["button.other"]}
        assert region_other["label"] == table["dingtalk.other_field"].format(header="Region")
        assert region_other["placeholder"] == table["dingtalk.other_hint"]
        assert params["form_btn_text"] == table["button.submit"]
        # the translated Other choice still takes a custom answer (matched by its value)
        form = {"0": OTHER_OPTION_VALUE, "0_other": "Shenzhen", "1": ["Logs"]}
        result = h.presenter.route_callback(
            CardCallback(card["out_track_id"], "submit", "owner-1", form, True, False)
        )
        assert result.outcome == "accepted"
        result.run_after()
        assert ctx.responses[0]["answers"] == {"0": "Shenzhen", "1": "Logs"}
        (end,) = _ends(h)
        assert end["card_status"] == "submitted"
        assert end["question_desc"].startswith(table["dingtalk.q_submitted"] + "\n\n")
        assert end["form_btn_text"] == table["label.submitted_plain"]
    finally:
        h.close()


def test_an_expired_question_card_ends_in_the_owners_language() -> None:
    h, _ctx, _card = _question_card("zh-CN")
    try:
        h.advance(271)
        (end,) = _ends(h)
        assert end["card_status"] == "expired"
        assert end["form_btn_text"] == CATALOG["zh-CN"]["label.expired_plain"]
        assert end["question_desc"] in (
            CATALOG["zh-CN"]["dingtalk.q_expired"],
            CATALOG["zh-CN"]["question.unavailable"],
        )
    finally:
        h.close()


def test_an_english_question_card_is_unchanged() -> None:
    h, _ctx, card = _question_card(None)
    try:
        params = card["params"]
        region, region_other = params["form"]["fields"][:2]
        assert region["options"][-1] == {"value": "__ck_other__", "text": "Other"}
        assert region_other["label"] == "Region: Other"
        assert region_other["placeholder"] == "Enter a custom answer when Other is selected"
        assert params["form_btn_text"] == "Submit"
    finally:
        h.close()


def test_a_chinese_approval_card_drops_the_other_choice_and_ends_in_chinese() -> None:
    options = (
        PermissionOption("allow", "Allow", "allow_once"),
        PermissionOption("reject", "Reject", "reject_once"),
    )
    h = AdapterHarness(
        script_with(options), channel_config=ChannelConfig(name="dingtalk", locale="zh-CN")
    )
    try:
        h.send("go", sender=OWNER)
        h.wait_for(lambda: h.question_tracks())
        track = h.question_tracks()[0]
        fields = card_fields(h)
        assert [(f["name"], f["type"]) for f in fields] == [("0", "CHECKBOX_GROUP")]
        labels = [o["text"] for o in fields[0]["options"]]
        assert labels == ["Allow", "Reject"]  # no translated Other either
        create = next(c for c in h.api.ops("create") if "form" in c[1]["params"])
        assert create[1]["params"]["form_btn_text"] == CATALOG["zh-CN"]["button.submit"]
        click(h, track, "Allow")
        h.wait_for(lambda: h.bridge.responses)
        h.wait_for(
            lambda: any(
                c[1].get("out_track_id") == track and "card_status" in c[1]["params"]
                for c in h.api.ops("update")
            )
        )
        end = terminal(h, track)
        assert end["form_btn_text"] == CATALOG["zh-CN"]["label.submitted_plain"]
        assert json.dumps(end, ensure_ascii=False).count("Submitted") == 0
    finally:
        h.close()
