"""``locale`` is a channel setting like the others: in ``ChannelConfig``, in a channel's
``options`` of the configuration file and as ``channelkit playground --set locale=...``;
a value the catalog cannot serve is an error naming the field; a valid one reaches the
channel, whose people then read its texts unless their platform told their own
language (issue 27)."""

from __future__ import annotations

from typing import Any

import pytest
from channelkit.config import parse_config
from channelkit.core import ChannelConfig
from channelkit.core.catalog import CATALOG
from channelkit.core.locales import PersonLocales
from channelkit.errors import ConfigurationError
from channelkit.playground.overrides import channel_options, parse_settings


def _document(options: dict[str, Any]) -> dict[str, Any]:
    return {
        "channels": [
            {"platform": "telegram", "credentials": {"botToken": "1:x"}, "options": options}
        ]
    }


def test_channel_config_resolves_a_tag_and_rejects_what_the_catalog_lacks() -> None:
    assert ChannelConfig(name="c").locale is None
    assert ChannelConfig(name="c", locale="zh").locale == "zh-CN"
    assert ChannelConfig(name="c", locale="de-AT").locale == "de"
    with pytest.raises(ConfigurationError, match=r"^locale: must be one of en, zh-CN, de"):
        ChannelConfig(name="c", locale="fr")
    with pytest.raises(ConfigurationError, match=r"^locale: "):
        ChannelConfig(name="c", locale=3)  # type: ignore[arg-type]


def test_the_configuration_file_names_the_bad_locale_and_passes_a_good_one() -> None:
    with pytest.raises(ConfigurationError, match=r"^channels\[0\]\.options\.locale: must be"):
        parse_config(_document({"locale": "klingon"}))
    config = parse_config(_document({"locale": "zh_CN"}))  # the adapter's parser never sees it
    assert config.channels[0].options["locale"] == "zh_CN"
    assert ChannelConfig(name="c", locale=config.channels[0].options["locale"]).locale == "zh-CN"


def test_playground_set_locale_is_checked_like_the_file() -> None:
    assert channel_options(parse_settings(["locale=zh-CN"])) == {"locale": "zh-CN"}
    assert channel_options(parse_settings(["options.locale=de"])) == {"locale": "de"}
    with pytest.raises(ConfigurationError, match=r"^--set locale: must be one of"):
        channel_options(parse_settings(["locale=fr"]))


def test_a_persons_language_wins_over_the_channels_and_the_map_is_bounded() -> None:
    locales = PersonLocales("zh-CN", max_people=2)
    assert locales.messages_for("a").locale == "zh-CN"  # nobody told: the channel's
    locales.note("a", "de")
    locales.note("b", "en-US")
    assert locales.messages_for("a").get("button.stop") == CATALOG["de"]["button.stop"]
    assert locales.messages_for("b").locale == "en"
    locales.note("c", "de")  # a third person: the least recently noted is forgotten
    assert len(locales) == 2 and locales.locale_of("a") is None
    assert locales.messages_for("a").locale == "zh-CN"
    locales.note("b", "fr")  # a language the catalog lacks forgets the person's
    assert locales.locale_of("b") is None and locales.messages_for("b").locale == "zh-CN"
    assert PersonLocales().messages_for("anyone").locale == "en"
