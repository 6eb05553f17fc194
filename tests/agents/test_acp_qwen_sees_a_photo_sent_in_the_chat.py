"""A photo a person sends in the chat reaches the real Qwen Code CLI as an ACP ``image``
content block, and Qwen Code hands it to the model: the chat-completions request the
scripted model server receives carries it as an ``image_url`` part whose ``data:`` URL
holds the very bytes sent. A PDF goes as a ``resource_link`` with a line naming its local
path; Qwen Code resolves a ``file://`` link only inside its own workspace and drops this
one (the run's files live outside it), so the line is what reaches the model.

Qwen Code (0.24) advertises ``promptCapabilities`` image, audio and embeddedContext, and
passes images on only to a model it takes for a vision model, which it decides from the
model's name; so the scripted model is called ``qwen-vl-scripted`` here (with a name it
does not know, Qwen Code replaces the image with the text ``[image: image/png]``).

The chat is the Telegram playground (real HTTP, webhook ingress); one scripted server,
one Qwen Code process and one playground serve the module (issue 25).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from acp_testkit import QWEN_UNAVAILABLE, qwen_command, qwen_env
from channelkit.agents.acp import PromptCapabilities
from channelkit.attachments import Workspaces
from channelkit.playground import Playground
from channelkit.testing import wait_until
from openai_script_server import ScriptedOpenAIServer, ScriptedReply, _content_text

pytestmark = pytest.mark.acp_real

TURN_TIMEOUT = 90.0  # a real agent's turn on a loaded 2-core CI machine
VISION_MODEL = "qwen-vl-scripted"  # a name Qwen Code takes for a vision model
ANSWER = "I can see the picture."

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4  # sniffed as image/png
PDF = b"%PDF-1.7\n" + b"quarterly figures " * 50


def _answer(body: Mapping[str, Any]) -> ScriptedReply:
    return ScriptedReply(chunks=(ANSWER,))


@dataclass
class Chat:
    server: ScriptedOpenAIServer
    bridge: Any
    playground: Playground
    files: Path


@pytest.fixture(scope="module")
def chat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chat]:
    if QWEN_UNAVAILABLE:
        pytest.skip(f"real ACP agent unavailable: {QWEN_UNAVAILABLE}")
    from channelkit.agents.acp import AcpBridge

    root = tmp_path_factory.mktemp("qwen-photo")
    workdir = root / "work"
    workdir.mkdir()
    with ScriptedOpenAIServer(responder=_answer, model=VISION_MODEL) as server:
        bridge = AcpBridge(
            qwen_command(server.base_url, server.model),
            cwd=workdir,
            env=qwen_env(root / "home"),
            request_timeout=60.0,
            prompt_timeout=120.0,
            close_timeout=5.0,
        )
        try:
            with Playground(platform="telegram", agent=bridge, ingress="webhook") as pg:
                pg.channel.workspaces = Workspaces(root / "files", remove_at_exit=False)
                yield Chat(server, bridge, pg, root / "files")
        finally:
            bridge.close()


def _send(chat: Chat, text: str, name: str, content_type: str, data: bytes) -> None:
    body = {
        "text": text,
        "files": [
            {"name": name, "contentType": content_type, "base64": base64.b64encode(data).decode()}
        ],
    }
    response = requests.post(f"{chat.playground.url}/_emulator/send", json=body, timeout=10)
    assert response.status_code == 200, response.text


def _user_parts(chat: Chat, marker: str) -> list[Any] | None:
    """The content parts of the model request whose last message is the person's
    prompt containing ``marker`` (None until Qwen Code sent it)."""
    for body in list(chat.server.requests):
        messages = body.get("messages") or []
        if not messages or not body.get("tools"):
            continue  # the agent's own side queries
        last = messages[-1]
        content = last.get("content")
        parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
        if last.get("role") == "user" and marker in _content_text(parts):
            return list(parts)
    return None


def _wait(chat: Chat, predicate: Any, what: str) -> Any:
    try:
        return wait_until(predicate, TURN_TIMEOUT, 0.05, what=what)
    except AssertionError as exc:
        stderr = "\n".join(chat.bridge.stderr_tail()[-40:])
        raise AssertionError(f"{exc}\n--- qwen stderr:\n{stderr}") from None


def _answered(chat: Chat, count: int) -> bool:
    state = requests.get(f"{chat.playground.url}/_emulator/state", timeout=10).json()
    texts = [
        state["views"][entry["card"]].get("text", "")
        for entry in state["timeline"]
        if entry["kind"] == "card"
    ]
    return sum(ANSWER in text for text in texts) >= count


def _no_files_left(chat: Chat) -> bool:
    return not any(path.is_file() for path in chat.files.rglob("*"))


def test_a_photo_reaches_the_model_as_an_image_part(chat: Chat) -> None:
    _send(chat, "What is in this picture?", "cat.png", "image/png", PNG)
    parts = _wait(chat, lambda: _user_parts(chat, "What is in this picture?"), "the model request")
    images = [part for part in parts if part.get("type") == "image_url"]
    assert len(images) == 1, parts
    url = images[0]["image_url"]["url"]
    prefix = "data:image/png;base64,"
    assert url.startswith(prefix), url[:80]
    assert base64.b64decode(url[len(prefix) :]) == PNG  # the very bytes sent
    # the image went as a block, not as a line naming a path
    assert "saved at" not in _content_text(parts)
    assert chat.bridge.prompt_capabilities() == PromptCapabilities(
        image=True, audio=True, embedded_context=True
    )
    _wait(chat, lambda: _answered(chat, 1), "the model's answer in the chat")
    _wait(chat, lambda: _no_files_left(chat), "the run's files removed")


def test_a_pdf_reaches_the_model_as_the_line_naming_its_path(chat: Chat) -> None:
    _send(chat, "Summarize this report", "q3.pdf", "application/pdf", PDF)
    parts = _wait(chat, lambda: _user_parts(chat, "Summarize this report"), "the model request")
    text = _content_text(parts)
    line = re.search(
        r"\[Attachment 'q3\.pdf' \(application/pdf, (\d+) bytes\) saved at (\S+)\]", text
    )
    assert line is not None, text[-2000:]
    assert int(line.group(1)) == len(PDF)
    assert line.group(2).startswith(str(chat.files)), line.group(2)
    # Qwen Code dropped the resource link itself (outside its workspace): no file part
    assert [part.get("type") for part in parts] == ["text"] * len(parts), parts
    _wait(chat, lambda: _answered(chat, 2), "the model's answer in the chat")
