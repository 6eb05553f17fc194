"""Tests for channelkit.presentation and the platform renderers."""
