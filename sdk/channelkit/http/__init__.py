"""channelkit.http."""
