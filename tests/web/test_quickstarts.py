"""The quickstarts and platform guides run as written.

Two mechanisms:

* in process: the single Python block of docs/quickstart-flask.md and
  docs/quickstart-django.md is executed against an emulator, its callbacks routed into the
  Flask / Django test client;
* as a user would: every block marked ``<!-- runnable ... -->`` in a quickstart or a
  platform guide is run in a fresh directory, in order. ``runnable: file NAME`` writes
  the block to NAME, ``runnable`` runs it with bash to completion, ``runnable: server``
  starts it with bash and leaves it running (the guide's emulator, ``waitress-serve``,
  ``channelkit serve``), and ``runnable: setting`` is a Django setting appended to the
  project's settings and loaded. The only change to the text is the ports: 8000 (the
  app) and 8700 (the emulator) become free ports. The conversation is then held over
  HTTP through the emulator's control API (``/_emulator/...``), as the chat page does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import types
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from channelkit.playground import CallbackDelivery, DingtalkEmulator, EmulatorServer
from channelkit.testing import wait_until as poll_until
from dingtalk_conversation import APP_KEY, APP_SECRET, CARD_SECRET, click_until, wait_until

pytestmark = pytest.mark.slow  # many seconds of real time: its file starts first

DOCS = Path(__file__).resolve().parents[2] / "docs"
HTTP_WAIT = 30.0  # seconds a conversation step may take across the servers
POLL = 0.05  # the pause between polls of the emulator's HTTP state
RUNNABLE = re.compile(r"<!-- runnable(?::\s*(\w+)\s*([^>]*?))?\s*-->\n```[^\n]*\n(.*?)```", re.S)


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
        for channel in module.channels:
            channel.close()
            channel.pool.shutdown(wait=True, timeout=5)
        sys.modules.pop("quickstart_django_urls", None)


# -- as written: every runnable block, real processes, real HTTP ---------------------------

QUICKSTARTS = [
    ("quickstart-flask.md", "dingtalk"),
    ("quickstart-django.md", "dingtalk"),
    ("quickstarts/feishu-flask.md", "feishu"),
    ("quickstarts/feishu-django.md", "feishu"),
    ("quickstarts/telegram-flask.md", "telegram"),
    ("quickstarts/telegram-django.md", "telegram"),
]


def _runnable(page: str) -> list[tuple[str, str, str]]:
    """(kind, argument, text) of every runnable block of ``page``, in order."""
    text = (DOCS / page).read_text(encoding="utf-8")
    return [(kind or "run", arg.strip(), body) for kind, arg, body in RUNNABLE.findall(text)]


def _http(url: str, body: dict[str, Any] | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="GET" if data is None else "POST")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def _up(url: str) -> bool:
    try:
        _http(url)
    except (OSError, ValueError):
        return False
    return True


class _Run:
    """A directory, two free ports and the processes started there."""

    def __init__(self, cwd: Path) -> None:
        from channelkit.playground import free_port

        self.cwd = cwd
        self.app_port = free_port()
        self.emulator_port = free_port()
        while self.emulator_port == self.app_port:
            self.emulator_port = free_port()
        self.servers: list[subprocess.Popen[str]] = []
        bin_dir = str(Path(sys.executable).parent)
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("DINGTALK_", "FEISHU_", "TELEGRAM_"))
        }
        self.env["PATH"] = bin_dir + os.pathsep + self.env.get("PATH", "")
        self.env["PYTHONUNBUFFERED"] = "1"

    def ports(self, text: str) -> str:
        return text.replace("8000", str(self.app_port)).replace("8700", str(self.emulator_port))

    def play(self, page: str) -> None:
        for kind, arg, body in _runnable(page):
            body = self.ports(body)
            if kind == "file":
                target = self.cwd / arg
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(body, encoding="utf-8")
            elif kind == "run":
                done = subprocess.run(
                    ["bash", "-euo", "pipefail", "-c", body],
                    cwd=self.cwd,
                    env=self.env,
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                assert done.returncode == 0, f"{page}: {body}\n{done.stdout}{done.stderr}"
                self.outputs.append(done.stdout)
            elif kind == "server":
                path = self.cwd / f"server-{len(self.servers)}.log"
                log = path.open("w")
                server = subprocess.Popen(
                    ["bash", "-c", body],
                    cwd=self.cwd,
                    env=self.env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    text=True,
                    start_new_session=True,
                )
                self.servers.append(server)
                self.wait_said_something(server, path, f"{page}: {body.strip()}")
            elif kind == "setting":
                self.settings.append(body)

    outputs: list[str]
    settings: list[str]

    def wait_said_something(self, server: subprocess.Popen[str], log: Path, what: str) -> None:
        """Wait, as a person does before the next step, until a server just started has
        printed its first line (the emulator its URL, ``serve`` its channels) or exited:
        on a loaded machine the next block (``serve`` checking its credentials against
        the emulator) could otherwise start before the emulator listens."""
        deadline = time.monotonic() + 60
        while not log.read_text(errors="replace").strip() and server.poll() is None:
            assert time.monotonic() < deadline, f"{what} printed nothing in 60 s"
            time.sleep(0.05)

    def wait_up(self, url: str, what: str) -> None:
        deadline = time.monotonic() + 60
        while not _up(url):
            for server in self.servers:
                assert server.poll() is None, f"{what}: a server exited\n{self.logs()}"
            assert time.monotonic() < deadline, f"{what} did not come up\n{self.logs()}"
            time.sleep(0.1)

    def logs(self) -> str:
        return "\n".join(
            p.read_text(errors="replace") for p in sorted(self.cwd.glob("server-*.log"))
        )

    def stop(self) -> None:
        for server in self.servers:
            if server.poll() is None:
                os.killpg(server.pid, signal.SIGTERM)
        for server in self.servers:
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()


def _views(base: str) -> list[dict[str, Any]]:
    state = _http(f"{base}/_emulator/state")
    return [state["views"][e["card"]] for e in state["timeline"] if e["kind"] == "card"]


def _answer(question: dict[str, Any], wanted: str) -> dict[str, Any]:
    form: dict[str, Any] = {}
    for q in question["questions"]:
        options = [o for o in q["options"] if not o["value"].startswith("__")]
        pick = next((o for o in options if o["text"] == wanted), options[0])
        form[q["name"]] = [pick["value"]] if q["multi"] else pick["value"]
    return form


def _converse_http(base: str, platform: str, text: str, answer: str, expect: str) -> None:
    """Send ``text``, answer every question with ``answer`` (or the first option), and
    wait for a bot card or message containing ``expect``."""
    sent = _http(f"{base}/_emulator/send", {"text": text})
    assert sent["status"] == 200, sent
    if platform == "telegram":
        answered: set[str] = set()

        def tap_all() -> bool:
            for view in _views(base):
                if view["state"] != "pending" or not view.get("keyboard") or view["id"] in answered:
                    continue
                buttons = [b["text"] for row in view["keyboard"] for b in row]
                choices = [b for b in buttons if b not in ("Cancel", "Submit")]
                pick = answer if answer in choices else choices[0]
                action = f"{base}/_emulator/cards/{view['id']}/action"
                _http(action, {"action": "tap", "form": {"text": pick}})
                if "Submit" in buttons:
                    poll_until(
                        lambda card=view["id"]: _marked(base, card),
                        HTTP_WAIT,
                        POLL,
                        what="the choice to be marked",
                    )
                    _http(action, {"action": "tap", "form": {"text": "Submit"}})
                answered.add(view["id"])
            return any(expect in (v.get("text") or "") for v in _views(base))

        poll_until(tap_all, HTTP_WAIT, POLL, what=f"a message with {expect!r}")
        return
    question = poll_until(
        lambda: next((v for v in _views(base) if v["kind"] == "question"), None),
        HTTP_WAIT,
        POLL,
        what="the question",
    )
    form = _answer(question, answer)

    def submitted() -> bool:
        _http(f"{base}/_emulator/cards/{question['id']}/action", {"action": "submit", "form": form})
        try:  # a submit that raced the card's delivery is clicked again
            poll_until(
                lambda: _views_by_id(base)[question["id"]]["state"] == "submitted",
                1.0,
                POLL,
                what="the submitted state",
            )
        except AssertionError:
            return False
        return True

    poll_until(submitted, HTTP_WAIT, POLL, what="the question to be submitted")
    poll_until(
        lambda: any(
            v["kind"] == "status" and v["state"] == "completed" and expect in v["content"]
            for v in _views(base)
        ),
        HTTP_WAIT,
        POLL,
        what=f"a completed card with {expect!r}",
    )


def _marked(base: str, card: str) -> bool:
    keyboard = _views_by_id(base)[card]["keyboard"]
    return any(b["text"].startswith("✓") for row in keyboard for b in row)


def _views_by_id(base: str) -> dict[str, dict[str, Any]]:
    return dict(_http(f"{base}/_emulator/state")["views"])


@pytest.fixture()
def run(tmp_path: Path) -> Iterator[_Run]:
    if shutil.which("bash") is None:
        pytest.skip("bash is required to run the documented commands")
    pytest.importorskip("waitress")
    current = _Run(tmp_path)
    current.outputs, current.settings = [], []
    try:
        yield current
    finally:
        current.stop()


@pytest.mark.parametrize(("page", "platform"), QUICKSTARTS, ids=[p for p, _ in QUICKSTARTS])
def test_quickstart_runs_as_written(run: _Run, page: str, platform: str) -> None:
    pytest.importorskip("django" if "django" in page else "flask")
    guide = [
        b
        for b in _runnable(f"platforms/{platform}.md")
        if b[1] == "emulator.py" or b[2].strip() == "python emulator.py"
    ]
    assert len(guide) == 2, f"platforms/{platform}.md must show emulator.py and how to run it"
    for kind, arg, body in guide:
        if kind == "file":
            (run.cwd / arg).write_text(run.ports(body), encoding="utf-8")
        else:
            run.servers.append(
                subprocess.Popen(
                    ["bash", "-c", run.ports(body)],
                    cwd=run.cwd,
                    env=run.env,
                    stdout=(run.cwd / "server-emulator.log").open("w"),
                    stderr=subprocess.STDOUT,
                    text=True,
                    start_new_session=True,
                )
            )
    emulator = f"http://127.0.0.1:{run.emulator_port}"
    run.wait_up(f"{emulator}/_emulator/state", "the emulator")
    run.play(page)
    assert any(kind == "server" for kind, _, _ in _runnable(page)), "no server start command"
    run.wait_up(f"http://127.0.0.1:{run.app_port}/healthz", "the app server")
    _converse_http(emulator, platform, "ship it", "Shanghai", "Deploying to Shanghai.")
    if "django" in page:
        (setting,) = run.settings
        with (run.cwd / "mysite" / "settings.py").open("a", encoding="utf-8") as settings:
            settings.write("\n" + setting)
        check = (
            "import os, django\n"
            "os.environ['DJANGO_SETTINGS_MODULE'] = 'mysite.settings'\n"
            "django.setup()\n"
            "from channelkit.web.django.urls import urlpatterns\n"
            "print(sorted(str(p.pattern) for p in urlpatterns))\n"
            "os._exit(0)\n"
        )
        env = dict(run.env)
        for line in next(b for k, _, b in _runnable(page) if k == "server").splitlines():
            if line.startswith("export "):
                for pair in line[len("export ") :].split():
                    name, _, value = pair.partition("=")
                    env[name] = run.ports(value)
        done = subprocess.run(
            [sys.executable, "-c", check],
            cwd=run.cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert "healthz" in done.stdout, done.stdout


@pytest.mark.parametrize("platform", ["dingtalk", "feishu", "telegram"])
def test_platform_guide_playground_path_runs_as_written(run: _Run, platform: str) -> None:
    """The guide's emulator.py, channelkit.json, check-config and serve, then the demo."""
    run.play(f"platforms/{platform}.md")
    assert any(out.startswith("ok: 1 channel(s)") for out in run.outputs), run.outputs
    emulator = f"http://127.0.0.1:{run.emulator_port}"
    run.wait_up(f"{emulator}/_emulator/state", "the emulator")
    run.wait_up(f"http://127.0.0.1:{run.app_port}/healthz", "channelkit serve")
    _converse_http(emulator, platform, "hello", "Green", "You picked")
