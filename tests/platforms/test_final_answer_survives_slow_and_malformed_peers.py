"""Nothing lost against slow and malformed peers, on a real socket (127.0.0.1).

Slow drip: the final-send call of every site (Telegram ``sendMessage``, Weixin
``sendmessage``, Feishu message create, DingTalk robot Markdown, DingTalk session
webhook, DingTalk card finalize) is answered one byte per second, status line first.
With ``requestTimeout`` 0.6 s the call fails at its deadline; the answer goes out through
the alternate path where one exists (Feishu: the same idempotent send again; DingTalk
card -> Markdown), else the loss is counted; ``close()`` returns within its grace period
and leaves exactly the threads that existed before the channel started.

Malformed: garbage and 200,000-deep JSON answering the DingTalk streaming finalize, the
instance update and the session webhook, and the Feishu card finalize: the answer is
still shown (card or fallback), never lost. Each channel owns its pools; retries run on
a fake clock (``clock.advance``), never on real sleeps.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from channelkit.core import ChannelConfig, InboundMessage
from channelkit.errors import ChannelKitError, ReadTimeout
from channelkit.ingress import Headers, IngressRequest
from channelkit.platforms.dingtalk import DingtalkChannel, DingtalkConfig, robot_signature
from channelkit.platforms.dingtalk.api import CardApi
from channelkit.platforms.feishu import FeishuChannel, FeishuConfig
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.platforms.telegram import TelegramChannel, TelegramConfig
from channelkit.platforms.weixin import WeixinChannel, WeixinConfig
from channelkit.runtime import FakeClock
from channelkit.testing import ScriptedBridge, chunk, final, gate, wait_until

from tests.platforms.slow_peer import THREAD_PREFIX, Reply, SlowPeer

ANSWER = "Answer"
DEADLINE = 0.6
#: close()'s grace period in these tests
GRACE = 1.0
GARBAGE = b"<html>502 Bad Gateway</html>"
DEEP = b"[" * 200_000 + b"]" * 200_000


def _ok(payload: Any) -> bytes:
    return json.dumps(payload).encode()


class Site:
    """One channel on a :class:`SlowPeer`; ``fault(method, path, body)`` picks the calls
    answered badly (``Reply(drip=True)`` or a malformed body)."""

    name = ""
    final_path = ""

    def __init__(self, fault: Callable[[str, str, Any], Reply | None]) -> None:
        self.fault = fault
        self.clock = FakeClock()
        self.accepted: list[tuple[str, Any]] = []
        self.lock = threading.Lock()
        #: set when a card's creation reached the peer
        self.card_out = threading.Event()
        self.peer = SlowPeer(self._answer)
        self.before = set(threading.enumerate())
        self.channel: Any = self.make()

    def _answer(self, method: str, path: str, body: Any) -> Any:
        if path.split("?")[0].endswith("/createAndDeliver"):
            self.card_out.set()
        bad = self.fault(method, path.split("?")[0], body)
        if bad is not None:
            return bad
        with self.lock:
            self.accepted.append((path.split("?")[0], body))
        return self.ok(method, path.split("?")[0], body)

    def paths(self, suffix: str) -> list[Any]:
        """Bodies of the requests to ``suffix`` answered with success."""
        with self.lock:
            return [body for path, body in self.accepted if path.endswith(suffix)]

    def make(self) -> Any:
        raise NotImplementedError

    def ok(self, method: str, path: str, body: Any) -> Any:
        raise NotImplementedError

    def start(self) -> None:
        raise NotImplementedError

    def shown(self) -> list[str]:
        """Every text the platform accepted as a final answer."""
        raise NotImplementedError

    def health(self) -> dict[str, int]:
        return dict(self.channel.delivery_health.snapshot())

    def leftover_threads(self) -> list[str]:
        return [
            t.name
            for t in threading.enumerate()
            if t not in self.before and not t.name.startswith(THREAD_PREFIX)
        ]


class TelegramSite(Site):
    name = "telegram"
    final_path = "/sendMessage"

    def make(self) -> Any:
        config = TelegramConfig(
            bot_token="123:abc",
            api_base_url=self.peer.url,
            request_timeout_s=DEADLINE,
            bot_username="slow_peer_bot",
        )
        return TelegramChannel(
            config,
            ScriptedBridge([chunk(ANSWER)]),
            channel_config=ChannelConfig(name="tg"),
            clock=self.clock,
        )

    def ok(self, method: str, path: str, body: Any) -> Any:
        if path.endswith("/sendMessage"):
            chat = {"id": 7, "type": "private"}
            return {"ok": True, "result": {"message_id": 1, "date": 0, "chat": chat}}
        return {"ok": True, "result": True}

    def start(self) -> None:
        sender = {"id": 7, "is_bot": False, "first_name": "u"}
        chat = {"id": 7, "type": "private"}
        message = {"message_id": 5, "date": 0, "chat": chat, "from": sender, "text": "go"}
        self.channel.process_update({"update_id": 1, "message": message})

    def shown(self) -> list[str]:
        return [b["text"] for b in self.paths("/sendMessage")]


WX_USER = "wxid_user@im.wechat"


class WeixinSite(Site):
    name = "weixin"
    final_path = "/ilink/bot/sendmessage"

    def make(self) -> Any:
        config = WeixinConfig(
            bot_token="tok", base_url=self.peer.url, typing=False, request_timeout_s=DEADLINE
        )
        return WeixinChannel(
            config,
            ScriptedBridge([final(ANSWER)]),
            channel_config=ChannelConfig(name="wx"),
            clock=self.clock,
        )

    def ok(self, method: str, path: str, body: Any) -> Any:
        return {"ret": 0}

    def start(self) -> None:
        self.channel.handle_weixin_message(
            {
                "message_id": 1,
                "from_user_id": WX_USER,
                "message_type": 1,
                "context_token": "ctx-1",
                "item_list": [{"type": 1, "text_item": {"text": "go"}}],
            }
        )

    def shown(self) -> list[str]:
        return [
            b["msg"]["item_list"][0]["text_item"]["text"]
            for b in self.paths("/ilink/bot/sendmessage")
        ]


class FeishuSite(Site):
    name = "feishu"
    final_path = "/open-apis/im/v1/messages"
    bridge_script: Any = None

    def make(self) -> Any:
        self.api = FeishuApi.create("cli_1", "s", base_url=self.peer.url, timeout=DEADLINE)
        config = FeishuConfig.from_dict(
            {"app_id": "cli_1", "app_secret": "s", "verification_token": "v"}
        )
        return FeishuChannel(
            config,
            ScriptedBridge(self.bridge_script or [final(ANSWER)]),
            channel_config=ChannelConfig(name="feishu"),
            api=self.api,
            clock=self.clock,
        )

    def ok(self, method: str, path: str, body: Any) -> Any:
        if path.endswith("/tenant_access_token/internal"):
            return {"code": 0, "msg": "ok", "tenant_access_token": "t-1", "expire": 7200}
        if path.endswith("/reactions"):
            return {"code": 0, "msg": "ok", "data": {"reaction_id": "r1"}}
        if path.endswith("/cardkit/v1/cards"):
            return {"code": 0, "msg": "ok", "data": {"card_id": "card-1"}}
        return {"code": 0, "msg": "ok", "data": {"message_id": "om_1"}}

    def start(self) -> None:
        self.channel.handle_inbound(InboundMessage("feishu", "oc_chat", "ou_owner", "go", None))

    def shown(self) -> list[str]:
        texts = []
        for body in self.paths("/open-apis/im/v1/messages"):
            content = json.loads(body["content"])
            if body["msg_type"] == "text":
                texts.append(str(content["text"]))
            elif "elements" in content.get("body", {}):
                texts.append(str(content["body"]["elements"][0]["content"]))
        return texts


DT_GROUP = "cid-group-1"


class DingtalkSite(Site):
    """Status cards off; the answer goes through the robot API (no session webhook)."""

    name = "dingtalk-robot"
    final_path = "/v1.0/robot/groupMessages/send"
    cards = False
    webhook = False

    def make(self) -> Any:
        config = DingtalkConfig(
            client_id="ding-robot",
            client_secret="app-secret",
            api_base_url=self.peer.url,
            request_timeout=DEADLINE,
            interactive_cards={"statusCard": {"enabled": self.cards}},
        )
        # with cards, the turn holds until its card went out, so the answer streams into a
        # running card that is then finalized (a segment that ends before its card goes
        # out gets the card created once, finished: no stream, no final update)
        script = [chunk(ANSWER), gate(self.card_out)] if self.cards else [final(ANSWER)]
        return DingtalkChannel(
            config,
            ScriptedBridge(script),
            channel_config=ChannelConfig(name="dt"),
            clock=self.clock,
        )

    def ok(self, method: str, path: str, body: Any) -> Any:
        if path.endswith("/oauth2/accessToken"):
            return {"accessToken": "tok", "expireIn": 7200}
        if path.endswith("/sendBySession"):
            return {"errcode": 0, "errmsg": "ok"}
        if path.endswith("/groupMessages/send"):
            return {"processQueryKey": "pqk"}
        if "/emotion/" in path:
            return {"result": True}
        if path.endswith("/createAndDeliver"):
            result = {
                "outTrackId": body["outTrackId"],
                "deliverResults": [{"spaceType": "IM_GROUP", "spaceId": DT_GROUP, "success": True}],
            }
            return {"success": True, "result": result}
        return {"success": True, "result": True}

    def start(self) -> None:
        payload: dict[str, Any] = {
            "msgId": "msg-1",
            "msgtype": "text",
            "text": {"content": "go"},
            "conversationId": DT_GROUP,
            "conversationType": "2",
            "senderId": "$:LWCP_v1:$staff-1",
            "senderStaffId": "staff-1",
            "senderNick": "staff-1",
        }
        if self.webhook:
            payload["sessionWebhook"] = self.peer.url + "/robot/sendBySession?session=abc"
            payload["sessionWebhookExpiredTime"] = int(self.clock.time() * 1000) + 86_400_000
        ts = str(int(self.clock.time() * 1000))
        headers = Headers({"timestamp": ts, "sign": robot_signature(ts, "app-secret")})
        response = self.channel.handle_robot_request(
            IngressRequest("POST", "/dingtalk/robot", headers, json.dumps(payload).encode())
        )
        assert response.status == 200
        response.run_after()

    def markdown(self) -> list[str]:
        shown = [json.loads(b["msgParam"])["text"] for b in self.paths("/groupMessages/send")]
        shown += [b["markdown"]["text"] for b in self.paths("/sendBySession")]
        return shown

    def card_finals(self) -> list[str]:
        return [
            b["cardData"]["cardParamMap"]["content"]
            for b in self.paths("/v1.0/card/instances")
            if "content" in b["cardData"]["cardParamMap"]
        ]

    def shown(self) -> list[str]:
        return self.markdown() + self.card_finals()


class DingtalkWebhookSite(DingtalkSite):
    name = "dingtalk-webhook"
    final_path = "/robot/sendBySession"
    webhook = True


class DingtalkCardSite(DingtalkSite):
    """Status cards on: the answer streams into a card; its finalization is the final
    send, and Markdown through the robot API is the alternate path."""

    name = "dingtalk-card"
    final_path = "/v1.0/card/instances"
    cards = True


def _is_final_card_update(body: Any) -> bool:
    return "content" in body.get("cardData", {}).get("cardParamMap", {})


def _is_streaming_finalize(body: Any) -> bool:
    return bool(body.get("isFinalize"))


SITES: dict[str, type[Site]] = {
    s.name: s
    for s in (
        TelegramSite,
        WeixinSite,
        FeishuSite,
        DingtalkSite,
        DingtalkCardSite,
    )
}


def _first_final_send_drips(site_cls: type[Site]) -> Callable[[str, str, Any], Reply | None]:
    dripped: list[bool] = []

    def fault(method: str, path: str, body: Any) -> Reply | None:
        if not path.endswith(site_cls.final_path) or dripped:
            return None
        if site_cls is DingtalkCardSite and not _is_final_card_update(body):
            return None
        dripped.append(True)
        return Reply(body=b'{"ok": true}', drip=True)

    return fault


@pytest.fixture
def opened() -> Iterator[list[Site]]:
    sites: list[Site] = []
    yield sites
    for site in sites:
        site.channel.close(timeout=GRACE)
        site.peer.close()


def _settle(site: Site) -> None:
    for pool in (site.channel.run_pool, site.channel.pool):
        assert pool.wait_idle(10.0)


# -- slow drip ------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(SITES))
def test_a_slow_drip_final_send_fails_at_its_deadline_and_close_leaves_no_thread(
    name: str, opened: list[Site]
) -> None:
    site_cls = SITES[name]
    site = site_cls(_first_final_send_drips(site_cls))
    opened.append(site)
    started = time.monotonic()
    site.start()
    wait_until(lambda: site.peer.hangups, 10.0, what="the client gave up on the drip")
    # at one byte a second the answer takes ~60 s: the client hung up at its deadline
    assert site.peer.hangups[0] < DEADLINE + 0.5
    assert time.monotonic() - started < DEADLINE + 3.0
    _settle(site)
    site.clock.advance(2.0)  # a booked retry (Feishu's idempotent send) comes due
    _settle(site)
    if name in ("feishu", "dingtalk-card"):
        # the same idempotent send again (Feishu uuid) / card -> Markdown (DingTalk)
        assert site.shown().count(ANSWER) == 1
        if name == "dingtalk-card":
            assert site.markdown() == [ANSWER]
    else:
        # the request may have arrived: neither a retry nor another path may repeat it
        assert site.health() == {"delivered": 0, "retried": 0, "failed": 1, "uncertain": 1}
    closing = time.monotonic()
    site.channel.close(timeout=GRACE)
    assert time.monotonic() - closing < GRACE + 0.5
    assert site.leftover_threads() == []


@pytest.mark.parametrize("name", ["weixin", "dingtalk-card"])
def test_close_during_a_slow_drip_returns_within_its_grace_and_the_call_ends_at_its_deadline(
    name: str, opened: list[Site]
) -> None:
    site_cls = SITES[name]
    site = site_cls(_first_final_send_drips(site_cls))
    opened.append(site)
    site.start()
    wait_until(lambda: site.peer.paths(site_cls.final_path), 10.0, what="the final send")
    closing = time.monotonic()
    site.channel.close(timeout=0.2)  # shorter than the call's deadline: abandoned
    assert time.monotonic() - closing < 0.2 + 0.5
    # the abandoned call ends at its own deadline, and with it its thread
    wait_until(lambda: site.leftover_threads() == [], DEADLINE + 3.0, what="no thread left")
    # the peer's own thread notices the hang-up a moment later
    wait_until(lambda: site.peer.hangups, 10.0, what="the peer to see the client hang up")
    assert site.peer.hangups[0] < DEADLINE + 0.5


# -- malformed answers to the card finalize --------------------------------------------

MALFORMED = {"garbage": GARBAGE, "deep": DEEP}


@pytest.mark.parametrize("body", list(MALFORMED))
def test_a_malformed_final_card_update_sends_the_answer_as_markdown(
    body: str, opened: list[Site]
) -> None:
    def fault(method: str, path: str, payload: Any) -> Reply | None:
        if path.endswith("/v1.0/card/instances") and _is_final_card_update(payload):
            return Reply(body=MALFORMED[body])
        return None

    site = DingtalkCardSite(fault)
    opened.append(site)
    site.start()
    _settle(site)
    assert site.markdown() == [ANSWER]


@pytest.mark.parametrize("body", list(MALFORMED))
def test_a_malformed_streaming_finalize_still_shows_the_answer_once(
    body: str, opened: list[Site]
) -> None:
    def fault(method: str, path: str, payload: Any) -> Reply | None:
        if path.endswith("/v1.0/card/streaming") and _is_streaming_finalize(payload):
            return Reply(body=MALFORMED[body])
        return None

    site = DingtalkCardSite(fault)
    opened.append(site)
    site.start()
    _settle(site)
    # the card's final update carries the answer; had it failed too, Markdown would
    assert site.shown() == [ANSWER]
    assert any(_is_streaming_finalize(b) for b in site.peer.paths("/v1.0/card/streaming"))


def _webhook_peer(reply: Reply) -> SlowPeer:
    return SlowPeer(lambda method, path, body: reply)


def test_a_slow_drip_session_webhook_fails_at_its_deadline() -> None:
    # a session webhook from a local peer is not a trusted DingTalk host, so the channel
    # would not use it: the call itself is driven here (the chain's handling of its
    # failures is in test_final_answer_survives_faults.py)
    peer = _webhook_peer(Reply(body=b'{"errcode":0}', drip=True))
    api = CardApi("ding-robot", lambda: "tok", base_url=peer.url, timeout=DEADLINE)
    try:
        started = time.monotonic()
        with pytest.raises(ReadTimeout):
            api.send_webhook_markdown(peer.url + "/robot/sendBySession?session=a", "t", ANSWER)
        assert time.monotonic() - started < DEADLINE + 0.5
    finally:
        api.close()
        peer.close()


@pytest.mark.parametrize("body", [*MALFORMED, "empty-object", "no-body", "success-false"])
def test_a_session_webhook_200_that_is_not_errcode_0_is_a_failed_call(body: str) -> None:
    answers = {
        **MALFORMED,
        "empty-object": b"{}",
        "no-body": b"",
        "success-false": b'{"errcode":0,"success":false}',
    }
    peer = _webhook_peer(Reply(body=answers[body]))
    api = CardApi("ding-robot", lambda: "tok", base_url=peer.url, timeout=2.0)
    try:
        with pytest.raises(ChannelKitError):
            api.send_webhook_markdown(peer.url + "/robot/sendBySession?session=a", "t", ANSWER)
        # the documented success answer is one
        peer.answer = lambda method, path, payload: Reply(body=b'{"errcode":0,"errmsg":"ok"}')
        api.send_webhook_markdown(peer.url + "/robot/sendBySession?session=a", "t", ANSWER)
    finally:
        api.close()
        peer.close()


class FeishuStreamingSite(FeishuSite):
    """The answer streams into a CardKit card; the run ends only once the card was
    posted (``card_posted``), so the terminal path finalizes a card that was shown."""

    name = "feishu-streaming"

    def __init__(self, fault: Callable[[str, str, Any], Reply | None]) -> None:
        self.card_posted = threading.Event()
        self.bridge_script = [chunk(ANSWER), gate(self.card_posted)]
        super().__init__(fault)

    def ok(self, method: str, path: str, body: Any) -> Any:
        if path.endswith("/im/v1/messages") and "card_id" in str(body.get("content")):
            self.card_posted.set()
        return super().ok(method, path, body)


@pytest.mark.parametrize("body", list(MALFORMED))
def test_a_malformed_feishu_card_finalize_still_delivers_the_answer(
    body: str, opened: list[Site]
) -> None:
    def fault(method: str, path: str, payload: Any) -> Reply | None:
        if "/cardkit/v1/cards/" in path or (method == "PATCH" and "/im/v1/messages/" in path):
            return Reply(body=MALFORMED[body])
        return None

    site = FeishuStreamingSite(fault)
    opened.append(site)
    site.start()
    _settle(site)
    # neither CardKit nor PATCH could finish the card: the answer went out as text, once
    (text,) = site.shown()
    assert text.startswith(ANSWER + "\n")
