"""Contract: the agent's image and file reach the chat byte for byte, after the text said
before them (`Turn.send_image`, `Turn.send_file`: the platform's native upload, sha256
compared through the emulator's download URL); a refused upload gives the person one
line naming the file; an upload failing once with a 5xx or a 429 is retried; a path outside the
agent's root is refused without being read (issue 25, outbound). A platform whose
uploads are not wired yet declares ``Capabilities.files_out`` with its reason and is
skipped with it, before its emulator starts."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from channelkit.agents import Turn
from channelkit.errors import AttachmentRefused, FileNotDelivered
from contract_drivers import DRIVERS, wait_for
from contract_harness import Context, open_platform

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 16
PDF = b"%PDF-1.7\n" + b"outbound " * 2000


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "out_ctx" in metafunc.fixturenames:
        metafunc.parametrize("out_ctx", sorted(DRIVERS), indirect=True, scope="module")


@pytest.fixture(scope="module")
def out_ctx(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Context]:
    reason = DRIVERS[request.param].caps.files_out
    if reason is not None:
        pytest.skip(f"{request.param} has no files out: {reason}")
    root = tmp_path_factory.mktemp("agent-root")
    (root / "chart.png").write_bytes(PNG)
    with open_platform(request.param) as context:
        context.agent.files_root = root
        yield context


def _file_views(ctx: Context) -> list[tuple[int, dict[str, Any]]]:
    """(position in the chat, file) of every file the bot's messages show, in order."""
    out = []
    for index, view in enumerate(ctx.driver.bot_views()):
        for file in view.get("files") or ():
            out.append((index, file))
    return out


def _view_text(view: dict[str, Any]) -> str:
    """A bot view's text (Feishu's card views call it ``content``)."""
    return str(view.get("text") or view.get("content") or "")


def _download(ctx: Context, file: dict[str, Any]) -> bytes:
    response = requests.get(f"{ctx.driver.pg.url}{file['url']}", timeout=10)
    assert response.status_code == 200, response.text
    return response.content


def _run(ctx: Context, fn: Any, text: str = "files please") -> Any:
    def record(turn: Turn) -> str | None:
        try:
            ctx.script.outcomes.put(fn(turn))
        except Exception as exc:
            ctx.script.outcomes.put(exc)
        return "done"

    ctx.script.fn = record
    ctx.driver.send(text)
    return _outcome(ctx)


def _outcome(ctx: Context) -> Any:
    """The agent's outcome; fake time passes meanwhile (rate-limit windows, retries)."""
    wait_for(lambda: not ctx.script.outcomes.empty(), "the agent's outcome", tick=ctx.driver.tick)
    return ctx.script.outcome()


def _reset(ctx: Context) -> None:
    ctx.driver.reset()


def test_an_image_and_a_file_reach_the_chat_byte_for_byte_after_the_text(
    out_ctx: Context,
) -> None:
    _reset(out_ctx)

    def fn(turn: Turn) -> list[str]:
        turn.say("Here is the chart.")
        ids = [turn.send_image("chart.png", caption="Q3 revenue")]
        ids.append(turn.send_file(PDF, name="report.pdf"))
        return ids

    ids = _run(out_ctx, fn)
    assert isinstance(ids, list) and all(isinstance(i, str) and i for i in ids), ids
    views = wait_for(lambda: len(_file_views(out_ctx)) == 2 and _file_views(out_ctx), "2 files")
    (first_at, image), (second_at, document) = views
    assert first_at < second_at
    if out_ctx.driver.caps.image_names is None:
        assert image["name"] == "chart.png"
    assert image["contentType"] == "image/png"
    assert document["name"] == "report.pdf" and document["contentType"] == "application/pdf"
    assert image["size"] == len(PNG) and document["size"] == len(PDF)
    assert hashlib.sha256(_download(out_ctx, image)).digest() == hashlib.sha256(PNG).digest()
    assert hashlib.sha256(_download(out_ctx, document)).digest() == hashlib.sha256(PDF).digest()
    # the text said before the files is shown before them, the final answer after
    wait_for(
        lambda: any("done" in _view_text(v) for v in out_ctx.driver.bot_views()),
        "the final answer",
        tick=out_ctx.driver.tick,
    )
    texts = [_view_text(v) for v in out_ctx.driver.bot_views()]
    said = next(i for i, t in enumerate(texts) if "Here is the chart." in t)
    done = max(i for i, t in enumerate(texts) if "done" in t)
    assert said < first_at < second_at < done, texts


def test_a_refused_upload_tells_the_person_the_files_name_and_why(out_ctx: Context) -> None:
    _reset(out_ctx)
    refusal = {"status": 400, "description": "Bad Request: file type not allowed"}
    answer = requests.post(f"{out_ctx.driver.pg.url}/_emulator/files/fail", json=refusal, timeout=5)
    assert answer.status_code == 200, answer.text

    error = _run(out_ctx, lambda turn: turn.send_file(PDF, name="refused.pdf"))
    assert isinstance(error, FileNotDelivered) and error.told and error.attempts == 1, error
    line = wait_for(
        lambda: next((t for t in out_ctx.driver.chat_texts() if "refused.pdf" in t), None),
        "the line naming the refused file",
    )
    assert "file type not allowed" in line
    assert _file_views(out_ctx) == []


@pytest.mark.parametrize(
    "fault",
    [
        {"status": 500, "description": "Internal Server Error"},
        {"status": 429, "description": "Too Many Requests: retry after 1"},
    ],
    ids=["500", "429"],
)
def test_an_upload_failing_once_is_retried(out_ctx: Context, fault: dict[str, Any]) -> None:
    _reset(out_ctx)
    answer = requests.post(f"{out_ctx.driver.pg.url}/_emulator/files/fail", json=fault, timeout=5)
    assert answer.status_code == 200, answer.text
    channel = out_ctx.driver.pg.channel

    def fn(turn: Turn) -> str:
        return turn.send_file(PDF, name="retried.pdf")

    out_ctx.script.fn = lambda turn: (out_ctx.script.outcomes.put(fn(turn)), "done")[1]
    out_ctx.driver.send("retry")
    if fault["status"] == 500 or out_ctx.driver.platform != "discord":
        # Discord's REST rate limiter answers a 429 itself, sending the upload again
        wait_for(lambda: channel.files.waiting == 1, "the retry booked")
    message_id = _outcome(out_ctx)
    assert isinstance(message_id, str) and message_id
    views = wait_for(lambda: _file_views(out_ctx), "the file in the chat")
    assert [f["name"] for _, f in views] == ["retried.pdf"]
    assert out_ctx.driver.emulator.bot_files.failed == 1  # the fault was met once
    assert hashlib.sha256(_download(out_ctx, views[0][1])).digest() == (
        hashlib.sha256(PDF).digest()
    )


def test_a_path_outside_the_root_is_refused_without_reading_it(
    out_ctx: Context, tmp_path: Path
) -> None:
    _reset(out_ctx)
    outside = tmp_path / "secret.key"
    outside.write_bytes(b"never read")
    outside.chmod(0)  # unreadable: opening it would fail, not refuse
    fifo = Path(out_ctx.agent.files_root) / "pipe"
    if not fifo.exists():
        os.mkfifo(fifo)  # opening a FIFO blocks: a refusal proves it was never opened
    kept_before = out_ctx.driver.emulator.bot_files.count

    def fn(turn: Turn) -> list[Any]:
        out = []
        for path in (str(outside), "../" + outside.name, "pipe"):
            try:
                turn.send_file(path)
                out.append("sent")
            except AttachmentRefused as exc:
                out.append(exc.reason)
        return out

    reasons = _run(out_ctx, fn)
    assert reasons[0] == "is outside the allowed root", reasons
    assert "'..'" in reasons[1] and reasons[2] == "is not a regular file", reasons
    wait_for(lambda: out_ctx.driver.pg.channel.wait_idle(0.2), "the run to end")
    assert out_ctx.driver.emulator.bot_files.count == kept_before  # nothing uploaded
    assert _file_views(out_ctx) == []
