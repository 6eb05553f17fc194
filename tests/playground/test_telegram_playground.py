"""`channelkit playground --platform telegram`: the demo conversation over real HTTP.

The Telegram adapter's generated client calls the emulated Bot API
(``/bot<token>/<method>``); the emulator delivers Updates to ``/telegram/webhook`` with
the secret registered by ``setWebhook``. Assertions read ``/_emulator/calls``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import requests
from channelkit.playground import CallbackDelivery, Playground, TelegramEmulator
from freezegun import freeze_time
from playground_helpers import callbacks, calls, click, send, state, view, views, wait

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


@pytest.fixture(scope="module")
def playground() -> Iterator[Playground]:
    with Playground(platform="telegram", demo_delay=0.01, ingress="webhook") as pg:
        yield pg


def _methods(recorded: list[dict[str, Any]]) -> list[str]:
    return [c["path"].rsplit("/", 1)[1] for c in recorded]


def _questions(pg: Playground, start: int) -> list[dict[str, Any]]:
    def find() -> list[dict[str, Any]] | None:
        pending = [v for v in views(pg)[start:] if v["state"] == "pending"]
        return pending if len(pending) == 2 else None

    return list(wait(find, "two question messages with inline keyboards"))


def _tap(pg: Playground, message_id: str, text: str) -> None:
    current = view(pg, message_id)
    data = next(b["data"] for row in current["keyboard"] for b in row if b["text"].endswith(text))
    click(pg, message_id, "tap", {"data": data})
    wait(
        lambda: view(pg, message_id)["updates"] > current["updates"]
        or view(pg, message_id)["keyboard"] != current["keyboard"],
        f"the message to change after tapping {text}",
    )


def test_startup_registers_the_webhook_and_commands(playground: Playground) -> None:
    recorded = calls(playground)
    assert _methods(recorded)[:2] == ["setWebhook", "setMyCommands"]
    webhook = recorded[0]["body"]
    assert webhook["url"] == f"{playground.url}/telegram/webhook" and webhook["secret_token"]
    assert "cancel" in {c["command"] for c in recorded[1]["body"]["commands"]}
    assert state(playground)["platform"] == "telegram"


def test_demo_conversation(playground: Playground) -> None:
    pg = playground
    since = calls(pg)[-1]["seq"]
    start = send(pg, "hello")
    wait(lambda: "sendChatAction" in _methods(calls(pg, since)), "the typing action")
    first, second = _questions(pg, start)
    early = calls(pg, since)
    typing = next(c for c in early if c["path"].endswith("/sendChatAction"))
    assert typing["body"]["action"] == "typing"
    assert _methods(early).index("sendChatAction") < _methods(early).index("sendMessage")
    assert "Which color" in first["text"] and "Which toppings" in second["text"]
    assert [b["text"] for row in first["keyboard"] for b in row] == [
        "Red",
        "Green",
        "Blue",
        "Cancel",
    ]
    assert [b["text"] for b in second["keyboard"][-1]] == ["Submit", "Cancel"]

    _tap(pg, first["id"], "Blue")
    _tap(pg, second["id"], "Cheese")
    _tap(pg, second["id"], "Basil")
    marked = [b["text"] for row in view(pg, second["id"])["keyboard"] for b in row]
    assert "✓ Cheese" in marked and "✓ Basil" in marked and "Olives" in marked
    _tap(pg, second["id"], "Submit")

    def answered() -> bool:
        return all(view(pg, q["id"])["keyboard"] == [] for q in (first, second))

    wait(answered, "both question messages edited to their submitted state")
    assert view(pg, second["id"])["text"].endswith("✅ Submitted: Cheese, Basil")
    assert view(pg, first["id"])["text"].endswith("✅ Submitted: Blue")
    final = wait(
        lambda: next((v for v in views(pg)[start + 2 :] if "You picked" in v["text"]), None),
        "the continuation message",
    )
    # the agent's Markdown is sent as Telegram HTML (parse_mode), never literal asterisks
    assert "You picked <b>Blue</b> and <b>Cheese, Basil</b>" in final["text"]
    assert final["state"] == "shown" and final["keyboard"] == []

    recorded = calls(pg, since)
    assert all(c["status"] == 200 for c in recorded), [c for c in recorded if c["status"] != 200]
    methods = _methods(recorded)
    assert methods.count("answerCallbackQuery") == 4  # every tap answered exactly once
    assert "editMessageText" in methods and methods[-1] == "sendMessage"
    keyboards = [
        c["body"]["reply_markup"]["inline_keyboard"]
        for c in recorded
        if c["path"].endswith("/sendMessage") and "reply_markup" in c["body"]
    ]
    assert len(keyboards) == 2
    for keyboard in keyboards:
        for row in keyboard:
            for button in row:
                assert button["callback_data"].startswith("ck:")
                assert len(button["callback_data"].encode()) <= 64
    assert all(t["answered"] for t in pg.emulator.callback_answers())
    sent_back = [c for c in callbacks(pg) if c["kind"] in ("message", "callback_query")]
    assert sent_back and all(c["status"] == 200 for c in sent_back)


def test_webhook_deliveries_carry_the_registered_secret() -> None:
    sent: list[tuple[str, Mapping[str, str], bytes]] = []

    def deliver(url: str, headers: Mapping[str, str], body: bytes) -> CallbackDelivery:
        sent.append((url, headers, body))
        return CallbackDelivery(200, "{}")

    emulator = TelegramEmulator(
        bot_token="1:t", webhook_url="http://sdk/telegram/webhook", deliver=deliver
    )
    emulator.send_user_message("/start now")
    url, headers, body = sent[-1]
    assert url == "http://sdk/telegram/webhook"
    assert headers[SECRET_HEADER] == "playground-webhook-secret"
    update = json.loads(body)
    assert update["message"]["entities"][0]["type"] == "bot_command"
    assert update["message"]["chat"] == {"id": 424242, "type": "private", "first_name": "You"}
    reply = emulator.handle_api(
        "POST",
        "/bot1:t/setWebhook",
        {},
        {"content-type": "application/json"},
        json.dumps({"url": "http://other/hook", "secret_token": "s3"}).encode(),
    )
    assert reply is not None and reply.payload["result"] is True
    emulator.send_user_message("hi")
    url, headers, _ = sent[-1]
    assert (url, headers[SECRET_HEADER]) == ("http://other/hook", "s3")


def test_typing_shows_while_the_chat_action_is_fresh() -> None:
    emulator = TelegramEmulator(bot_token="1:t")
    body = json.dumps({"chat_id": emulator.chat_id, "action": "typing"}).encode()
    with freeze_time("2030-01-01 00:00:00") as frozen:
        reply = emulator.handle_api(
            "POST", "/bot1:t/sendChatAction", {}, {"content-type": "application/json"}, body
        )
        assert reply is not None and reply.status == 200
        assert emulator.typing() and emulator.state()["typing"]
        frozen.tick(4.9)
        assert emulator.typing()
        frozen.tick(0.2)
        assert not emulator.typing() and not emulator.state()["typing"]
        emulator.handle_api(
            "POST", "/bot1:t/sendChatAction", {}, {"content-type": "application/json"}, body
        )
        message = json.dumps({"chat_id": emulator.chat_id, "text": "done"}).encode()
        emulator.handle_api(
            "POST", "/bot1:t/sendMessage", {}, {"content-type": "application/json"}, message
        )
        assert not emulator.typing()  # a message from the bot clears its chat action


def test_bot_api_rules() -> None:
    from channelkit.clients.telegram import TelegramClient
    from channelkit.playground import EmulatorServer

    with EmulatorServer(platform="telegram", bot_token="1:t") as server:
        url = server.url
        wrong = requests.post(f"{url}/bot2:x/getMe", json={}, timeout=5)
        assert wrong.status_code == 401 and wrong.json()["ok"] is False
        assert requests.post(f"{url}/bot1:t/getMe", timeout=5).json()["result"]["is_bot"] is True
        assert requests.post(f"{url}/bot1:t/nope", json={}, timeout=5).status_code == 404
        chat = server.emulator.chat_id
        client = TelegramClient(token="1:t", base_url=url)
        sent = client.send_message(
            body={
                "chat_id": chat,
                "text": "pick",
                "reply_markup": {"inline_keyboard": [[{"text": "A", "callback_data": "a"}]]},
            }
        )
        message_id = sent.result.message_id

        def call(method: str, **body: Any) -> requests.Response:
            return requests.post(f"{url}/bot1:t/{method}", json=body, timeout=5)

        too_long = call(
            "sendMessage",
            chat_id=chat,
            text="x",
            reply_markup={"inline_keyboard": [[{"text": "A", "callback_data": "x" * 65}]]},
        )
        assert too_long.json()["description"] == "Bad Request: BUTTON_DATA_INVALID"
        assert (
            call("sendMessage", chat_id=999, text="x")
            .json()["description"]
            .endswith("chat not found")
        )
        same = call(
            "editMessageText",
            chat_id=chat,
            message_id=message_id,
            text="pick",
            reply_markup={"inline_keyboard": [[{"text": "A", "callback_data": "a"}]]},
        )
        assert same.status_code == 400 and "message is not modified" in same.json()["description"]
        edited = call("editMessageText", chat_id=chat, message_id=message_id, text="picked")
        assert edited.json()["result"]["edit_date"] > 0
        assert server.emulator.view(str(message_id))["keyboard"] == []  # no markup: removed
        assert call("pinChatMessage", chat_id=chat, message_id=message_id).json()["result"]
        assert server.emulator.view(str(message_id))["pinned"] is True
        assert call("answerCallbackQuery", callback_query_id="nope").status_code == 400
        assert call("deleteMessage", chat_id=chat, message_id=message_id).json()["result"]
        assert call("deleteMessage", chat_id=chat, message_id=message_id).status_code == 400
        assert server.emulator.view(str(message_id))["state"] == "deleted"
        recorded = json.dumps(server.emulator.calls())
        assert "1:t" not in recorded  # the token in the path is never recorded
