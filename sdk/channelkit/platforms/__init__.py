"""channelkit.platforms."""
