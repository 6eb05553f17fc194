"""Contract: a photo and a file a person sends reach the agent byte for byte
(`turn.attachments`, sha256), a file alone starts a run, and the run's files are gone
when it ends (issue 25). A platform whose inbound attachments are not wired yet declares
``Capabilities.attachments_in`` with its reason and is skipped with it, before its
emulator starts."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from channelkit.agents import Turn
from channelkit.attachments import Workspaces
from contract_drivers import DRIVERS, wait_for
from contract_harness import Context, open_platform

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 32
PDF = b"%PDF-1.7\n" + b"contract " * 3000


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "files_ctx" in metafunc.fixturenames:
        metafunc.parametrize("files_ctx", sorted(DRIVERS), indirect=True, scope="module")


@pytest.fixture(scope="module")
def files_ctx(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Context]:
    reason = DRIVERS[request.param].caps.attachments_in
    if reason is not None:
        pytest.skip(f"{request.param} has no attachments in: {reason}")
    with open_platform(request.param) as context:
        channel = context.driver.pg.channel
        channel.workspaces = Workspaces(tmp_path_factory.mktemp("files"), remove_at_exit=False)
        yield context


def _send(ctx: Context, text: str | None, *files: tuple[str, str, bytes], **origin: Any) -> None:
    body: dict[str, Any] = {
        "files": [
            {"name": n, "contentType": t, "base64": base64.b64encode(d).decode()}
            for n, t, d in files
        ],
        **origin,
    }
    if text is not None:
        body["text"] = text
    response = requests.post(f"{ctx.driver.pg.url}/_emulator/send", json=body, timeout=10)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == 200, response.json()


def _record(ctx: Context) -> None:
    def fn(turn: Turn) -> str:
        ctx.script.outcomes.put(
            {
                "text": turn.text,
                "files": [
                    (f.content_type, hashlib.sha256(f.open().read()).hexdigest())
                    for f in turn.attachments
                ],
                "paths": [f.path for f in turn.attachments],
            }
        )
        return "got it"

    ctx.script.fn = fn


def _removed(ctx: Context, paths: list[Path]) -> None:
    channel = ctx.driver.pg.channel
    wait_for(lambda: channel.wait_idle(0.2), "the run to end")
    wait_for(lambda: not any(p.exists() for p in paths), "the run's files removed")
    assert channel.workspaces.live == 0


def test_a_photo_and_a_file_reach_the_agent_byte_for_byte(files_ctx: Context) -> None:
    _record(files_ctx)
    _send(files_ctx, "two files", ("a.png", "image/png", PNG), ("b.pdf", "application/pdf", PDF))
    # one message with both files, or (Telegram) a message per file: one run each
    received = [files_ctx.script.outcome()]
    while sum(len(r["files"]) for r in received) < 2:
        received.append(files_ctx.script.outcome())
    files = sorted(f for r in received for f in r["files"])
    assert files == sorted(
        [
            ("image/png", hashlib.sha256(PNG).hexdigest()),
            ("application/pdf", hashlib.sha256(PDF).hexdigest()),
        ]
    )
    assert "two files" in [r["text"] for r in received]
    _removed(files_ctx, [p for r in received for p in r["paths"]])


def test_a_file_alone_starts_a_run(files_ctx: Context) -> None:
    _record(files_ctx)
    _send(files_ctx, None, ("only.pdf", "application/pdf", PDF))
    received = files_ctx.script.outcome()
    assert received["text"] == ""
    assert received["files"] == [("application/pdf", hashlib.sha256(PDF).hexdigest())]
    _removed(files_ctx, received["paths"])


def test_in_a_group_only_a_file_addressed_to_the_bot_starts_a_run(files_ctx: Context) -> None:
    if files_ctx.driver.caps.groups is not None:
        pytest.skip(files_ctx.driver.caps.groups)
    _record(files_ctx)
    # a teammate's picture that does not address the bot is not for it...
    _send(files_ctx, None, ("quiet.png", "image/png", PNG), group=True)
    # ...the one that mentions it is (sent after: a run for the first would come first)
    _send(files_ctx, "look", ("asked.png", "image/png", PNG), group=True, mentionsBot=True)
    received = files_ctx.script.outcome()
    assert received["text"] == "look"
    assert received["files"] == [("image/png", hashlib.sha256(PNG).hexdigest())]
    _removed(files_ctx, received["paths"])
