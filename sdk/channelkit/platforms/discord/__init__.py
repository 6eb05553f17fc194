"""channelkit.platforms.discord: presentation renderer and sender for discord."""
