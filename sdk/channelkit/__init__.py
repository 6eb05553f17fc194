"""channelkit: connect an AI agent's runs to IM platforms with native interactions.

The package is synchronous and thread-pool backed; call it from Flask, Django or any
WSGI application. Start with :mod:`channelkit.core` (``ChannelBase``) and a platform
adapter under :mod:`channelkit.platforms`.
"""

import logging

from channelkit.errors import (
    ApiError,
    AuthError,
    BadRequest,
    ChannelKitError,
    ConfigurationError,
    DeserializationError,
    NotFound,
    RateLimited,
    ServerError,
    TransportError,
)

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "ApiError",
    "AuthError",
    "BadRequest",
    "ChannelKitError",
    "ConfigurationError",
    "DeserializationError",
    "NotFound",
    "RateLimited",
    "ServerError",
    "TransportError",
    "__version__",
]
