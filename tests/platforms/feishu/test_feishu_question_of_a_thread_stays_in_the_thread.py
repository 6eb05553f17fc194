"""A question asked by a run of a Feishu thread stays in that thread: the form is a reply
(``reply_in_thread``) to the thread's message the channel names, and so is the plain-text
fallback when the form cannot be delivered. Outside a thread both go to the chat."""

from __future__ import annotations

from typing import Any

from channelkit.core.types import SessionTarget, UserInputPresentationResult
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.platforms.feishu.questions import QuestionPresenter
from feishu_helpers import FakeFeishu
from test_feishu_questions import FakeCtx

THREAD_MESSAGE = "om_in_thread"


def presenter(rt: Any, api: FeishuApi, texts: list[tuple[Any, ...]]) -> QuestionPresenter:
    def anchor(chat_id: str, thread_id: str | None) -> str | None:
        return THREAD_MESSAGE if (chat_id, thread_id) == ("oc_chat", "omt_1") else None

    return QuestionPresenter(
        api,
        clock=rt.clock,
        scheduler=rt.scheduler,
        submit=rt.serial.submit,
        send_text=lambda *args: texts.append(args),
        thread_anchor=anchor,
    )


def in_thread(request_id: str) -> FakeCtx:
    ctx = FakeCtx(request_id)
    ctx.target = SessionTarget("feishu", "ou_owner", "oc_chat", thread_id="omt_1")
    return ctx


def test_the_form_of_a_threads_request_replies_in_the_thread(
    rt: Any, fake: FakeFeishu, api: FeishuApi
) -> None:
    p = presenter(rt, api, [])
    assert p.present(in_thread("req-1")) is UserInputPresentationResult.PRESENTED
    (sent,) = fake.ops("send")
    assert sent.path.endswith(f"/messages/{THREAD_MESSAGE}/reply"), sent.path
    assert sent.body["reply_in_thread"] is True
    assert p.present(FakeCtx("req-2", run_id="run-2")) is UserInputPresentationResult.PRESENTED
    outside = fake.ops("send")[-1]
    assert outside.path.endswith("/messages") and outside.body["receive_id"] == "oc_chat"


def test_the_fallback_text_of_a_threads_request_goes_into_the_thread(
    rt: Any, fake: FakeFeishu, api: FeishuApi
) -> None:
    texts: list[tuple[Any, ...]] = []
    p = presenter(rt, api, texts)
    fake.fail.add("send")
    assert p.present(in_thread("req-1")) is UserInputPresentationResult.HANDLED
    assert p.present(FakeCtx("req-2", run_id="run-2")) is UserInputPresentationResult.HANDLED
    (chat, _, into), (chat_outside, _) = texts
    assert (chat, into) == ("oc_chat", THREAD_MESSAGE)
    assert chat_outside == "oc_chat"
