"""TelegramChannel end to end: real ChannelBase, webhook ingress, Bot API on requests-mock."""

from __future__ import annotations

import threading
from typing import Any

from channelkit.core import LifecycleEvent, LifecycleType
from channelkit.core.text import MSG_CANCELLED
from channelkit.platforms.telegram.adapter import BOT_COMMANDS
from channelkit.platforms.telegram.questions import TEXT_NOT_OWNER, parse_callback
from channelkit.testing import ScriptedBridge, ask, chunk, fail, final, gate, question_request, tool

from tests.platforms._shared import handed_to_pool, question
from tests.platforms.telegram.tg_env import CHAT, OWNER, Env, texts, url

# --- lifecycle: typing keep-alive ------------------------------------------------------


def test_started_starts_typing_and_terminal_stops(rt, mock) -> None:  # type: ignore[no-untyped-def]
    release = threading.Event()
    env = Env(rt, mock, ScriptedBridge([gate(release), chunk("done")]))
    assert env.message("hello") == 200
    # The run is blocked in the agent; typing was sent once.
    rt.wait_for(lambda: len(env.calls("sendChatAction")) == 1)
    assert env.calls("sendChatAction") == [{"chat_id": str(CHAT), "action": "typing"}]
    for expected in (2, 3):
        rt.clock.advance(4)  # every 4 s of fake time
        rt.wait_for(lambda n=expected: len(env.calls("sendChatAction")) == n)
    release.set()
    env.settle()
    assert texts(env)[-1] == "done"
    assert [e.type for e in env.channel.events][-1] is LifecycleType.COMPLETED
    rt.advance(4)
    rt.advance(4)
    assert len(env.calls("sendChatAction")) == 3
    assert env.channel.typing.active_chats() == 0
    env.channel.close()


def test_failed_run_stops_typing(rt, mock) -> None:  # type: ignore[no-untyped-def]
    release = threading.Event()
    env = Env(rt, mock, ScriptedBridge([gate(release), fail(RuntimeError("agent crashed"))]))
    env.message("hello")
    rt.wait_for(lambda: len(env.calls("sendChatAction")) == 1)
    release.set()
    env.settle()
    assert env.channel.events[-1].type is LifecycleType.FAILED
    assert env.channel.typing.active_chats() == 0 and rt.scheduler.pending_count() == 0
    rt.advance(8)
    assert len(env.calls("sendChatAction")) == 1
    env.channel.close()


def test_cancel_command_cancels_a_live_run_and_stops_typing(rt, mock) -> None:  # type: ignore[no-untyped-def]
    never = threading.Event()  # the agent works until it is cancelled
    env = Env(rt, mock, ScriptedBridge([chunk("partial"), gate(never, timeout=10)]))
    env.message("long task")
    assert env.bridge.wait_prompt(1)
    rt.wait_for(lambda: len(env.calls("sendChatAction")) == 1)
    rt.clock.advance(4)  # the run is live (a worker is busy): wait for the tick only
    rt.wait_for(lambda: len(env.calls("sendChatAction")) == 2)
    assert env.message("/cancel@my_bot") == 200
    rt.wait_for(lambda: any(e.type is LifecycleType.CANCELLED for e in env.channel.events))
    env.settle()
    cancelled = env.channel.events[-1]
    assert cancelled.type is LifecycleType.CANCELLED and cancelled.reason == "cancel_command"
    assert env.bridge.cancels == [cancelled.session_id]
    assert MSG_CANCELLED in texts(env)
    # typing stopped: no keep-alive left, no timer armed, no further sendChatAction
    assert env.channel.typing.active_chats() == 0 and rt.scheduler.pending_count() == 0
    rt.advance(4)
    rt.advance(4)
    assert len(env.calls("sendChatAction")) == 2
    env.channel.close()


def test_register_commands_sends_the_menu_with_cancel(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, ScriptedBridge([final("x")]))
    env.channel.register_commands()
    env.channel.register_commands(scope={"type": "all_group_chats"}, language_code="de")
    first, second = env.calls("setMyCommands")
    commands = first["commands"]
    assert {"command": "cancel", "description": "Cancel the running request"} in commands
    assert [c["command"] for c in commands] == [name for name, _ in BOT_COMMANDS]
    assert all(len(c["command"]) <= 32 and c["command"].islower() for c in commands)
    assert "scope" not in first and "language_code" not in first
    assert second["scope"] == {"type": "all_group_chats"} and second["language_code"] == "de"
    env.channel.close()


def test_two_runs_in_one_chat_keep_one_keepalive(rt, mock) -> None:  # type: ignore[no-untyped-def]
    release = threading.Event()
    # Two users in one group chat, each in a session of their own (scope set: by default
    # a group shares one conversation outside forum topics): two concurrent runs.
    env = Env(rt, mock, ScriptedBridge([gate(release), final("ok")]), session_scope="user")
    env.message("@qwen_bot one", user=1, chat=-5, chat_type="group")
    env.message("@qwen_bot two", user=2, chat=-5, chat_type="group")
    assert env.bridge.wait_prompt(2)
    typing = env.channel.typing
    rt.wait_for(lambda: sum(len(c.runs) for c in list(typing._chats.values())) == 2)
    assert typing.active_chats() == 1
    rt.wait_for(lambda: len(env.calls("sendChatAction")) == 1)
    for expected in (2, 3):
        rt.clock.advance(4)
        rt.wait_for(lambda n=expected: len(env.calls("sendChatAction")) == n)
    assert rt.scheduler.pending_count() == 1  # one interval for the chat, not two
    release.set()
    env.settle()
    assert typing.active_chats() == 0
    rt.advance(4)
    rt.advance(4)
    assert len(env.calls("sendChatAction")) == 3
    env.channel.close()


def test_indicator_failures_never_fail_the_task(rt, mock) -> None:  # type: ignore[no-untyped-def]
    mock.post(
        url("sendChatAction"),
        status_code=500,
        json={"ok": False, "error_code": 500, "description": "boom"},
    )
    env = Env(rt, mock, ScriptedBridge([final("fine")]))
    env.message("hi")
    env.settle()
    assert texts(env)[-1] == "fine"
    assert env.channel.events[-1].type is LifecycleType.COMPLETED
    env.channel.close()


def test_text_chunk_and_tool_call_add_no_ui(rt, mock) -> None:  # type: ignore[no-untyped-def]
    release = threading.Event()
    steps = [chunk("a"), tool("t1", kind="read", title="read file"), chunk("b"), gate(release)]
    env = Env(rt, mock, ScriptedBridge(steps))
    env.message("hi")
    rt.wait_for(lambda: [e.type for e in env.channel.events].count(LifecycleType.TEXT_CHUNK) == 2)
    rt.wait_for(lambda: len(env.calls("sendChatAction")) == 1)
    rt.pool.wait_idle(0.2)  # the run is blocked; let every queued hook finish
    assert LifecycleType.TOOL_CALL in [e.type for e in env.channel.events]
    # still typing, nothing streamed, sent or edited while the run works
    assert env.channel.typing.active_chats() == 1 and rt.scheduler.pending_count() == 1
    assert texts(env) == [] and env.calls("editMessageText") == []
    # the hook itself ignores them: no keep-alive is started or stopped by them
    for kind in (LifecycleType.TEXT_CHUNK, LifecycleType.TOOL_CALL):
        for run_id in ("run-x", env.channel.events[0].run_id):
            env.channel.on_task_lifecycle(
                LifecycleEvent(kind, "telegram", str(CHAT), "s", run_id, None, None, chunk="x")
            )
    assert env.channel.typing.active_chats() == 1 and rt.scheduler.pending_count() == 1
    release.set()
    env.settle()
    # one plain final message; typing stopped
    assert texts(env) == ["a\n\nb"] and env.calls("editMessageText") == []
    assert env.channel.typing.active_chats() == 0
    env.channel.close()


# --- native questions without streaming output -----------------------------------------


def test_native_questions_without_streaming_output(rt, mock) -> None:  # type: ignore[no-untyped-def]
    questions = [
        question("Env", ["Prod", "Staging"]),
        question("Signals", ["Logs", "Metrics", "Traces"], multi=True),
    ]
    steps = [
        chunk("Let me ask. "),
        ask(lambda s: question_request("req-1", s, questions)),
        chunk("Deploying."),
    ]
    env = Env(rt, mock, ScriptedBridge(steps))
    env.message("deploy")
    rt.wait_for(lambda: len([s for s in env.calls("sendMessage") if "reply_markup" in s]) == 2)
    # Output stays plain messages: the text before the question comes first, then the
    # question messages; nothing is edited.
    first, *sent = env.calls("sendMessage")
    assert first == {"chat_id": str(CHAT), "text": "Let me ask. "}
    assert len(sent) == 2 and env.calls("editMessageText") == []
    for s in sent:
        for row in s["reply_markup"]["inline_keyboard"]:
            for button in row:
                assert len(button["callback_data"].encode()) <= 64
    m0, m1 = 101, 102
    kb0 = sent[0]["reply_markup"]["inline_keyboard"]
    kb1 = sent[1]["reply_markup"]["inline_keyboard"]
    # A foreign user taps: refused, nothing mutated.
    assert env.tap(kb0[1][0]["callback_data"], m0, user=7) == 200
    rt.wait_for(lambda: len(env.calls("answerCallbackQuery")) == 1)
    assert env.calls("answerCallbackQuery")[-1]["text"] == TEXT_NOT_OWNER
    assert env.calls("editMessageText") == []
    # Wrong secret on a tap: rejected before anything happens.
    assert env.post({"update_id": 99, "callback_query": {}}, secret="nope") == 401
    # The owner answers: Staging; Logs + Traces; Submit.
    env.tap(kb0[1][0]["callback_data"], m0)
    env.tap(kb1[0][0]["callback_data"], m1)
    env.tap(kb1[2][0]["callback_data"], m1)
    env.tap(kb1[-1][0]["callback_data"], m1)  # Submit
    assert parse_callback(kb1[-1][0]["callback_data"]).kind == "submit"  # type: ignore[union-attr]
    env.settle()
    assert env.bridge.responses == [
        (
            "req-1",
            {
                "outcome": {"outcome": "selected", "optionId": "proceed_once"},
                "answers": {"0": "Staging", "1": "Logs, Traces"},
            },
        )
    ]
    assert len(env.calls("answerCallbackQuery")) == 5  # every tap answered
    edits = {e["message_id"]: e for e in env.calls("editMessageText") if "reply_markup" not in e}
    assert set(edits) == {m0, m1} and all("Submitted" in e["text"] for e in edits.values())
    final_message = env.calls("sendMessage")[-1]
    assert final_message["text"] == "Deploying."  # only what was not sent yet
    assert "reply_markup" not in final_message and len(env.calls("sendMessage")) == 4
    # A late tap after the terminal state: answered, nothing changes.
    env.tap(kb0[0][0]["callback_data"], m0)
    env.settle()
    assert len(env.bridge.responses) == 1
    assert len(env.calls("answerCallbackQuery")) == 6
    env.channel.close()


def test_native_questions_can_be_disabled(rt, mock) -> None:  # type: ignore[no-untyped-def]
    steps = [ask(lambda s: question_request("req-1", s, [question("Env", ["Prod", "Staging"])]))]
    env = Env(rt, mock, ScriptedBridge([*steps, final("ok")]), native_questions=False)
    env.message("deploy")
    rt.wait_for(lambda: len(env.calls("sendMessage")) == 1)
    text = texts(env)[-1]
    assert text.startswith("Permission required to run a tool") and "/deny" in text
    assert "reply_markup" not in env.calls("sendMessage")[-1]
    env.message("/deny")
    env.settle()
    assert env.bridge.responses == [
        ("req-1", {"outcome": {"outcome": "selected", "optionId": "cancel"}})
    ]
    assert {"Permission denied.", "ok"} <= set(texts(env))
    env.channel.close()


# --- commands and foreign callbacks ----------------------------------------------------


def test_cancel_command_without_a_run_and_help(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, ScriptedBridge([final("x")]))
    env.message("/cancel@my_bot")
    env.settle()
    assert texts(env)[-1] == "No request is currently running."
    env.message("/help")
    env.settle()
    assert "/cancel" in texts(env)[-1]
    assert env.bridge.prompts == []
    env.channel.close()


def test_foreign_callback_data_is_answered(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, ScriptedBridge([final("x")]))
    env.tap("something-else", 1)
    env.tap("ck:malformed", 1)
    env.settle()
    assert len(env.calls("answerCallbackQuery")) == 2
    assert env.calls("editMessageText") == [] and env.bridge.responses == []
    env.channel.close()


# --- deferred ACK work -----------------------------------------------------------------


def _update(env: Env, text: str) -> dict[str, Any]:
    return {
        "update_id": next(env.update_ids),
        "message": {
            "message_id": 900 + next(env.update_ids),
            "date": 0,
            "chat": {"id": CHAT, "type": "private"},
            "from": {"id": OWNER, "is_bot": False, "first_name": "o"},
            "text": text,
        },
    }


def test_message_starts_its_run_only_after_the_ack(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, ScriptedBridge([final("done")]))
    response, handed = handed_to_pool(rt.pool, lambda: env.respond(_update(env, "hi")))
    assert response.status == 200 and handed == [] and len(response.after) == 1
    env.settle()
    assert env.bridge.prompts == [] and mock.request_history == []
    response.run_after()
    response.run_after()
    rt.wait_for(lambda: texts(env) == ["done"])
    env.settle()
    assert len(env.bridge.prompts) == 1 and texts(env) == ["done"]
    env.channel.close()


def test_help_and_foreign_taps_are_answered_only_after_the_ack(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, ScriptedBridge([final("x")]))
    help_response, handed = handed_to_pool(rt.pool, lambda: env.respond(_update(env, "/help")))
    assert handed == []
    tap_update = {
        "update_id": next(env.update_ids),
        "callback_query": {
            "id": "cq-foreign",
            "chat_instance": "ci",
            "data": "something-else",
            "from": {"id": OWNER, "is_bot": False, "first_name": "x"},
        },
    }
    tap_response, handed = handed_to_pool(rt.pool, lambda: env.respond(tap_update))
    assert handed == []
    env.settle()
    assert mock.request_history == []
    help_response.run_after()
    tap_response.run_after()
    env.settle()
    assert len(texts(env)) == 1 and len(env.calls("answerCallbackQuery")) == 1
    env.channel.close()


def test_question_tap_calls_nothing_before_the_ack(rt, mock) -> None:  # type: ignore[no-untyped-def]
    steps = [ask(lambda s: question_request("req-1", s, [question("Env", ["Prod", "Staging"])]))]
    env = Env(rt, mock, ScriptedBridge([*steps, final("ok")]))
    env.message("deploy")
    # Typing and the question are sent by pool tasks: wait for both before counting calls.
    rt.wait_for(
        lambda: env.channel.questions.state_of("req-1") == "pending"
        and len(env.calls("sendMessage")) == 1
        and len(env.calls("sendChatAction")) == 1
    )
    keyboard = env.calls("sendMessage")[0]["reply_markup"]["inline_keyboard"]
    tap = {
        "update_id": next(env.update_ids),
        "callback_query": {
            "id": "cq-owner",
            "chat_instance": "ci",
            "data": keyboard[1][0]["callback_data"],
            "from": {"id": OWNER, "is_bot": False, "first_name": "x"},
            "message": {"message_id": 100, "date": 0, "chat": {"id": CHAT, "type": "private"}},
        },
    }
    requests_before = len(mock.request_history)
    response, handed = handed_to_pool(rt.pool, lambda: env.respond(tap))
    assert response.status == 200 and handed == []
    assert env.channel.questions.state_of("req-1") == "claimed"  # claimed before the ACK
    assert env.bridge.responses == [] and len(mock.request_history) == requests_before
    response.run_after()
    response.run_after()
    rt.wait_for(lambda: texts(env)[-1:] == ["ok"])
    env.settle()
    assert env.bridge.responses == [
        (
            "req-1",
            {
                "outcome": {"outcome": "selected", "optionId": "proceed_once"},
                "answers": {"0": "Staging"},
            },
        )
    ]
    assert len(env.calls("answerCallbackQuery")) == 1
    env.channel.close()
