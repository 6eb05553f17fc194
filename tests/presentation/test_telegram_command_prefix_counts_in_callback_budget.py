"""Telegram's ``tgcmd:`` prefix counts in the 64-byte callback_data budget: a command
that fits with the prefix is on the keyboard, a longer one is listed in the text by
``adapt`` rather than silently missing from the keyboard."""

from __future__ import annotations

import pytest
from channelkit.platforms.telegram import renderer as telegram
from channelkit.presentation import Button, ButtonsBlock, MessagePresentation, adapt

BUDGET = telegram.MAX_CALLBACK_DATA_BYTES - len(telegram.COMMAND_PREFIX)


@pytest.mark.parametrize("size", [BUDGET - 1, BUDGET, BUDGET + 1, 64])
def test_every_kept_command_button_is_on_the_keyboard(size: int) -> None:
    command = "/" + "c" * (size - 1)
    presentation = MessagePresentation(blocks=(ButtonsBlock((Button("Run", command=command),)),))
    adapted = adapt(presentation, telegram.CAPABILITIES)
    [message] = telegram.render(adapted)
    keys = [k for row in message.get("reply_markup", {}).get("inline_keyboard", []) for k in row]
    kept = [b for block in adapted.blocks if isinstance(block, ButtonsBlock) for b in block.buttons]
    if size <= BUDGET:
        assert kept and keys == [{"text": "Run", "callback_data": "tgcmd:" + command}]
    else:
        assert not kept and not keys
        assert f"Actions:\n- Run: `{command}`" in message["text"]
