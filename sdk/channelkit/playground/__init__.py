"""channelkit.playground."""
