"""channelkit.clients."""
