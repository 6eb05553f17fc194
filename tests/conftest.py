"""Suite-wide test settings."""

from __future__ import annotations

from hypothesis import settings

# Property tests assert behaviour, never speed: a loaded CI machine must not turn a slow
# example into a DeadlineExceeded failure. Modules that need other settings pass their own.
settings.register_profile("channelkit", deadline=None)
settings.load_profile("channelkit")
