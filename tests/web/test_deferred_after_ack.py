"""Deferred ingress work starts only after the ACK was written, in every web layer."""

from __future__ import annotations

import threading
from collections.abc import Callable
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pytest
import requests
from channelkit.ingress import IngressRequest, IngressResponse, IngressRoute
from channelkit.web import create_wsgi_app


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


class DeferringChannel:
    """An adapter whose callback ACKs at once and defers its work."""

    def __init__(self, work: Callable[[], None]) -> None:
        self.work = work
        self.handled = 0

    def ingress_routes(self) -> list[IngressRoute]:
        def handle(request: IngressRequest) -> IngressResponse:
            self.handled += 1
            return IngressResponse.json(200, {"ack": True}, after=[self.work])

        return [IngressRoute("/test/callback", handle)]


def test_wsgi_server_runs_deferred_work_after_the_client_has_the_ack() -> None:
    client_has_ack = threading.Event()
    seen: list[bool] = []
    done = threading.Event()

    def work() -> None:
        # If this ran before the response was written, the client could not have it yet.
        seen.append(client_has_ack.wait(timeout=5))
        done.set()

    channel = DeferringChannel(work)
    server = make_server("127.0.0.1", 0, create_wsgi_app([channel]), handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/test/callback"
        response = requests.post(url, data=b"{}", timeout=10)
        client_has_ack.set()
        assert response.status_code == 200
        assert response.json() == {"ack": True}
        assert done.wait(timeout=5)
        assert seen == [True]
    finally:
        server.shutdown()
        server.server_close()


def test_wsgi_head_request_keeps_the_deferred_work() -> None:
    ran: list[int] = []
    app = create_wsgi_app([DeferringChannel(lambda: ran.append(1))])
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/test/callback", "wsgi.input": None}
    statuses: list[str] = []
    body = app(environ, lambda status, headers: statuses.append(status))
    assert ran == []  # nothing before the server closes the body
    assert b"".join(body) == b'{"ack":true}'
    body.close()  # type: ignore[attr-defined]
    assert ran == [1]
    assert statuses == ["200 OK"]


def test_flask_runs_deferred_work_when_the_response_closes() -> None:
    flask = pytest.importorskip("flask")
    from channelkit.web.flask import create_blueprint

    ran: list[int] = []
    app = flask.Flask(__name__)
    app.register_blueprint(create_blueprint([DeferringChannel(lambda: ran.append(1))]))
    with app.test_client() as client:
        response = client.post("/test/callback", data=b"{}")
        assert response.status_code == 200
        response.close()
    assert ran == [1]


def test_django_runs_deferred_work_when_the_response_closes() -> None:
    pytest.importorskip("django")
    from test_web_frameworks import _django_settings

    _django_settings()
    from channelkit.web.django import urlpatterns as make_patterns
    from django.test import Client
    from django.test.utils import override_settings

    ran: list[int] = []
    patterns = make_patterns([DeferringChannel(lambda: ran.append(1))])

    class Urls:
        urlpatterns = patterns

    with override_settings(ROOT_URLCONF=Urls):
        response = Client().post("/test/callback", data=b"{}", content_type="application/json")
    assert response.status_code == 200
    assert ran == [1]
