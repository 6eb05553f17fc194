"""channelkit.platforms.slack: presentation renderer and sender for slack."""
