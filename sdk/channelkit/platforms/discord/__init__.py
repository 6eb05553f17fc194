"""Discord: `DiscordChannel` (the Gateway, or the Gateway plus the HTTP interactions
endpoint; one streamed message per output segment with a Stop button, component
questions and approval buttons, typing) and the presentation renderer and sender; see
`docs/platforms/discord.md`. The renderer lives in `channelkit.platforms.discord.renderer`
and the sender in `channelkit.platforms.discord.sender`; both are imported separately."""

from channelkit.platforms.discord.adapter import DiscordChannel
from channelkit.platforms.discord.config import DiscordConfig

__all__ = ["DiscordChannel", "DiscordConfig"]
