"""channelkit.presentation."""
