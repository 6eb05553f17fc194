"""The ingress contract; the names live in :mod:`channelkit.ingress` now (re-exported here)."""

from __future__ import annotations

from channelkit.ingress import (
    MAX_BODY_BYTES,
    Headers,
    IngressHandler,
    IngressRequest,
    IngressResponse,
    IngressRoute,
    SupportsIngress,
    loads_json,
)

__all__ = [
    "MAX_BODY_BYTES",
    "Headers",
    "IngressHandler",
    "IngressRequest",
    "IngressResponse",
    "IngressRoute",
    "SupportsIngress",
    "loads_json",
]
