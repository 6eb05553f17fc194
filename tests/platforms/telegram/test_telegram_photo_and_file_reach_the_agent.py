"""Over the Telegram emulator (real HTTP, webhook ingress): a photo and a file a person
sends reach a FunctionAgent byte for byte (`turn.attachments`, fetched with ``getFile``
and the file path; the photo's largest size, not its thumbnail); a file alone starts a
run; a file over the cap is told to the person once, never downloaded, and the run
goes on with a note; the run's files are gone when it ends, also after a Stop (issue 25)."""

from __future__ import annotations

import base64
import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from channelkit.agents.function import FunctionAgent, Turn
from channelkit.attachments import DownloadLimits, Workspaces
from channelkit.playground import Playground

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 64
PDF = b"%PDF-1.7\n" + b"quarterly figures " * 2000
OGG = b"OggS" + b"\x00" * 2000


class Turns:
    """What the agent saw, turn by turn (sha256 taken while the files exist)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.seen: list[dict[str, Any]] = []

    def agent(self, turn: Turn) -> str:
        record = {
            "text": turn.text,
            "session": turn.session_id,
            "files": [
                (f.name, f.content_type, f.size, hashlib.sha256(f.open().read()).hexdigest())
                for f in turn.attachments
            ],
            "paths": [f.path for f in turn.attachments],
        }
        with self.cond:
            self.seen.append(record)
            self.cond.notify_all()
        if turn.text == "wait":
            deadline = time.monotonic() + 20
            while not turn.cancelled and time.monotonic() < deadline:
                turn.wait_steered(0.05)
            return ""
        return f"received {len(turn.attachments)}"

    def wait(self, count: int) -> list[dict[str, Any]]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.seen) >= count, 20), self.seen
            return list(self.seen)


@pytest.fixture(scope="module")
def turns() -> Turns:
    return Turns()


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("attachments")


@pytest.fixture(scope="module")
def playground(turns: Turns, root: Path) -> Iterator[Playground]:
    with Playground(platform="telegram", agent=FunctionAgent(turns.agent), ingress="webhook") as pg:
        pg.channel.workspaces = Workspaces(root, remove_at_exit=False)
        yield pg


def _send(pg: Playground, text: str | None, *files: tuple[str, str, bytes]) -> dict[str, Any]:
    body: dict[str, Any] = {
        "files": [
            {"name": n, "contentType": t, "base64": base64.b64encode(d).decode()}
            for n, t, d in files
        ]
    }
    if text is not None:
        body["text"] = text
    response = requests.post(f"{pg.url}/_emulator/send", json=body, timeout=10)
    assert response.status_code == 200, response.text
    return dict(response.json())


def _calls(pg: Playground) -> list[dict[str, Any]]:
    response = requests.get(f"{pg.url}/_emulator/calls", timeout=5)
    return list(response.json()["calls"])


def _bot_texts(pg: Playground) -> list[str]:
    state = requests.get(f"{pg.url}/_emulator/state", timeout=5).json()
    return [
        state["views"][e["card"]].get("text", "") for e in state["timeline"] if e["kind"] == "card"
    ]


def _until(predicate: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def _idle(pg: Playground, root: Path) -> None:
    _until(lambda: pg.channel.run_stats["active"] == 0, "no run active")
    _until(lambda: _files(root) == [] and pg.channel.workspaces.live == 0, "workspaces removed")


def test_a_photo_and_a_file_reach_the_agent_byte_for_byte(
    playground: Playground, turns: Turns, root: Path
) -> None:
    before = len(turns.seen)
    _send(
        playground,
        "look at these",
        ("chart.png", "image/png", PNG),
        ("q3.pdf", "application/pdf", PDF),
    )
    seen = turns.wait(before + 2)[before:]
    # Telegram sends each file as its own message, the text as the first one's caption
    assert [s["text"] for s in seen] == ["look at these", ""]
    assert seen[0]["files"] == [
        ("photo.jpg", "image/png", len(PNG), hashlib.sha256(PNG).hexdigest())
    ]  # the full size, not the 64-byte thumbnail the update lists first
    assert seen[1]["files"] == [
        ("q3.pdf", "application/pdf", len(PDF), hashlib.sha256(PDF).hexdigest())
    ]
    paths = [c["path"] for c in _calls(playground)]
    assert paths.count("/bot<token>/getFile") >= 2
    assert any(p.startswith("/file/bot<token>/photos/") for p in paths)
    assert any(p.startswith("/file/bot<token>/documents/") for p in paths)
    _until(lambda: sum(t == "received 1" for t in _bot_texts(playground)) >= 2, "both answers")
    _idle(playground, root)
    assert all(not p.exists() for s in seen for p in s["paths"])


def test_a_voice_message_alone_starts_a_run(
    playground: Playground, turns: Turns, root: Path
) -> None:
    before = len(turns.seen)
    _send(playground, None, ("voice.ogg", "audio/ogg", OGG))
    (seen,) = turns.wait(before + 1)[before:]
    assert seen["text"] == ""
    assert seen["files"] == [("voice.ogg", "audio/ogg", len(OGG), hashlib.sha256(OGG).hexdigest())]
    _idle(playground, root)


def test_a_file_over_the_cap_is_told_once_never_read_and_the_run_goes_on(
    playground: Playground, turns: Turns, root: Path
) -> None:
    channel = playground.channel
    channel.attachment_limits = DownloadLimits(per_file=4096)
    try:
        before = len(turns.seen)
        served_before = dict(playground.emulator.file_bytes_served)
        _send(playground, "and this one", ("dump.bin", "application/octet-stream", b"\x01" * 9000))
        (seen,) = turns.wait(before + 1)[before:]
        assert seen["files"] == []
        assert seen["text"] == (
            "and this one\n\n[The person also sent 'dump.bin', which was not received: it is "
            "larger than the limit of 4 KB]"
        )
        notice = "dump.bin was not received: it is larger than the limit of 4 KB."
        _until(lambda: "received 0" in _bot_texts(playground), "the answer")
        _idle(playground, root)
        assert _bot_texts(playground).count(notice) == 1
        # refused on the declared size: not one byte of it was downloaded
        assert playground.emulator.file_bytes_served == served_before
    finally:
        channel.attachment_limits = DownloadLimits()


def test_the_runs_files_are_removed_after_a_stop(
    playground: Playground, turns: Turns, root: Path
) -> None:
    before = len(turns.seen)
    _send(playground, "wait", ("notes.pdf", "application/pdf", PDF))
    (seen,) = turns.wait(before + 1)[before:]
    path = seen["paths"][0]
    assert path.is_file() and path.is_relative_to(root)
    channel = playground.channel
    run_id = _until(lambda: channel.active_run_id(seen["session"]), "the live run")
    assert channel.cancel_run(seen["session"], run_id)
    _until(lambda: not path.exists(), "the file removed after the Stop")
    _idle(playground, root)
