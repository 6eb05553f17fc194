"""channelkit.web."""
