"""A run cut short by the process is never silent: ``channelkit serve`` (a real subprocess,
127.0.0.1 only) against each platform's emulator.

* SIGTERM mid-run: the run is stopped, and the person keeps what the agent wrote so far,
  marked stopped (issue 23, item 5).
* Telegram killed with SIGKILL mid-run, then started again: the run was recorded before
  the ``getUpdates`` offset moved past its update (in the Redis store with
  ``state.redis``; in the ``runJournal`` file with the in-memory store), so the new
  process tells the person the run was interrupted, once. Weixin the same.
* DingTalk (without a store), Feishu and Slack killed with SIGKILL mid-run: the run was
  recorded when it started (the ``runJournal`` file; Feishu with ``state.redis``: the
  store), so the restarted service tells the person once, and a third start nobody.
"""

from __future__ import annotations

import json
import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from channelkit.platforms import PlatformSpec, chat_platforms
from channelkit.playground import EmulatorServer
from channelkit.playground.ws_gateway import WsGateway
from channelkit.testing import wait_until
from serve_process import CommandProcess

pytestmark = pytest.mark.slow  # many seconds of real time: its file starts first

HERE = Path(__file__).resolve().parent
WAIT = 30.0  # generous bounds for a loaded 2-core machine; each case takes a few seconds
GRACE_S = 8.0
PARTIAL = "Working on it."

#: the ingress each platform uses here: long connections where it has one (no callback
#: URL to wire), Slack over the Events API
INGRESS = {"dingtalk": "stream", "feishu": "websocket", "slack": "events"}
EMULATOR_OPTIONS: dict[str, dict[str, Any]] = {
    "slack": {"ingress": "events"},
    "weixin": {"hold_seconds": 2.0},
}
#: how each platform shows that the run was stopped, beside the text the agent wrote:
#: a status card's terminal label or a marker after the text. DingTalk labels a card
#: "Stopped" only for the person's own Stop (seed rule: any other cancellation, this
#: shutdown included, reads "Cancelled"); the text is kept either way.
STOPPED_MARKERS: dict[str, tuple[str, ...]] = {
    "dingtalk": ("Cancelled",),
    "feishu": ('"state": "stopped"',),
    "slack": ("Stopped.",),
    "telegram": ("[stopped]",),
    "weixin": ("[stopped]",),
    "discord": ("*Stopped.*",),
}
#: platforms that show nothing of a run until it ends (the test waits for the agent)
SHOWS_NOTHING_WHILE_WRITING = frozenset({"weixin"})
#: channel options a platform needs here (DingTalk streams only into status cards)
OPTIONS: dict[str, dict[str, Any]] = {"dingtalk": {"interactiveCards": {"enabled": True}}}
#: channel options read from the running emulator: where its long connection goes
CONNECT_OPTIONS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "discord": lambda emulator: {"gatewayUrl": emulator.gateway.url},
}


def _served() -> list[PlatformSpec]:
    return [spec for spec in chat_platforms() if spec.playground is not None]


def _config(
    tmp_path: Path,
    spec: PlatformSpec,
    emulator: EmulatorServer,
    *,
    options: dict[str, Any] | None = None,
    state: dict[str, Any] | None = None,
) -> str:
    defaults = spec.playground
    assert defaults is not None
    channel_options = {
        defaults.api_base_url_option: emulator.url,
        "ingress": INGRESS.get(spec.name, spec.default_ingress),
        **CONNECT_OPTIONS.get(spec.name, lambda _: {})(emulator.emulator),
        **(options or {}),
    }
    doc: dict[str, Any] = {
        "channels": [
            {
                "platform": spec.name,
                "credentials": dict(defaults.credentials),
                "options": channel_options,
            }
        ],
        "agent": {"type": "function", "function": "slow_serve_agent:agent"},
        "options": {"logLevel": "WARNING"},
        "server": {"host": "127.0.0.1", "port": 0, "engine": "waitress"},
    }
    if state:
        doc["state"] = state
    path = tmp_path / "channelkit.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


def _start(config: str) -> tuple[CommandProcess, str]:
    serve = CommandProcess(
        ["serve", "--config", config, "--grace", str(GRACE_S)], pythonpath=[HERE]
    )
    try:
        url = serve.wait_for_line(r"listening on (http://127\.0\.0\.1:\d+)", WAIT).group(1)
    except BaseException:
        serve.kill()
        raise
    return serve, url


def _gateway(emulator: EmulatorServer) -> WsGateway | None:
    """The emulator's long-connection gateway (Feishu's, DingTalk's Stream), if any."""
    gateway = getattr(emulator.emulator, "gateway", None) or getattr(
        emulator.emulator, "stream", None
    )
    return gateway if isinstance(gateway, WsGateway) else None


def _accepted(emulator: EmulatorServer) -> int:
    """Long connections the emulator's gateway accepted so far (0 without one)."""
    gateway = _gateway(emulator)
    return int(gateway.counts.get("connections", 0)) if gateway is not None else 0


def _up(url: str, emulator: EmulatorServer, accepted_before: int, name: str) -> None:
    """Wait (bounded) until /healthz reports every long connection connected and, when
    the bot holds one, until the emulator's gateway holds it too: the client sees its
    handshake done a moment before the gateway's handler registers the connection, and
    an event sent in between would go over HTTP instead."""
    wait_until(lambda: _connected(url), WAIT, 0.1, what=f"{name}: /healthz connected")
    channels = requests.get(f"{url}/healthz", timeout=10).json().get("channels", {})
    holds_one = any(entry["connections"] for entry in channels.values())
    gateway = _gateway(emulator)
    if holds_one and gateway is not None:
        assert gateway.wait_connected(WAIT, connections=accepted_before + 1), name


def _connected(url: str) -> bool:
    """/healthz answers 200 with every long connection connected."""
    response = requests.get(f"{url}/healthz", timeout=10)
    channels = response.json().get("channels", {})
    return response.status_code == 200 and all(
        entry["ok"] and all(c["status"] == "connected" for c in entry["connections"])
        for entry in channels.values()
    )


def _seen(emulator: EmulatorServer) -> str:
    """Everything the emulator's page shows (messages, cards, their labels)."""
    return json.dumps(emulator.emulator.state(), ensure_ascii=False)


def _bot_texts(emulator: EmulatorServer) -> list[str]:
    """The Telegram bot's messages in the chat, in order (their current text)."""
    state = emulator.emulator.state()
    views = state.get("views") or {}
    return [
        str(views[entry["card"]]["text"])
        for entry in emulator.emulator.timeline()
        if entry.get("from") == "bot" and entry.get("card") in views
    ]


@pytest.fixture()
def emulator(request: pytest.FixtureRequest) -> Iterator[EmulatorServer]:
    name = request.param
    server = EmulatorServer(platform=name, **EMULATOR_OPTIONS.get(name, {}))
    try:
        yield server
    finally:
        server.close()


@pytest.mark.parametrize(
    ("name", "emulator"),
    [(spec.name, spec.name) for spec in _served() if spec.name in STOPPED_MARKERS],
    ids=[spec.name for spec in _served() if spec.name in STOPPED_MARKERS],
    indirect=["emulator"],
)
def test_sigterm_mid_run_keeps_the_partial_text_marked_stopped(
    name: str, emulator: EmulatorServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("waitress")
    said = tmp_path / "said"
    monkeypatch.setenv("CHANNELKIT_TEST_SAID", str(said))
    spec = next(spec for spec in _served() if spec.name == name)
    accepted = _accepted(emulator)
    serve, url = _start(_config(tmp_path, spec, emulator, options=OPTIONS.get(name)))
    try:
        if name == "slack":
            emulator.emulator.events_url = f"{url}/slack/events"
            emulator.emulator.interactivity_url = f"{url}/slack/interactivity"

        _up(url, emulator, accepted, name)
        emulator.emulator.send_user_message("please take your time")
        if name in SHOWS_NOTHING_WHILE_WRITING:
            wait_until(said.exists, WAIT, 0.05, what=f"{name}: the agent writing")
        else:
            wait_until(
                lambda: PARTIAL in _seen(emulator), WAIT, 0.05, what=f"{name}: the run streaming"
            )
        serve.signal(signal.SIGTERM)
        assert serve.wait(timeout=GRACE_S + 20) == 0, (serve.stdout, serve.stderr)
        seen = _seen(emulator)
        assert PARTIAL in seen, seen
        assert any(marker in seen for marker in STOPPED_MARKERS[name]), seen
        if name == "telegram":
            assert _bot_texts(emulator)[-1] == f"{PARTIAL}\n\n[stopped]", _bot_texts(emulator)
        views = (emulator.emulator.state().get("views") or {}).values()
        assert not any(v.get("streaming") for v in views), views  # every stream ended
        if name == "slack":  # the streamed message keeps its text, then "Stopped."
            (streamed,) = [v for v in views if PARTIAL in str(v.get("text"))]
            assert "Stopped" in str(streamed["text"]), streamed
        assert "Traceback" not in "".join(serve.stderr), serve.stderr
    finally:
        serve.kill()


def _redis_state(
    request: pytest.FixtureRequest, prefix: str, leases: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A ``state`` section on the session's real ``redis-server`` (a namespace of its
    own), with ``leases`` (the lease settings) beside ``redis``."""
    pytest.importorskip("redis")
    redis_server = request.getfixturevalue("redis_server")
    namespace = f"{prefix}-{uuid.uuid4().hex}"
    return {"redis": {"url": redis_server.url, "namespace": namespace}, **(leases or {})}


def _telegram() -> PlatformSpec:
    return next(spec for spec in _served() if spec.name == "telegram")


@pytest.mark.parametrize("where", ["memory-journal-file", "redis"])
def test_telegram_killed_mid_run_tells_the_person_after_a_restart(
    where: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """SIGKILL leaves no time to tell anybody: the restarted process does, once. With the
    in-memory store the record lives in the ``runJournal`` file (the choice documented on
    ``TelegramConfig.run_journal``); with ``state.redis`` in Redis."""
    pytest.importorskip("waitress")
    options: dict[str, Any] = {}
    state: dict[str, Any] | None = None
    if where == "redis":
        state = _redis_state(request, "tg")
    else:
        options["runJournal"] = str(tmp_path / "telegram-runs.json")
    server = EmulatorServer(platform="telegram")
    try:
        config = _config(tmp_path, _telegram(), server, options=options, state=state)
        first, _ = _start(config)
        try:
            server.emulator.send_user_message("please take your time")
            wait_until(lambda: PARTIAL in _seen(server), WAIT, 0.05, what="the first run streaming")
            # the update was confirmed: the next getUpdates asked past it
            wait_until(
                lambda: not server.emulator.pending_updates(), WAIT, 0.05, what="update confirmed"
            )
        finally:
            first.kill()  # SIGKILL to the process group: nothing runs after it
        assert first.proc.returncode == -signal.SIGKILL
        before = _bot_texts(server)
        assert not any("Interrupted" in text for text in before), before

        second, _ = _start(config)
        try:
            told = wait_until(
                lambda: [t for t in _bot_texts(server) if t == "Interrupted, please retry."],
                WAIT,
                0.05,
                what="the person told the run was interrupted",
            )
            assert len(told) == 1
            # nothing replays the run: the update stays confirmed, no second run starts
            assert not server.emulator.pending_updates()
            second.signal(signal.SIGTERM)
            assert second.wait(timeout=GRACE_S + 20) == 0, (second.stdout, second.stderr)
        finally:
            second.kill()
        assert [t for t in _bot_texts(server) if "Interrupted" in t] == told
        # a third start finds nothing left to tell
        third, _ = _start(config)
        try:  # once it polls, its start-up recovery is done
            wait_until(lambda: server.emulator.waiting_polls() > 0, WAIT, 0.05, what="polling")
            third.signal(signal.SIGTERM)
            assert third.wait(timeout=GRACE_S + 20) == 0, (third.stdout, third.stderr)
        finally:
            third.kill()
        assert [t for t in _bot_texts(server) if "Interrupted" in t] == told
    finally:
        server.close()


@pytest.mark.parametrize("where", ["memory-journal-file", "redis"])
def test_telegram_webhook_killed_mid_run_tells_the_person_after_a_restart(
    where: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """With webhook ingress nothing polls: the restarted process tells the person when it
    starts, once. With ``state.redis`` and no ``instanceName`` it cannot tell the killed
    process from a live one until that one's lease lapses (a short lease here)."""
    pytest.importorskip("waitress")
    options: dict[str, Any] = {"ingress": "webhook"}
    state: dict[str, Any] | None = None
    if where == "redis":
        state = _redis_state(request, "tg", {"leaseRenewSeconds": 0.5, "leaseExpirySeconds": 2.0})
    else:
        options["runJournal"] = str(tmp_path / "telegram-runs.json")
    server = EmulatorServer(platform="telegram")

    def start() -> CommandProcess:
        serve, url = _start(config)
        server.emulator.webhook_url = f"{url}/telegram/webhook"
        return serve

    def told() -> list[str]:
        return [t for t in _bot_texts(server) if t == "Interrupted, please retry."]

    try:
        config = _config(tmp_path, _telegram(), server, options=options, state=state)
        first = start()
        try:
            server.emulator.send_user_message("please take your time")
            wait_until(lambda: PARTIAL in _seen(server), WAIT, 0.05, what="the first run streaming")
        finally:
            first.kill()  # SIGKILL to the process group: nothing runs after it
        assert first.proc.returncode == -signal.SIGKILL
        assert told() == []

        second = start()
        try:
            wait_until(told, WAIT, 0.05, what="the person told the run was interrupted")
            second.signal(signal.SIGTERM)
            assert second.wait(timeout=GRACE_S + 20) == 0, (second.stdout, second.stderr)
        finally:
            second.kill()
        assert len(told()) == 1
        assert "Traceback" not in "".join(second.stderr), second.stderr
    finally:
        server.close()


def _weixin_told(emulator: EmulatorServer) -> list[dict[str, Any]]:
    return [
        entry
        for entry in emulator.emulator.timeline()
        if entry.get("from") == "bot" and entry.get("text") == "Interrupted, please retry."
    ]


@pytest.mark.parametrize("where", ["memory-journal-file", "redis"])
def test_weixin_killed_mid_run_tells_the_person_after_a_restart(
    where: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same on Weixin: the run is recorded before the getupdates cursor moves past
    its message; the next process that polls tells the person, once."""
    pytest.importorskip("waitress")
    options: dict[str, Any] = {}
    state: dict[str, Any] | None = None
    if where == "redis":
        state = _redis_state(request, "wx")
    else:
        options["runJournal"] = str(tmp_path / "weixin-runs.json")
    said = tmp_path / "said"
    monkeypatch.setenv("CHANNELKIT_TEST_SAID", str(said))
    spec = next(spec for spec in _served() if spec.name == "weixin")
    server = EmulatorServer(platform="weixin", **EMULATOR_OPTIONS["weixin"])
    try:
        config = _config(tmp_path, spec, server, options=options, state=state)
        first, url = _start(config)
        try:
            wait_until(lambda: _connected(url), WAIT, 0.1, what="/healthz connected")
            server.emulator.send_user_message("please take your time")
            wait_until(said.exists, WAIT, 0.05, what="the agent writing")
        finally:
            first.kill()  # SIGKILL to the process group: nothing runs after it
        assert first.proc.returncode == -signal.SIGKILL
        assert _weixin_told(server) == []
        said.unlink()

        second, _ = _start(config)
        try:
            wait_until(
                lambda: _weixin_told(server), WAIT, 0.05, what="the person told it was interrupted"
            )
            second.signal(signal.SIGTERM)
            assert second.wait(timeout=GRACE_S + 20) == 0, (second.stdout, second.stderr)
        finally:
            second.kill()
        assert len(_weixin_told(server)) == 1, server.emulator.timeline()
        if where == "redis":  # the shared dedup refuses the message fetched again
            assert not said.exists()
        # Without a store the new process starts from an empty cursor and dedup: the
        # emulator hands the message over again and a second run starts (left open).
    finally:
        server.close()


def _told(emulator: EmulatorServer) -> list[dict[str, Any]]:
    """The bot's "Interrupted, please retry." notices in the emulator's chat (a message
    entry's text, or the text of the card or post it shows)."""
    views = emulator.emulator.state().get("views") or {}
    return [
        entry
        for entry in emulator.emulator.timeline()
        if entry.get("from") == "bot"
        and "Interrupted, please retry."
        in json.dumps([entry, views.get(entry.get("card"))], ensure_ascii=False)
    ]


#: the SIGKILL + restart cases of the platforms without a polling cursor: the run is
#: recorded when it starts (in the ``runJournal`` file; with ``state.redis`` in the store,
#: DingTalk's in its cluster records) and forgotten when it ends
KILLED = (
    ("dingtalk", "file"),
    ("feishu", "file"),
    ("feishu", "redis"),
    ("slack", "file"),
    ("slack", "redis"),
    ("discord", "file"),
    ("discord", "redis"),
)
#: the ``state`` section's lease settings of the Redis cases: the restarted process finds
#: the killed one's lease still there; with the same ``instanceName`` it knows the runs
#: as its own and tells at once, without one it tells once that lease lapsed
REDIS_LEASES: dict[str, dict[str, Any]] = {
    "feishu": {"instanceName": "bot-a"},
    "slack": {"instanceName": "bot-a"},
    "discord": {"leaseRenewSeconds": 0.5, "leaseExpirySeconds": 2.0},
}


@pytest.mark.parametrize(
    ("name", "where", "emulator"),
    [(name, where, name) for name, where in KILLED],
    ids=[f"{name}-{where}" for name, where in KILLED],
    indirect=["emulator"],
)
def test_killed_mid_run_tells_the_person_after_a_restart(
    name: str,
    where: str,
    emulator: EmulatorServer,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    """DingTalk (without a store), Feishu, Slack and Discord forget an event once it was
    acknowledged: the run a SIGKILL cut off is found in the ``runJournal`` file (or the
    store) by the next process, which tells the person once (and nothing at the start
    after that)."""
    pytest.importorskip("waitress")
    spec = next(spec for spec in _served() if spec.name == name)
    options = {**OPTIONS.get(name, {}), "runJournal": str(tmp_path / f"{name}-runs.json")}
    state: dict[str, Any] | None = None
    if where == "redis":
        state = _redis_state(request, name, REDIS_LEASES.get(name))
    config = _config(tmp_path, spec, emulator, options=options, state=state)

    def start() -> CommandProcess:
        accepted = _accepted(emulator)
        serve, url = _start(config)
        if name == "slack":
            emulator.emulator.events_url = f"{url}/slack/events"
            emulator.emulator.interactivity_url = f"{url}/slack/interactivity"
        _up(url, emulator, accepted, name)
        return serve

    first = start()
    try:
        emulator.emulator.send_user_message("please take your time")
        wait_until(lambda: PARTIAL in _seen(emulator), WAIT, 0.05, what=f"{name}: run streaming")
    finally:
        first.kill()  # SIGKILL to the process group: nothing runs after it
    assert first.proc.returncode == -signal.SIGKILL
    assert _told(emulator) == []

    second = start()
    try:
        wait_until(lambda: _told(emulator), WAIT, 0.05, what=f"{name}: the person told")
        second.signal(signal.SIGTERM)
        assert second.wait(timeout=GRACE_S + 20) == 0, (second.stdout, second.stderr)
    finally:
        second.kill()
    assert len(_told(emulator)) == 1, emulator.emulator.timeline()
    if where == "redis":  # the store held the record, not the file
        assert not (tmp_path / f"{name}-runs.json").exists()
    assert "Traceback" not in "".join(second.stderr), second.stderr

    third = start()  # nothing is left to tell: the service's start-up recovery is done
    try:
        third.signal(signal.SIGTERM)
        assert third.wait(timeout=GRACE_S + 20) == 0, (third.stdout, third.stderr)
    finally:
        third.kill()
    assert len(_told(emulator)) == 1, emulator.emulator.timeline()
