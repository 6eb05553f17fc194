"""The same DingTalk conversation through Flask's and Django's test clients."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator, Mapping
from urllib.parse import urlsplit

import pytest
from channelkit.playground import CallbackDelivery, EmulatorServer
from dingtalk_conversation import drive_conversation, emulator_options, make_channel


@pytest.fixture()
def emulator_server() -> Iterator[EmulatorServer]:
    with EmulatorServer(**emulator_options()) as server:
        yield server


def test_flask_blueprint_conversation(emulator_server: EmulatorServer) -> None:
    flask = pytest.importorskip("flask")
    from channelkit.web.flask import create_blueprint

    channel = make_channel(emulator_server.url)
    try:
        app = flask.Flask("ck-test")
        app.register_blueprint(create_blueprint([channel]))
        client = app.test_client()

        def deliver(url: str, headers: Mapping[str, str], body: bytes) -> CallbackDelivery:
            response = client.post(urlsplit(url).path, data=body, headers=dict(headers))
            text = response.get_data(as_text=True)
            response.close()  # a server closes the response: deferred work starts now
            return CallbackDelivery(response.status_code, text)

        emulator = emulator_server.emulator
        emulator.deliver = deliver
        emulator.robot_callback_url = "http://flask.test/dingtalk/robot"
        emulator.card_callback_url = "http://flask.test/dingtalk/card"
        drive_conversation(emulator)

        assert client.get("/healthz").get_json() == {"ok": True}
        wrong = client.get("/dingtalk/robot")
        assert wrong.status_code == 405 and wrong.headers["Allow"] == "POST"
        big = client.post("/dingtalk/robot", data=b"x" * (1024 * 1024 + 1))
        assert big.status_code == 413
        unsigned = client.post("/dingtalk/robot", data=b"{}")
        assert unsigned.status_code == 401
    finally:
        channel.close()


def _django_settings() -> None:
    from django.conf import settings

    if not settings.configured:
        settings.configure(
            DEBUG=False,
            SECRET_KEY="channelkit-tests",
            ALLOWED_HOSTS=["*"],
            ROOT_URLCONF="channelkit_test_urls_placeholder",
            DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
            INSTALLED_APPS=[],
            MIDDLEWARE=["django.middleware.csrf.CsrfViewMiddleware"],
            USE_TZ=True,
        )
        import django

        django.setup()


def test_django_views_conversation(emulator_server: EmulatorServer) -> None:
    pytest.importorskip("django")
    _django_settings()
    from channelkit.web.django import DjangoDBExecutor, urlpatterns
    from django.test import Client, override_settings

    closes: list[int] = []
    # count the connection-hygiene calls around every pool task
    pool = DjangoDBExecutor(8, close=lambda: closes.append(1))
    channel = make_channel(emulator_server.url, executor=pool)
    module = types.ModuleType("channelkit_test_urls_conversation")
    module.urlpatterns = urlpatterns([channel])  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    try:
        with override_settings(ROOT_URLCONF=module.__name__):
            client = Client(enforce_csrf_checks=True)

            def deliver(url: str, headers: Mapping[str, str], body: bytes) -> CallbackDelivery:
                extra = {
                    "HTTP_" + k.upper().replace("-", "_"): v
                    for k, v in headers.items()
                    if k.lower() != "content-type"
                }
                response = client.post(
                    urlsplit(url).path, data=body, content_type="application/json", **extra
                )
                return CallbackDelivery(response.status_code, response.content.decode())

            emulator = emulator_server.emulator
            emulator.deliver = deliver
            emulator.robot_callback_url = "http://django.test/dingtalk/robot"
            emulator.card_callback_url = "http://django.test/dingtalk/card"
            drive_conversation(emulator)

            assert client.get("/healthz").json() == {"ok": True}
            wrong = client.get("/dingtalk/card")
            assert wrong.status_code == 405 and wrong["Allow"] == "POST"
            big = client.post(
                "/dingtalk/card", data=b"x" * (1024 * 1024 + 1), content_type="application/json"
            )
            assert big.status_code == 413
            forged = client.post(
                "/dingtalk/card",
                data=b"{}",
                content_type="application/json",
                HTTP_X_DDPAAS_SIGNATURE_TIMESTAMP="1",
                HTTP_X_DDPAAS_SIGNATURE="bad",
            )
            assert forged.status_code == 403
    finally:
        channel.close()
        pool.shutdown(wait=True, timeout=5)
        sys.modules.pop(module.__name__, None)
    # every pool task (agent run, projections, callbacks) was wrapped: before + after
    assert closes and len(closes) % 2 == 0
