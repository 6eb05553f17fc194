"""Errors raised by :mod:`channelkit.presentation`."""

from __future__ import annotations

from channelkit.errors import ChannelKitError, ConfigurationError

__all__ = ["DeliveryPinError", "PresentationError", "join_path"]


def join_path(prefix: str, path: str | None) -> str:
    """Join a parent path (``blocks[2]``) and a child path (``buttons[0].label``)."""
    if not path:
        return prefix
    if not prefix:
        return path
    if path.startswith("["):
        return prefix + path
    return f"{prefix}.{path}"


class PresentationError(ConfigurationError):
    """A presentation, delivery or reply payload is invalid.

    ``path`` names the offending field, e.g. ``blocks[2].buttons[0].label``.
    """

    def __init__(self, message: str, path: str | None = None) -> None:
        self.reason = message
        super().__init__(message, path)

    def under(self, prefix: str) -> PresentationError:
        """Return the same error with ``prefix`` prepended to its path."""
        return PresentationError(self.reason, join_path(prefix, self.path))


class DeliveryPinError(ChannelKitError):
    """Pinning a delivered message failed while the pin was ``required``.

    Raised only after the message was sent: ``message_id`` is the delivered message
    (never lost), ``message_ids`` every message the delivery produced.
    """

    def __init__(
        self,
        message: str,
        *,
        platform: str,
        target: str,
        message_id: str | None,
        message_ids: tuple[str, ...] = (),
    ) -> None:
        self.platform = platform
        self.target = target
        self.message_id = message_id
        self.message_ids = message_ids
        suffix = f" (platform {platform}, message id {message_id})" if message_id else ""
        super().__init__(message + suffix)
