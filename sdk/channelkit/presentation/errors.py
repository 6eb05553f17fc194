"""Errors raised by :mod:`channelkit.presentation` (defined in :mod:`channelkit.errors`)."""

from __future__ import annotations

from channelkit.errors import DeliveryPinError, PresentationError, join_path

__all__ = ["DeliveryPinError", "PresentationError", "join_path"]
