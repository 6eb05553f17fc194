"""A scripted OpenAI-compatible chat-completions server for driving real agents offline.

``ScriptedOpenAIServer`` listens on 127.0.0.1 (stdlib ``http.server`` in a thread) and
answers ``POST /v1/chat/completions`` (streaming SSE ``chat.completion.chunk`` events or a
plain JSON completion) and ``GET /v1/models``. What it answers is decided per request by a
*responder*: a callable receiving the parsed request body and returning a
:class:`ScriptedReply` (text chunks and optionally one tool call). Every request body is
recorded in ``server.requests``.

:func:`question_flow_responder` is the default script used by the real-agent tests:

1. a request whose last message is a user prompt containing the trigger ("ask me") and
   that offers the ``ask_user_question`` tool streams some text, then calls
   ``ask_user_question`` with the configured questions;
2. the request whose last message is that tool's result streams a continuation that
   quotes the answers the agent reported back;
3. anything else (title generation, side queries without tools) gets a short text.

A reply can *stall*: with ``ScriptedReply(hold=threading.Event())`` the stream stops after
its first text chunk and stays open until the event is set (or the server stops), so the
agent's turn is in flight for as long as a test needs (e.g. to kill the agent mid-run).
``server.wait_holding(timeout, match)`` blocks until the stream of a request ``match``
accepts is on hold.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "DEFAULT_QUESTIONS",
    "ScriptedOpenAIServer",
    "ScriptedReply",
    "ToolCall",
    "last_message",
    "question_flow_responder",
    "tool_result_text",
]

ASK_TOOL = "ask_user_question"

#: Two questions: one single-select, one multi-select (the shape Qwen Code's
#: ``ask_user_question`` tool validates: header/question/options{label,description}/multiSelect).
DEFAULT_QUESTIONS: list[dict[str, Any]] = [
    {
        "header": "Color",
        "question": "Which color should the widget use?",
        "options": [
            {"label": "Blue", "description": "Calm and neutral"},
            {"label": "Green", "description": "Fresh and bright"},
        ],
        "multiSelect": False,
    },
    {
        "header": "Extras",
        "question": "Which extras do you want?",
        "options": [
            {"label": "Tests", "description": "Add unit tests"},
            {"label": "Docs", "description": "Write documentation"},
            {"label": "Bench", "description": "Add a benchmark"},
        ],
        "multiSelect": True,
    },
]


@dataclass
class ToolCall:
    """One function call the scripted model makes."""

    name: str
    arguments: Mapping[str, Any]
    call_id: str = "call_ask_1"


@dataclass
class ScriptedReply:
    """What the scripted model answers to one request."""

    chunks: Sequence[str] = ()
    tool_call: ToolCall | None = None
    #: when given, the stream stops after the first text chunk until this is set
    hold: threading.Event | None = None


Responder = Callable[[Mapping[str, Any]], ScriptedReply]


def _tool_names(body: Mapping[str, Any]) -> set[str]:
    names: set[str] = set()
    for tool in body.get("tools") or ():
        fn = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
            names.add(fn["name"])
    return names


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return ""


def last_message(body: Mapping[str, Any]) -> Mapping[str, Any]:
    """The request's last message ({} when there is none)."""
    messages = body.get("messages") or ()
    if messages and isinstance(messages[-1], Mapping):
        return messages[-1]
    return {}


def tool_result_text(body: Mapping[str, Any], call_id_prefix: str) -> str | None:
    """The content of the final message when it is a tool result for one of our calls."""
    message = last_message(body)
    call_id = message.get("tool_call_id")
    if message.get("role") == "tool" and str(call_id or "").startswith(call_id_prefix):
        return _content_text(message.get("content"))
    return None


def question_flow_responder(
    *,
    trigger: str = "ask me",
    pre_chunks: Sequence[str] = ("Let me check ", "a couple of things ", "first."),
    questions: Sequence[Mapping[str, Any]] = tuple(DEFAULT_QUESTIONS),
    continuation_prefix: str = "Thanks! Continuing with: ",
    call_id_prefix: str = "call_ask_",
) -> Responder:
    """The script described in the module docstring.

    Only a request whose last message is the user's prompt containing ``trigger``
    (case-insensitive) asks the question; the agent's own side requests (memory
    extraction, next-prompt suggestions, titles) get a short ``ok``.
    """
    counter = itertools.count(1)

    def respond(body: Mapping[str, Any]) -> ScriptedReply:
        result = tool_result_text(body, call_id_prefix)
        if result is not None:
            return ScriptedReply(chunks=(continuation_prefix, " ".join(result.split()), " Done."))
        message = last_message(body)
        text = _content_text(message.get("content")).lower()
        if (
            message.get("role") == "user"
            and trigger.lower() in text
            and ASK_TOOL in _tool_names(body)
        ):
            return ScriptedReply(
                chunks=tuple(pre_chunks),
                tool_call=ToolCall(
                    ASK_TOOL, {"questions": list(questions)}, f"{call_id_prefix}{next(counter)}"
                ),
            )
        return ScriptedReply(chunks=("ok",))

    return respond


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            model = self.server.owner.model
            self._send_json(
                200,
                {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "x"}]},
            )
        else:
            self._send_json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send_json(400, {"error": {"message": "bad json"}})
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(404, {"error": {"message": "not found"}})
            return
        owner = self.server.owner
        reply = owner.record_and_reply(body)
        model = body.get("model") or owner.model
        if body.get("stream"):
            self._stream(body, reply, model)
        else:
            self._send_json(200, owner.completion(reply, model))

    def _stream(self, body: Mapping[str, Any], reply: ScriptedReply, model: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        owner = self.server.owner
        try:
            for index, event in enumerate(owner.chunk_events(reply, model)):
                self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
                self.wfile.flush()
                if index == 1 and reply.hold is not None:  # after the first text chunk
                    owner.hold_stream(reply.hold, body)
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except OSError:  # the agent went away mid-stream (e.g. it was killed)
            self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: ScriptedOpenAIServer


@dataclass
class ScriptedOpenAIServer:
    """Start with ``start()`` (or as a context manager); ``base_url`` ends in ``/v1``."""

    responder: Responder = field(default_factory=question_flow_responder)
    model: str = "scripted-model"
    requests: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self._seq = 0
        self._holds: list[threading.Event] = []
        self._holding = threading.Condition(self._lock)
        self._held: list[Mapping[str, Any]] = []  # the requests whose streams were held

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> ScriptedOpenAIServer:
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release_holds()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None

    def __enter__(self) -> ScriptedOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- helpers used by the handler ------------------------------------------------
    def record_and_reply(self, body: dict[str, Any]) -> ScriptedReply:
        with self._lock:
            self.requests.append(body)
            self._seq += 1
        return self.responder(body)

    def hold_stream(self, hold: threading.Event, body: Mapping[str, Any]) -> None:
        """Block a streaming handler until ``hold`` is set (called by the handler)."""
        with self._lock:
            self._holds.append(hold)
            self._held.append(body)
            self._holding.notify_all()
        try:
            hold.wait()
        finally:
            with self._lock:
                self._holds.remove(hold)

    def release_holds(self) -> None:
        """Let every stalled stream go on (a stream whose agent died just ends)."""
        with self._lock:
            holds = list(self._holds)
        for hold in holds:
            hold.set()

    def wait_holding(
        self, timeout: float, match: Callable[[Mapping[str, Any]], bool] = lambda body: True
    ) -> bool:
        """True once the stream answering a request ``match`` accepts was put on hold
        (False after ``timeout`` seconds)."""
        with self._holding:
            return self._holding.wait_for(lambda: any(map(match, self._held)), timeout)

    def chat_requests_with_tools(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.requests if r.get("tools")]

    def _next_id(self) -> str:
        with self._lock:
            self._seq += 1
            return f"chatcmpl-{self._seq}"

    def chunk_events(self, reply: ScriptedReply, model: str) -> list[dict[str, Any]]:
        cid = self._next_id()
        created = int(time.time())

        def event(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        events = [event({"role": "assistant", "content": ""})]
        events += [event({"content": chunk}) for chunk in reply.chunks]
        if reply.tool_call is not None:
            args = json.dumps(reply.tool_call.arguments)
            events.append(
                event(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": reply.tool_call.call_id,
                                "type": "function",
                                "function": {"name": reply.tool_call.name, "arguments": args},
                            }
                        ]
                    }
                )
            )
            last = event({}, "tool_calls")
        else:
            last = event({}, "stop")
        last["usage"] = {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
        events.append(last)
        return events

    def completion(self, reply: ScriptedReply, model: str) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(reply.chunks)}
        finish = "stop"
        if reply.tool_call is not None:
            finish = "tool_calls"
            message["tool_calls"] = [
                {
                    "id": reply.tool_call.call_id,
                    "type": "function",
                    "function": {
                        "name": reply.tool_call.name,
                        "arguments": json.dumps(reply.tool_call.arguments),
                    },
                }
            ]
        return {
            "id": self._next_id(),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
        }
