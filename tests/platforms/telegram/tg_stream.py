"""Streaming test helpers: a real TelegramChannel on the Bot API mock, driven through
its output hooks with hand-made segments, every call recorded with its fake-clock time."""

from __future__ import annotations

import threading
from typing import Any

import requests_mock as rm
from channelkit.core import ChannelPromptOwner, OutputSegmentContext, SessionTarget
from channelkit.testing import ScriptedBridge

from tests.platforms.telegram.tg_env import CHAT, OWNER, Env, url

GROUP = -1005


def segment(run: str, seg: str = "", *, group: bool = False) -> OutputSegmentContext:
    chat = str(GROUP if group else CHAT)
    target = SessionTarget("telegram", str(OWNER), chat, None, group)
    return OutputSegmentContext(
        "telegram", f"s-{run}", run, seg or f"seg-{run}", ChannelPromptOwner(str(OWNER)), target
    )


class Recorder:
    """Answers ``sendMessageDraft`` / ``editMessageText`` (and ``sendMessage`` with ids) and
    records ``(method, fake time, body)``; ``replies[method]`` holds queued error answers
    ``(status, body)`` used before the next success."""

    def __init__(self, rt: Any, mock: rm.Mocker) -> None:
        self.rt = rt
        self.lock = threading.Lock()
        self.log: list[tuple[str, float, dict[str, Any]]] = []
        self.replies: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        self.next_id = 700
        for method in ("sendMessageDraft", "editMessageText", "sendMessage"):
            mock.post(url(method), json=self._answer(method))

    def fail_next(self, method: str, status: int, description: str, **params: Any) -> None:
        body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
        if params:
            body["parameters"] = params
        with self.lock:
            self.replies.setdefault(method, []).append((status, body))

    def _answer(self, method: str) -> Any:
        def respond(request: Any, context: Any) -> dict[str, Any]:
            body = request.json()
            with self.lock:
                self.log.append((method, self.rt.clock.now(), body))
                queued = self.replies.get(method)
                if queued:
                    status, error = queued.pop(0)
                    context.status_code = status
                    return error
                if method != "sendMessage":
                    return {"ok": True, "result": True}
                self.next_id += 1
                chat = {"id": int(body["chat_id"]), "type": "private"}
                return {"ok": True, "result": {"message_id": self.next_id, "date": 0, "chat": chat}}

        return respond

    def calls(self, method: str) -> list[tuple[float, dict[str, Any]]]:
        with self.lock:
            return [(at, body) for m, at, body in self.log if m == method]

    def texts(self, method: str) -> list[str]:
        return [body["text"] for _, body in self.calls(method)]


def channel(rt: Any, mock: rm.Mocker, **cfg: Any) -> tuple[Env, Recorder]:
    recorder = Recorder(rt, mock)
    return Env(rt, mock, ScriptedBridge([]), **cfg), recorder


def stream(env: Env, seg: OutputSegmentContext, chunks: list[str]) -> None:
    for chunk in chunks:
        env.channel.on_response_chunk(seg.target.chat_id, chunk, seg.session_id, seg)


def complete(env: Env, seg: OutputSegmentContext, text: str) -> None:
    env.channel.on_response_complete(seg.target.chat_id, text, seg.session_id, seg)
