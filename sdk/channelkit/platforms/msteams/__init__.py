"""channelkit.platforms.msteams: presentation renderer and sender for msteams."""
