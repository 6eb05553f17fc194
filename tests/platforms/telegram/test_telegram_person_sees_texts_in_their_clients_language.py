"""A Telegram person whose client tells its language (``language_code`` of the sender)
reads the SDK's texts in that language when the catalog has it; a language the catalog
lacks falls back to the channel's locale (English here) (issue 27)."""

from __future__ import annotations

from typing import Any

from channelkit.core.catalog import CATALOG
from channelkit.testing import ScriptedBridge, fail

from tests.platforms.telegram.tg_env import CHAT, OWNER, Env, texts


def _message(env: Env, text: str, language: str | None) -> None:
    sender: dict[str, Any] = {"id": OWNER, "is_bot": False, "first_name": "p"}
    if language is not None:
        sender["language_code"] = language
    update_id = next(env.update_ids)
    status = env.post(
        {
            "update_id": update_id,
            "message": {
                "message_id": 900 + update_id,
                "date": 0,
                "chat": {"id": CHAT, "type": "private"},
                "from": sender,
                "text": text,
            },
        }
    )
    assert status == 200


def test_a_german_client_gets_the_failure_notice_and_command_replies_in_german(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, ScriptedBridge([fail(RuntimeError("boom"))]))
    _message(env, "hi", "de-AT")
    env.settle()
    _message(env, "/cancel", "de-AT")
    env.settle()
    assert texts(env) == [CATALOG["de"]["notice.failed"], CATALOG["de"]["command.nothing_running"]]
    env.channel.close()


def test_a_language_the_catalog_lacks_gets_the_channels_texts(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, ScriptedBridge([]))
    _message(env, "/cancel", "de")
    env.settle()
    _message(env, "/cancel", "fr")  # the person's client changed: no German any more
    env.settle()
    _message(env, "/cancel", None)
    env.settle()
    de, en = CATALOG["de"]["command.nothing_running"], CATALOG["en"]["command.nothing_running"]
    assert texts(env) == [de, en, en]
    env.channel.close()
