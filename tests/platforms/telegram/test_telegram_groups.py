"""Telegram groups: which messages reach the agent (group_policy, mentions, replies)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from channelkit.core.text import MSG_NOTHING_RUNNING
from channelkit.errors import ConfigurationError
from channelkit.platforms.telegram import TelegramConfig
from channelkit.platforms.telegram.ingress import UpdateParseError, parse_update
from channelkit.testing import ScriptedBridge, final

from tests.platforms.telegram.tg_env import BOT_USERNAME, TOKEN, Env, texts, url

GROUP = -100
BOT_ID = int(TOKEN.split(":")[0])


def group(env: Env, text: str, **fields: Any) -> None:
    env.message(text, chat=GROUP, chat_type="supergroup", **fields)


def prompted(env: Env) -> list[str]:
    env.settle()
    return [text for _session, text in env.bridge.prompts]


def test_mention_policy_lets_only_addressed_messages_through(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, ScriptedBridge([final("ok")]))
    group(env, "just chatting")
    group(env, "mail me at x@qwen_bot.example or ping @qwen_bot_two")
    group(env, "@qwen_bot")  # a mention with nothing to do
    assert prompted(env) == [] and mock.request_history == []
    group(env, "@qwen_bot summarize the thread")
    assert prompted(env) == ["summarize the thread"]  # the mention is removed
    group(env, "hey  @QWEN_BOT   what  now?\nsecond line")  # usernames are case-insensitive
    assert prompted(env)[-1] == "hey what  now?\nsecond line"  # own spacing kept
    env.channel.close()


def test_only_commands_addressed_to_this_bot_count(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, ScriptedBridge([final("ok")]))
    group(env, "/cancel")  # bare: several bots may share the group
    group(env, "/cancel@other_bot")
    group(env, "/help")
    env.settle()
    assert texts(env) == []
    group(env, f"/cancel@{BOT_USERNAME}")
    env.settle()
    assert texts(env) == [MSG_NOTHING_RUNNING]
    group(env, f"/help@{BOT_USERNAME.upper()}")
    env.settle()
    assert len(texts(env)) == 2 and "/cancel" in texts(env)[-1]
    assert env.bridge.prompts == []
    env.channel.close()


def test_replies_to_the_bot_pass_but_forum_topic_replies_do_not(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, ScriptedBridge([final("ok")]))
    bot = {"id": BOT_ID, "is_bot": True, "first_name": "Qwen", "username": BOT_USERNAME}
    someone = {"id": 77, "is_bot": False, "first_name": "Ann"}
    reply = {"message_id": 1, "date": 0, "chat": {"id": GROUP, "type": "supergroup"}}
    group(env, "and this?", reply_to_message={**reply, "from": someone})
    # In a forum topic every message "replies" to the topic's creation message.
    group(
        env,
        "in a topic",
        message_thread_id=9,
        is_topic_message=True,
        reply_to_message={**reply, "from": bot, "forum_topic_created": {"name": "t"}},
    )
    assert prompted(env) == []
    group(env, "and this?", reply_to_message={**reply, "from": bot})
    assert prompted(env) == ["and this?"]
    env.channel.close()


def test_private_chats_are_never_gated(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, ScriptedBridge([final("ok")]), group_policy="disabled")
    env.message("hello @qwen_bot")
    assert prompted(env) == ["hello @qwen_bot"]
    env.channel.close()


def test_open_and_disabled_policies(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, ScriptedBridge([final("ok")]), group_policy="open")
    group(env, "anything goes")
    group(env, "@qwen_bot tidy")
    assert prompted(env) == ["anything goes", "tidy"]
    env.channel.close()

    sent = len(texts(env))
    env = Env(rt, mock, ScriptedBridge([final("ok")]), group_policy="disabled")
    group(env, "@qwen_bot hello")
    group(env, f"/cancel@{BOT_USERNAME}")
    assert prompted(env) == [] and len(texts(env)) == sent
    env.channel.close()


def test_unknown_username_warns_once_and_fetch_identity_learns_it(  # type: ignore[no-untyped-def]
    rt, mock, caplog
) -> None:
    env = Env(rt, mock, ScriptedBridge([final("ok")]), bot_username=None)
    with caplog.at_level(logging.WARNING, logger="channelkit.platforms.telegram.groups"):
        group(env, "@qwen_bot one")
        group(env, "@qwen_bot two")
    assert prompted(env) == []
    warnings = [r for r in caplog.records if "bot_username" in r.getMessage()]
    assert len(warnings) == 1
    mock.post(
        url("getMe"),
        json={
            "ok": True,
            "result": {"id": BOT_ID, "is_bot": True, "first_name": "Q", "username": "qwen_bot"},
        },
    )
    assert env.channel.fetch_identity() == "qwen_bot"
    group(env, "@qwen_bot three")
    assert prompted(env) == ["three"]
    env.channel.close()


@pytest.mark.parametrize(
    ("kwargs", "path"),
    [
        ({"group_policy": "everyone"}, "telegram.group_policy"),
        ({"bot_username": "ab"}, "telegram.bot_username"),
        ({"bot_username": "has space"}, "telegram.bot_username"),
    ],
)
def test_bad_group_settings_name_the_field(kwargs: dict[str, str], path: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        TelegramConfig(bot_token=TOKEN, **kwargs)
    assert info.value.path == path


def test_group_settings_from_camel_case_options() -> None:
    config = TelegramConfig.from_dict(
        {"botToken": TOKEN, "groupPolicy": "open", "botUsername": "@qwen_bot"}
    )
    assert (config.group_policy, config.bot_username, config.bot_id) == (
        "open",
        "@qwen_bot",
        BOT_ID,
    )


def test_malformed_reply_author_is_a_parse_error() -> None:
    base = {"message_id": 5, "chat": {"id": 1, "type": "group"}, "text": "x"}
    with pytest.raises(UpdateParseError) as info:
        parse_update(
            {"update_id": 1, "message": {**base, "reply_to_message": {"from": {"id": "7"}}}}
        )
    assert info.value.path == "update.message.reply_to_message.from.id"
