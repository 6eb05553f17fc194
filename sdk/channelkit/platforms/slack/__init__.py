"""Slack: ``SlackChannel`` (Events API, streamed output with a Stop button, Block Kit
question forms) and the presentation renderer and sender; see ``docs/platforms/slack.md``.
The renderer lives in ``channelkit.platforms.slack.renderer`` and the sender in
``channelkit.platforms.slack.sender``; both are imported separately."""

from channelkit.platforms.slack.adapter import SlackChannel
from channelkit.platforms.slack.config import SlackConfig

__all__ = ["SlackChannel", "SlackConfig"]
