"""docs/quickstart-flask.md and docs/quickstart-django.md: their code blocks run as written."""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from channelkit.playground import CallbackDelivery, DingtalkEmulator, EmulatorServer
from dingtalk_conversation import APP_KEY, APP_SECRET, CARD_SECRET, click_until, wait_until

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _code(name: str) -> str:
    text = (DOCS / name).read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 1, f"{name} must have exactly one python block"
    return blocks[0]


@pytest.fixture()
def emulator_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[EmulatorServer]:
    with EmulatorServer(
        app_key=APP_KEY,
        app_secret=APP_SECRET,
        api_secret=CARD_SECRET,
        robot_callback_url="http://app.test/dingtalk/robot",
        card_callback_url="http://app.test/dingtalk/card",
    ) as server:
        monkeypatch.setenv("DINGTALK_CLIENT_ID", APP_KEY)
        monkeypatch.setenv("DINGTALK_CLIENT_SECRET", APP_SECRET)
        monkeypatch.setenv("DINGTALK_CARD_SECRET", CARD_SECRET)
        monkeypatch.setenv("DINGTALK_API_BASE_URL", server.url)
        yield server


def _exec(name: str, module_name: str) -> types.ModuleType:
    module = types.ModuleType(module_name)
    module.__file__ = str(DOCS / name)
    sys.modules[module_name] = module
    exec(compile(_code(name), str(DOCS / name), "exec"), module.__dict__)
    return module


def _converse(emulator: DingtalkEmulator) -> None:
    _, ack = emulator.send_user_message("ship it")
    assert ack.status == 200

    def cards() -> list[dict[str, Any]]:
        state = emulator.state()
        return [state["views"][e["card"]] for e in state["timeline"] if e["kind"] == "card"]

    question = wait_until(
        lambda: next((c for c in cards() if c["kind"] == "question"), None), what="question"
    )
    click_until(emulator, question["id"], "submit", {"0": "Shanghai"}, until="submitted")
    final = wait_until(
        lambda: next(
            (c for c in cards()[2:] if c["kind"] == "status" and c["state"] == "completed"),
            None,
        ),
        what="the continuation card",
    )
    assert "Deploying to Shanghai." in final["content"]


def _deliver(post: Callable[[str, bytes, Mapping[str, str]], tuple[int, str]]) -> Any:
    def deliver(url: str, headers: Mapping[str, str], body: bytes) -> CallbackDelivery:
        status, text = post(urlsplit(url).path, body, headers)
        return CallbackDelivery(status, text)

    return deliver


def test_flask_quickstart_runs(emulator_env: EmulatorServer) -> None:
    pytest.importorskip("flask")
    module = _exec("quickstart-flask.md", "quickstart_flask_app")
    try:
        client = module.app.test_client()

        def post(path: str, body: bytes, headers: Mapping[str, str]) -> tuple[int, str]:
            response = client.post(path, data=body, headers=dict(headers))
            text = response.get_data(as_text=True)
            response.close()  # a server closes the response: deferred work starts now
            return response.status_code, text

        emulator = emulator_env.emulator
        emulator.deliver = _deliver(post)
        _converse(emulator)
    finally:
        module.channel.close()
        sys.modules.pop("quickstart_flask_app", None)


def test_django_quickstart_runs(emulator_env: EmulatorServer) -> None:
    pytest.importorskip("django")
    from test_web_frameworks import _django_settings

    _django_settings()
    from django.test import Client, override_settings

    module = _exec("quickstart-django.md", "quickstart_django_urls")
    try:
        with override_settings(ROOT_URLCONF="quickstart_django_urls"):
            client = Client(enforce_csrf_checks=True)

            def post(path: str, body: bytes, headers: Mapping[str, str]) -> tuple[int, str]:
                extra = {
                    "HTTP_" + k.upper().replace("-", "_"): v
                    for k, v in headers.items()
                    if k.lower() != "content-type"
                }
                response = client.post(path, data=body, content_type="application/json", **extra)
                return response.status_code, response.content.decode()

            emulator = emulator_env.emulator
            emulator.deliver = _deliver(post)
            _converse(emulator)
            assert client.get("/healthz").status_code == 200
    finally:
        module.channel.close()
        module.channel.pool.shutdown(wait=True, timeout=5)
        sys.modules.pop("quickstart_django_urls", None)
