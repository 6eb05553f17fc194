"""channelkit.platforms.mattermost: presentation renderer and sender for mattermost."""
