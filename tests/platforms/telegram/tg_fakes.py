"""Fakes shared by the Telegram presenter tests."""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Any

from channelkit.core.types import (
    ChannelPromptOwner,
    ChannelUserQuestion,
    QuestionOption,
    SessionTarget,
)
from channelkit.platforms.telegram.ingress import TgCallbackQuery, TgChat, TgMessage, TgUser


class FakeApi:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent: list[dict[str, Any]] = []
        self.edits: list[dict[str, Any]] = []
        self.answers: list[tuple[str, str | None]] = []
        self.ids = itertools.count(100)
        self.fail_send_at: int | None = None
        self.fail_edits = False
        #: when set, send_message records the (now visible) message, then waits for it
        self.send_gate: threading.Event | None = None
        self.send_entered = threading.Event()

    def send_message(self, chat_id, text, *, reply_markup=None, message_thread_id=None):  # type: ignore[no-untyped-def]
        with self.lock:
            if self.fail_send_at is not None and len(self.sent) == self.fail_send_at:
                raise RuntimeError("send failed")
            mid = next(self.ids)
            self.sent.append(
                {
                    "chat_id": chat_id,
                    "text": text,
                    "reply_markup": reply_markup,
                    "message_thread_id": message_thread_id,
                    "message_id": mid,
                }
            )
            gate = self.send_gate
        if gate is not None:
            self.send_entered.set()
            assert gate.wait(5)
        return mid

    def edit_message_text(self, chat_id, message_id, text, *, reply_markup=None):  # type: ignore[no-untyped-def]
        with self.lock:
            self.edits.append(
                {
                    "chat_id": chat_id,
                    "message_id": message_id,
                    "text": text,
                    "reply_markup": reply_markup,
                }
            )
            if self.fail_edits:
                raise RuntimeError("edit failed")

    def answer_callback_query(self, callback_query_id, text=None):  # type: ignore[no-untyped-def]
        with self.lock:
            self.answers.append((callback_query_id, text))

    def send_chat_action(self, chat_id, action="typing", *, message_thread_id=None):  # type: ignore[no-untyped-def]
        pass


@dataclass
class FakeCtx:
    request_id: str = "req-1"
    session_id: str = "sess-1"
    run_id: str = "run-1"
    owner: ChannelPromptOwner = field(default_factory=lambda: ChannelPromptOwner("42"))
    target: SessionTarget = field(
        default_factory=lambda: SessionTarget("telegram", "42", "1001", None, False)
    )
    questions: tuple[ChannelUserQuestion, ...] = ()
    submit_option_id: str = "proceed_once"
    preceding_segment_id: str | None = None
    result: bool | Exception = True
    responses: list[Any] = field(default_factory=list)
    listeners: list[Any] = field(default_factory=list)
    respond_gate: threading.Event | None = None

    def on_settled(self, listener):  # type: ignore[no-untyped-def]
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener) if listener in self.listeners else None

    def respond(self, response):  # type: ignore[no-untyped-def]
        if self.respond_gate is not None:
            assert self.respond_gate.wait(5)
        self.responses.append(response)
        if isinstance(self.result, Exception):
            raise self.result
        return self.result

    def settle(self, reason: str) -> None:
        for listener in list(self.listeners):
            listener(reason)


def q(
    key: str, multi: bool = False, labels: tuple[str, ...] = ("Blue", "Green", "Red")
) -> ChannelUserQuestion:
    return ChannelUserQuestion(
        answer_key=key,
        header=f"H{key}",
        question=f"Question {key}?",
        options=tuple(QuestionOption(label, f"about {label}") for label in labels),
        multi_select=multi,
    )


_cq_ids = itertools.count(1)


def tap(
    data: str, *, user: int = 42, chat: int | str = 1001, message_id: int = 100
) -> TgCallbackQuery:
    return TgCallbackQuery(
        id=f"cq{next(_cq_ids)}",
        from_user=TgUser(id=user, first_name="x"),
        data=data,
        message=TgMessage(message_id=message_id, chat=TgChat(id=int(chat), type="private")),
    )
