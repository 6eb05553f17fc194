from __future__ import annotations

import math

import pytest
from channelkit.errors import ConfigurationError
from channelkit.platforms.dingtalk.config import DingtalkConfig, parse_interactive_cards


def test_omitted_cards_are_off_and_object_opts_in():
    off = parse_interactive_cards(None)
    assert off.enabled is False
    assert off.status_card.enabled and off.question_card.enabled
    assert off.question_card.timeout_ms == 270_000
    on = parse_interactive_cards({})
    assert on.enabled and on.status_card.enabled and on.question_card.enabled


def test_independent_disabling():
    cfg = parse_interactive_cards(
        {"enabled": True, "statusCard": {"enabled": False}, "questionCard": {"timeoutMs": 1000}}
    )
    assert not cfg.status_card.enabled and cfg.question_card.enabled
    assert cfg.question_card.timeout_ms == 1000


@pytest.mark.parametrize(
    ("value", "path", "message"),
    [
        ("on", "interactiveCards", "DingTalk interactiveCards must be an object."),
        ({"enabled": "yes"}, "interactiveCards.enabled", "must be a boolean."),
        ({"statusCard": "x"}, "interactiveCards.statusCard", "statusCard must be an object."),
        ({"questionCard": 1}, "interactiveCards.questionCard", "questionCard must be an object."),
        ({"statusCard": {"enabled": "yes"}}, "interactiveCards.statusCard.enabled", "boolean"),
        ({"questionCard": {"enabled": 1}}, "interactiveCards.questionCard.enabled", "boolean"),
        ({"questionCard": {"timeoutMs": 0}}, "interactiveCards.questionCard.timeoutMs", "finite"),
        (
            {"questionCard": {"timeoutMs": math.inf}},
            "interactiveCards.questionCard.timeoutMs",
            "finite",
        ),
        ({"questionCard": {"timeoutMs": "5"}}, "interactiveCards.questionCard.timeoutMs", "finite"),
    ],
)
def test_invalid_values_name_the_path(value, path, message):
    with pytest.raises(ConfigurationError) as info:
        parse_interactive_cards(value)
    assert info.value.path == path
    assert message in str(info.value)


def test_exact_messages():
    with pytest.raises(ConfigurationError) as info:
        parse_interactive_cards({"statusCard": {"enabled": "yes"}})
    assert "DingTalk interactiveCards.statusCard.enabled must be a boolean." in str(info.value)
    with pytest.raises(ConfigurationError) as info:
        parse_interactive_cards({"questionCard": {"timeoutMs": -1}})
    assert (
        "DingTalk interactiveCards.questionCard.timeoutMs must be a finite positive number."
        in str(info.value)
    )


def test_timeout_clamped():
    cfg = parse_interactive_cards({"questionCard": {"timeoutMs": 2**40}})
    assert cfg.question_card.timeout_ms == 2_147_483_647


def test_effective_lifetime_and_block_streaming():
    cfg = DingtalkConfig.from_dict(
        {
            "clientId": "ding1",
            "clientSecret": "s",
            "blockStreaming": "on",
            "hostPermissionTimeoutMs": 120_000,
            "interactiveCards": {"questionCard": {"timeoutMs": 270_000}},
        }
    )
    assert cfg.question_timeout_seconds == 120.0
    assert cfg.status_cards_enabled is False  # block streaming disables status cards only
    assert cfg.question_cards_enabled is True
    cfg2 = DingtalkConfig("ding1", "s", interactive_cards={})  # type: ignore[arg-type]
    assert cfg2.status_cards_enabled and cfg2.question_timeout_seconds == 270.0


def test_missing_credentials_named():
    with pytest.raises(ConfigurationError) as info:
        DingtalkConfig.from_dict({"clientSecret": "x"})
    assert info.value.path == "clientId"
    with pytest.raises(ConfigurationError) as info:
        DingtalkConfig.from_dict({"clientId": "x", "blockStreaming": "maybe"})
    assert info.value.path == "blockStreaming"
