"""Configuration validation and card JSON builders."""

from __future__ import annotations

import json

import pytest
from channelkit.core.types import ChannelUserQuestion, QuestionOption
from channelkit.errors import ConfigurationError
from channelkit.platforms.feishu import FeishuConfig
from channelkit.platforms.feishu.cards import (
    CONTENT_ELEMENT_ID,
    STATUS_ELEMENT_ID,
    STOP_ACTION,
    form_card,
    form_terminal_card,
    output_card,
    status_label,
    streaming_card_entity,
)
from channelkit.platforms.feishu.config import FeishuFormsConfig

BASE = {"app_id": "cli_1", "app_secret": "sec", "verification_token": "tok"}

LABELS = {
    "zh": ("运行中...", "已完成", "已取消", "已失败，请重试"),
    "en": ("Running...", "Completed", "Cancelled", "Failed, please retry"),
    "de": ("Läuft...", "Abgeschlossen", "Abgebrochen", "Fehlgeschlagen, bitte erneut versuchen"),
}


def test_defaults() -> None:
    cfg = FeishuConfig.from_dict(BASE)
    assert cfg.language == "zh"
    assert cfg.forms.enabled is True
    assert cfg.forms.timeout_ms == 270_000
    assert cfg.cardkit is True
    assert "sec" not in repr(cfg) and "tok" not in repr(cfg)


def test_from_dict_nested_forms() -> None:
    cfg = FeishuConfig.from_dict({**BASE, "language": "de", "forms": {"enabled": False}})
    assert cfg.language == "de"
    assert cfg.forms == FeishuFormsConfig(enabled=False)


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({**BASE, "language": "fr"}, "feishu.language"),
        ({**BASE, "forms": {"enabled": "yes"}}, "feishu.forms.enabled"),
        ({**BASE, "forms": {"timeout_ms": 5}}, "feishu.forms.timeout_ms"),
        ({**BASE, "forms": {"bogus": 1}}, "feishu.forms.bogus"),
        ({**BASE, "forms": []}, "feishu.forms"),
        ({**BASE, "app_secret": ""}, "feishu.app_secret"),
        ({k: v for k, v in BASE.items() if k != "verification_token"}, "feishu.verification_token"),
        ({**BASE, "encrypt_key": ""}, "feishu.encrypt_key"),
        ({**BASE, "base_url": "ftp://x"}, "feishu.base_url"),
        ({**BASE, "max_clock_skew_s": 0}, "feishu.max_clock_skew_s"),
        ({**BASE, "unknown": 1}, "feishu.unknown"),
    ],
)
def test_errors_name_the_path(data: dict[str, object], path: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        FeishuConfig.from_dict(data)
    assert info.value.path == path
    assert str(info.value).startswith(path)


def test_constructor_validates_too() -> None:
    with pytest.raises(ConfigurationError) as info:
        FeishuConfig(app_id="a", app_secret="b", verification_token="c", language="xx")  # type: ignore[arg-type]
    assert info.value.path == "feishu.language"


def _texts(card: dict[str, object]) -> str:
    return json.dumps(card, ensure_ascii=False)


@pytest.mark.parametrize("language", ["zh", "en", "de"])
def test_status_labels_in_three_languages(language: str) -> None:
    running, completed, cancelled, failed = LABELS[language]
    assert status_label("running", language) == running
    assert status_label("completed", language) == completed
    assert status_label("cancelled", language) == cancelled
    assert status_label("failed", language) == failed
    for state, label in zip(
        ("running", "completed", "cancelled", "failed"), LABELS[language], strict=True
    ):
        card = output_card("hello", state, language, stop_value={"action": STOP_ACTION})  # type: ignore[arg-type]
        elements = card["body"]["elements"]
        assert elements[0] == {
            "tag": "markdown",
            "element_id": CONTENT_ELEMENT_ID,
            "content": "hello",
        }
        assert elements[1]["element_id"] == STATUS_ELEMENT_ID
        assert elements[1]["content"] == f"*{label}*"
        has_stop = any(e.get("tag") == "button" for e in elements)
        assert has_stop is (state == "running")


def test_streaming_entity_has_streaming_mode_and_stop_value() -> None:
    card = streaming_card_entity("hi", "en", stop_value={"action": STOP_ACTION, "segment": "s1"})
    assert card["schema"] == "2.0"
    assert card["config"]["streaming_mode"] is True
    button = card["body"]["elements"][2]
    assert button["behaviors"] == [
        {"type": "callback", "value": {"action": STOP_ACTION, "segment": "s1"}}
    ]
    assert button["text"]["content"] == "Stop"


def _questions() -> tuple[ChannelUserQuestion, ...]:
    return (
        ChannelUserQuestion(
            "0",
            "Region",
            "Which region?",
            (QuestionOption("Beijing", "prod"), QuestionOption("Shanghai", "")),
        ),
        ChannelUserQuestion(
            "1",
            "Signals",
            "What to collect?",
            (QuestionOption("Logs", ""), QuestionOption("Metrics", "")),
            multi_select=True,
        ),
    )


def test_form_card_shape() -> None:
    card = form_card("req-1", _questions(), "zh")
    form = card["body"]["elements"][0]
    assert form["tag"] == "form"
    tags = [(e["tag"], e.get("name")) for e in form["elements"]]
    assert ("select_static", "0") in tags
    assert ("multi_select_static", "1") in tags
    assert ("input", "0_other") in tags
    buttons = [e for e in form["elements"] if e["tag"] == "button"]
    assert [b["text"]["content"] for b in buttons] == ["提交", "取消"]
    assert all(b["form_action_type"] == "submit" for b in buttons)
    assert buttons[0]["behaviors"][0]["value"] == {"action": "ck_submit", "request": "req-1"}
    assert buttons[1]["behaviors"][0]["value"] == {"action": "ck_cancel", "request": "req-1"}
    select = next(e for e in form["elements"] if e.get("name") == "0")
    assert [o["value"] for o in select["options"]] == ["0", "1"]
    assert "**Beijing**: prod" in _texts(card)


def test_form_card_without_custom_text() -> None:
    card = form_card("r", _questions(), "en", custom_text=False)
    assert not any(e["tag"] == "input" for e in card["body"]["elements"][0]["elements"])


@pytest.mark.parametrize(
    ("language", "labels"),
    [("zh", ("已提交", "已取消", "已过期")), ("en", ("Submitted", "Cancelled", "Expired"))],
)
def test_form_terminal_cards(language: str, labels: tuple[str, str, str]) -> None:
    for state, label in zip(("submitted", "cancelled", "expired"), labels, strict=True):
        card = form_terminal_card(_questions(), state, language)  # type: ignore[arg-type]
        text = _texts(card)
        assert f"*{label}*" in text
        assert "button" not in text and "form" not in text.replace("form_title", "")
    shown = form_terminal_card(_questions(), "submitted", "en", answers={"0": "Beijing"})
    assert "Beijing" in _texts(shown)
