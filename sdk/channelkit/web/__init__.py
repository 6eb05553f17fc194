"""channelkit.web: mount channel callbacks in any WSGI app, Flask or Django.

* `create_wsgi_app()` - a WSGI application (``channelkit.web.wsgi``);
* ``channelkit.web.flask.create_blueprint`` - a Flask blueprint (needs the ``flask`` extra);
* ``channelkit.web.django.urlpatterns`` - Django URL patterns (needs the ``django`` extra).

All three are thin wrappers over the same `IngressDispatcher` and the
framework-neutral contract in ``channelkit.ingress``. See docs/web.md.
"""

from __future__ import annotations

from channelkit.ingress import (
    MAX_BODY_BYTES,
    Headers,
    IngressRequest,
    IngressResponse,
    IngressRoute,
    SupportsIngress,
)
from channelkit.web.dispatch import HEALTHZ_PATH, IngressDispatcher, read_body
from channelkit.web.wsgi import WSGIApp, create_wsgi_app

__all__ = [
    "HEALTHZ_PATH",
    "MAX_BODY_BYTES",
    "Headers",
    "IngressDispatcher",
    "IngressRequest",
    "IngressResponse",
    "IngressRoute",
    "SupportsIngress",
    "WSGIApp",
    "create_wsgi_app",
    "read_body",
]
