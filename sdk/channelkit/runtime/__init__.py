"""channelkit.runtime."""
