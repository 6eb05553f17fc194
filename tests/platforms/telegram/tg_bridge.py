"""A small scripted AgentBridge for adapter tests (Telegram and Weixin copies)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from channelkit.agents.base import AgentEventSink, PermissionOption, PermissionRequest

QUESTION_OPTIONS = (
    PermissionOption("proceed_once", "Submit", "allow_once"),
    PermissionOption("cancel", "Cancel", "reject_once"),
)
TOOL_OPTIONS = (
    PermissionOption("proceed_once", "Allow", "allow_once"),
    PermissionOption("cancel", "Deny", "reject_once"),
)

_ids = itertools.count(1)


class Turn:
    def __init__(
        self, bridge: ScriptBridge, session_id: str, sink: AgentEventSink, text: str
    ) -> None:
        self.bridge = bridge
        self.session_id = session_id
        self.sink = sink
        self.text = text
        self.said: list[str] = []

    def say(self, text: str) -> None:
        self.said.append(text)
        self.sink.text_chunk(self.session_id, text)

    def _request(self, tool_call: dict[str, Any], options: tuple[PermissionOption, ...]) -> Any:
        rid = f"req-{next(_ids)}"
        event = threading.Event()
        with self.bridge.lock:
            self.bridge.waiting[rid] = event
        self.sink.response_boundary(self.session_id)
        self.sink.permission_request(PermissionRequest(rid, self.session_id, tool_call, options))
        self.bridge.asked.set()
        assert event.wait(10), "no answer"
        return self.bridge.responses[rid]

    def ask(self, questions: list[dict[str, Any]]) -> Any:
        return self._request(
            {
                "title": "Question",
                "kind": "other",
                "_meta": {
                    "qwenInteractionKind": "user_question",
                    "qwenQuestions": questions,
                    "toolName": "ask_user_question",
                },
            },
            QUESTION_OPTIONS,
        )

    def permission(self, title: str) -> Any:
        return self._request(
            {"title": title, "kind": "execute", "_meta": {"toolName": "run_shell"}}, TOOL_OPTIONS
        )


class ScriptBridge:
    """``prompt`` runs ``script(turn)`` and returns what it returns."""

    def __init__(self, script: Callable[[Turn], str]) -> None:
        self.script = script
        self.lock = threading.Lock()
        self.waiting: dict[str, threading.Event] = {}
        self.responses: dict[str, Any] = {}
        self.respond_calls: list[tuple[str, Any]] = []
        self.cancelled: list[str] = []
        self.asked = threading.Event()

    def prompt(self, session_id: str, text: str, sink: AgentEventSink) -> str:
        return self.script(Turn(self, session_id, sink, text))

    def cancel_session(self, session_id: str) -> bool:
        self.cancelled.append(session_id)
        return True

    def respond_to_permission(self, request_id: str, response: Any) -> bool:
        with self.lock:
            self.respond_calls.append((request_id, response))
            event = self.waiting.pop(request_id, None)
            if event is None:
                return False
            self.responses[request_id] = response
        event.set()
        return True

    def close(self) -> None:
        pass


def question(header: str, labels: list[str], multi: bool = False) -> dict[str, Any]:
    return {
        "header": header,
        "question": f"{header}?",
        "options": [{"label": label, "description": f"about {label}"} for label in labels],
        "multiSelect": multi,
    }
