"""One representative presentation rendered for every platform, and the golden files.

Regenerate the golden files (after an intended rendering change) with::

    python tests/presentation/golden_cases.py

then review ``git diff tests/presentation/golden``. The test compares byte-for-byte.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from channelkit.platforms.discord import renderer as discord
from channelkit.platforms.feishu import renderer as feishu
from channelkit.platforms.line import renderer as line
from channelkit.platforms.mattermost import renderer as mattermost
from channelkit.platforms.msteams import renderer as msteams
from channelkit.platforms.slack import renderer as slack
from channelkit.platforms.telegram import renderer as telegram
from channelkit.presentation import MessagePresentation, adapt, render_fallback_text

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
MATTERMOST_CALLBACK_URL = "https://bot.example.test/mattermost/actions"

REPRESENTATIVE: dict[str, Any] = {
    "title": "Deploy approval",
    "tone": "warning",
    "blocks": [
        {"type": "text", "text": "Canary is ready to promote."},
        {"type": "context", "text": "Build 1234, staging passed."},
        {"type": "divider"},
        {
            "type": "buttons",
            "buttons": [
                {"label": "Approve", "value": "deploy:approve", "style": "success"},
                {"label": "Decline", "value": "deploy:decline", "style": "danger"},
                {"label": "Runbook", "url": "https://runbooks.example.test/deploy"},
            ],
        },
        {
            "type": "select",
            "placeholder": "Environment",
            "options": [
                {"label": "Canary", "value": "env:canary"},
                {"label": "Production", "value": "env:prod"},
            ],
        },
    ],
}

RENDERERS: dict[str, Any] = {
    "discord": (discord.CAPABILITIES, discord.render),
    "slack": (slack.CAPABILITIES, slack.render),
    "telegram": (telegram.CAPABILITIES, telegram.render),
    "mattermost": (
        mattermost.CAPABILITIES,
        lambda p, text=None: mattermost.render(p, text=text, callback_url=MATTERMOST_CALLBACK_URL),
    ),
    "msteams": (msteams.CAPABILITIES, msteams.render),
    "feishu": (feishu.CAPABILITIES, feishu.render),
    "line": (line.CAPABILITIES, line.render),
}


def representative() -> MessagePresentation:
    return MessagePresentation.from_dict(REPRESENTATIVE)


def build_outputs() -> dict[str, Any]:
    """name -> JSON-able golden document."""
    presentation = representative()
    outputs: dict[str, Any] = {}
    for name, (capabilities, render) in RENDERERS.items():
        adapted = adapt(presentation, capabilities)
        outputs[name] = {
            "platform": name,
            "adapted": adapted.to_dict(),
            "messages": render(adapted, text=None),
        }
        if name == "feishu":  # the wire body carries the card serialized; show it parsed too
            outputs[name]["cards"] = feishu.render_cards(adapted)
    outputs["text"] = {"platform": "text", "text": render_fallback_text(presentation)}
    return outputs


def serialize(document: Any) -> bytes:
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def write_all() -> list[Path]:
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    written = []
    for name, document in build_outputs().items():
        path = GOLDEN_DIR / f"{name}.json"
        path.write_bytes(serialize(document))
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write_all():
        print(f"wrote {path}")
