"""Flask integration: a blueprint mounting every channel's ingress routes.

::

    from flask import Flask
    from channelkit.web.flask import create_blueprint

    app = Flask(__name__)
    app.register_blueprint(create_blueprint([channel]))

Flask is imported when `create_blueprint()` is called, so ``channelkit.web`` works
without the ``flask`` extra installed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from channelkit.ingress import (
    MAX_BODY_BYTES,
    Headers,
    IngressRequest,
    IngressResponse,
    IngressRoute,
    SupportsIngress,
)
from channelkit.web.dispatch import IngressDispatcher, query_dict

__all__ = ["create_blueprint"]

_ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


def _import_flask() -> Any:
    try:
        import flask
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "channelkit.web.flask needs Flask: python -m pip install 'channelkit[flask]'"
        ) from exc
    return flask


def create_blueprint(
    channels: Iterable[SupportsIngress | IngressRoute],
    *,
    name: str = "channelkit",
    url_prefix: str | None = None,
    healthz: bool = True,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> Any:
    """A ``flask.Blueprint`` serving each channel's ingress paths (and ``/healthz``).

    The paths are the adapters' own (``/dingtalk/robot``...), under ``url_prefix`` when
    given. Behaviour matches `channelkit.web.create_wsgi_app()`: raw body read once,
    413 above ``max_body_bytes``, 405 with ``Allow``, adapter ACKs and rejections passed
    through, 500 instead of an exception.
    """
    flask = _import_flask()
    dispatcher = IngressDispatcher(channels, healthz=healthz, max_body_bytes=max_body_bytes)
    blueprint = flask.Blueprint(name, __name__, url_prefix=url_prefix)

    def to_flask(response: IngressResponse) -> Any:
        result = flask.Response(response.body, status=response.status)
        for header, value in response.headers:
            result.headers[header] = value
        if response.after:
            # Werkzeug closes the response once it has been sent: deferred work starts
            # only after the ACK.
            result.call_on_close(response.run_after)
        return result

    def view(ck_path: str) -> Any:
        request = flask.request
        early = dispatcher.preflight(request.method, ck_path)
        if early is not None:
            return to_flask(early)
        body = dispatcher.read_or_refuse(request.stream, request.headers.get("Content-Length"))
        if isinstance(body, IngressResponse):
            return to_flask(body)
        ingress = IngressRequest(
            method=request.method.upper(),
            path=ck_path,
            headers=Headers(list(request.headers.items())),
            body=body,
            query=query_dict(request.args.items(multi=True)),
            remote_addr=request.remote_addr,
        )
        return to_flask(dispatcher.dispatch(ingress))

    for index, path in enumerate(dispatcher.paths):
        blueprint.add_url_rule(
            path,
            endpoint=f"ingress_{index}",
            view_func=view,
            methods=_ALL_METHODS,
            defaults={"ck_path": path},
            strict_slashes=False,
        )
    blueprint.channelkit_dispatcher = dispatcher
    return blueprint
