"""channelkit.platforms.line: presentation renderer and sender for line."""
