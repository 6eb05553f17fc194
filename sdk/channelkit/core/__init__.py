"""channelkit.core."""
