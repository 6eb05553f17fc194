"""Nothing lost: the final answer survives transient platform faults.

A fault matrix at the HTTP level (requests-mock) over every final-send site: Telegram
``sendMessage`` (formatted -> plain), Weixin ``sendmessage``, Feishu message create (a
never-streamed answer: card -> text; a run without segments: text), DingTalk Markdown
(trusted session webhook -> robot ``groupMessages/send``; robot API alone). Each fault
once -> the answer is shown exactly once; permanent on the first path -> the alternate
path shows it, or the loss is logged once and counted; every path down -> logged once
and counted. Backoff runs on the fake clock (``rt.advance``), never on real sleeps.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
import requests_mock as rm
import urllib3
from channelkit.clients.feishu import FeishuClient
from channelkit.core import ChannelConfig, CommandHandle, InboundMessage, SessionTarget
from channelkit.http import RetryPolicy
from channelkit.ingress import Headers, IngressRequest
from channelkit.platforms.dingtalk import DingtalkChannel, DingtalkConfig, robot_signature
from channelkit.platforms.dingtalk.api import CardApi
from channelkit.platforms.feishu import FeishuChannel, FeishuConfig
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.platforms.weixin import WeixinChannel, WeixinConfig
from channelkit.platforms.weixin.api import WeixinApi
from channelkit.testing import ScriptedBridge, chunk, final

from tests.platforms import _shared
from tests.platforms.telegram.tg_env import CHAT, OWNER, Env, mock_bot_api, url

rt = _shared.rt

ANSWER = "Answer"
DELIVERY_LOGGER = "channelkit.platforms.common.delivery"
FAULTS = ["429", "500", "reset", "connect-timeout"]
#: fake-clock seconds that pass every backoff of one path (4 attempts, capped)
PAST_BACKOFF = 61.0


def _reset_while_connecting() -> Exception:
    reason = urllib3.exceptions.NewConnectionError(
        None, "Failed to establish a new connection: [Errno 104] Connection reset by peer"
    )
    return requests.exceptions.ConnectionError(reason)


class Endpoint:
    """One final-send endpoint on requests-mock: records what it showed, and answers a
    scripted fault (``faults``: each used once; ``permanent``: every matching call)."""

    def __init__(
        self,
        mock: rm.Mocker,
        method: str,
        matcher: Any,
        ok: Callable[[Any], Any],
        shown: Callable[[Any], str],
        *,
        error: Callable[[int], Any],
        only: Callable[[Any], bool] = lambda body: True,
        shared: list[str] | None = None,
    ) -> None:
        self.lock = threading.Lock()
        self.faults: list[str] = []
        self.permanent: str | None = None
        self.delivered: list[str] = shared if shared is not None else []
        self.calls = 0
        self._ok, self._shown, self._error, self.only = ok, shown, error, only
        mock.register_uri(method, matcher, text=self._respond)

    def _respond(self, request: Any, context: Any) -> str:
        body = request.json()
        with self.lock:
            self.calls += 1
            fault = None
            if self.only(body):
                fault = self.permanent or (self.faults.pop(0) if self.faults else None)
            if fault is None:
                self.delivered.append(self._shown(body))
                return json.dumps(self._ok(body))
        if fault == "reset":
            raise _reset_while_connecting()
        if fault == "connect-timeout":
            raise requests.exceptions.ConnectTimeout("connect timeout")
        if fault == "read-timeout":
            raise requests.exceptions.ReadTimeout("read timeout")
        if fault == "garbage":
            return "<html>502 Bad Gateway</html>"
        if fault == "deep":
            return "[" * 100_000 + "]" * 100_000
        status = int(fault)
        context.status_code = status
        if status == 429:
            context.headers["Retry-After"] = "7"
        return json.dumps(self._error(status))


class Site:
    """One final-send site: ``start()`` runs a turn whose final answer is ``ANSWER``."""

    name = ""
    has_alternate = False
    owner: str | None = None
    chat = ""

    def __init__(self, rt: Any, mock: rm.Mocker) -> None:
        self.rt = rt
        self.mock = mock
        self.delivered: list[str] = []
        self.channel: Any = None
        self.primary: Endpoint
        self.endpoints: list[Endpoint] = []

    def start(self) -> None:
        raise NotImplementedError

    def health(self) -> dict[str, int]:
        return dict(self.channel.delivery_health.snapshot())


class TelegramSite(Site):
    name = "telegram"
    owner = str(OWNER)
    chat = str(CHAT)
    answer = ANSWER

    def __init__(self, rt: Any, mock: rm.Mocker) -> None:
        super().__init__(rt, mock)
        self.env = Env(rt, mock, ScriptedBridge([chunk(self.answer)]))
        self.channel = self.env.channel
        self.primary = Endpoint(
            mock,
            "POST",
            url("sendMessage"),
            lambda b: {
                "ok": True,
                "result": {"message_id": 100, "date": 0, "chat": {"id": CHAT, "type": "private"}},
            },
            lambda b: b["text"],
            error=lambda s: {
                "ok": False,
                "error_code": s,
                "description": "Too Many Requests" if s == 429 else "Internal Server Error",
                **({"parameters": {"retry_after": 7}} if s == 429 else {}),
            },
            only=self.first_path,
            shared=self.delivered,
        )
        self.endpoints = [self.primary]

    def first_path(self, body: Any) -> bool:
        return True

    def start(self) -> None:
        self.env.message("go")


class TelegramFormattedSite(TelegramSite):
    """Markdown answer: the HTML send first, the plain send as the alternate path."""

    name = "telegram-formatted"
    has_alternate = True
    answer = "**Answer**"

    def first_path(self, body: Any) -> bool:
        return body.get("parse_mode") == "HTML"


WX_BASE = "http://ilink.test"
WX_USER = "wxid_user@im.wechat"


class WeixinSite(Site):
    name = "weixin"
    owner = WX_USER
    chat = WX_USER

    def __init__(self, rt: Any, mock: rm.Mocker) -> None:
        super().__init__(rt, mock)
        api = WeixinApi("tok", base_url=WX_BASE, retry=RetryPolicy.never())
        self.channel = WeixinChannel(
            WeixinConfig(bot_token="tok", base_url=WX_BASE, typing=False),
            ScriptedBridge([final(ANSWER)]),
            channel_config=ChannelConfig(name="weixin", max_workers=8),
            api=api,
            executor=rt.pool,
            run_executor=rt.run_pool,
            scheduler=rt.scheduler,
        )
        self.primary = Endpoint(
            mock,
            "POST",
            f"{WX_BASE}/ilink/bot/sendmessage",
            lambda b: {"ret": 0},
            lambda b: b["msg"]["item_list"][0]["text_item"]["text"],
            error=lambda s: {"ret": 45011 if s == 429 else -1, "errmsg": "busy"},
            shared=self.delivered,
        )
        self.endpoints = [self.primary]

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


FS_BASE = "http://feishu.test"


def _feishu_shown(body: Any) -> str:
    content = json.loads(body["content"])
    if body["msg_type"] == "text":
        return str(content["text"])
    return str(content["body"]["elements"][0]["content"])  # the completed card's text


class FeishuSite(Site):
    """A never-streamed answer: one completed card, plain text as the alternate path."""

    name = "feishu-card"
    has_alternate = True
    owner = "ou_owner"
    chat = "oc_chat"

    def __init__(self, rt: Any, mock: rm.Mocker) -> None:
        super().__init__(rt, mock)
        client = FeishuClient(token="t-test", base_url=FS_BASE, retry=RetryPolicy(max_attempts=1))
        self.channel = FeishuChannel(
            FeishuConfig.from_dict(
                {"app_id": "cli_1", "app_secret": "s", "verification_token": "v"}
            ),
            ScriptedBridge([final(ANSWER)]),
            channel_config=ChannelConfig(name="feishu"),
            api=FeishuApi(client),
            executor=rt.pool,
            run_executor=rt.run_pool,
            scheduler=rt.scheduler,
            clock=rt.clock,
        )
        self.uuids: list[str] = []
        self.primary = Endpoint(
            mock,
            "POST",
            re.compile(re.escape(FS_BASE) + r"/open-apis/im/v1/messages(\?|$)"),
            self._ok,
            _feishu_shown,
            error=lambda s: {"code": 230020 if s == 429 else 1500, "msg": "busy"},
            only=self.first_path,
            shared=self.delivered,
        )
        self.endpoints = [self.primary]

    def _ok(self, body: Any) -> Any:
        self.uuids.append(body.get("uuid"))
        return {"code": 0, "msg": "ok", "data": {"message_id": "om_1"}}

    def first_path(self, body: Any) -> bool:
        return body["msg_type"] == "interactive"

    def start(self) -> None:
        self.channel.handle_inbound(InboundMessage("feishu", self.chat, self.owner, "go", None))


class FeishuTextSite(FeishuSite):
    """A run without segments (webhook task): plain text, the only path."""

    name = "feishu-text"
    has_alternate = False
    owner = None

    def first_path(self, body: Any) -> bool:
        return True

    def start(self) -> None:
        self.channel.run_webhook_task(SessionTarget("feishu", "ou_owner", self.chat), "go")


DT_BASE = "http://dingtalk.test"
WEBHOOK = "https://oapi.dingtalk.com/robot/sendBySession?session=abc"


class DingtalkSite(Site):
    """Status cards off, a trusted session webhook: webhook first, the robot API next."""

    name = "dingtalk-webhook"
    has_alternate = True
    owner = "staff-1"
    chat = "cid-group-1"
    webhook: str | None = WEBHOOK

    def __init__(self, rt: Any, mock: rm.Mocker) -> None:
        super().__init__(rt, mock)
        config = DingtalkConfig(
            client_id="ding-robot",
            client_secret="app-secret",
            interactive_cards={"statusCard": {"enabled": False}},
        )
        self.channel = DingtalkChannel(
            config,
            ScriptedBridge([final(ANSWER)]),
            api=CardApi("ding-robot", lambda: "tok", base_url=DT_BASE),
            executor=rt.pool,
            run_executor=rt.run_pool,
            scheduler=rt.scheduler,
            clock=rt.clock,
        )
        mock.post(re.compile(re.escape(DT_BASE) + r"/v1.0/robot/emotion/"), json={"result": True})
        robot = Endpoint(
            mock,
            "POST",
            f"{DT_BASE}/v1.0/robot/groupMessages/send",
            lambda b: {"processQueryKey": "pqk"},
            lambda b: json.loads(b["msgParam"])["text"],
            error=lambda s: {"code": "Throttling" if s == 429 else "ServiceUnavailable"},
            shared=self.delivered,
        )
        self.endpoints = [robot]
        self.primary = robot
        if self.webhook is not None:
            hook = Endpoint(
                mock,
                "POST",
                self.webhook,
                lambda b: {"errcode": 0, "errmsg": "ok"},
                lambda b: b["markdown"]["text"],
                error=lambda s: {"errcode": 130101 if s == 429 else -1, "errmsg": "busy"},
                shared=self.delivered,
            )
            self.endpoints.insert(0, hook)
            self.primary = hook

    def start(self) -> None:
        payload: dict[str, Any] = {
            "msgId": "msg-1",
            "msgtype": "text",
            "text": {"content": "go"},
            "conversationId": self.chat,
            "conversationType": "2",
            "senderId": "$:LWCP_v1:$" + self.owner if self.owner else "",
            "senderStaffId": self.owner,
            "senderNick": self.owner,
        }
        if self.webhook is not None:
            payload["sessionWebhook"] = self.webhook
            payload["sessionWebhookExpiredTime"] = int(self.rt.clock.time() * 1000) + 86_400_000
        ts = str(int(self.rt.clock.time() * 1000))
        headers = Headers({"timestamp": ts, "sign": robot_signature(ts, "app-secret")})
        body = json.dumps(payload).encode()
        response = self.channel.handle_robot_request(
            IngressRequest("POST", "/dingtalk/robot", headers, body)
        )
        assert response.status == 200
        response.run_after()


class DingtalkRobotSite(DingtalkSite):
    """No session webhook: the robot API is the only path."""

    name = "dingtalk-robot"
    has_alternate = False
    webhook = None


SITES: dict[str, type[Site]] = {
    s.name: s
    for s in (
        TelegramSite,
        TelegramFormattedSite,
        WeixinSite,
        FeishuSite,
        FeishuTextSite,
        DingtalkSite,
        DingtalkRobotSite,
    )
}


@pytest.fixture
def site(rt: Any, request: Any) -> Iterator[Site]:
    with mock_bot_api() as mock:
        made = SITES[request.param](rt, mock)
        yield made
        made.channel.close()


def _run(rt: Any, site: Site, *, rounds: int = 1) -> None:
    site.start()
    rt.settle()
    for _ in range(rounds):
        rt.advance(PAST_BACKOFF)


def _loss_records(caplog: Any) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == DELIVERY_LOGGER and r.levelno == logging.ERROR]


def _shown(site: Site) -> str:
    return "<b>Answer</b>" if isinstance(site, TelegramFormattedSite) else ANSWER


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("site", list(SITES), indirect=True)
def test_a_transient_fault_once_still_shows_the_answer_exactly_once(
    rt: Any, site: Site, fault: str
) -> None:
    site.primary.faults = [fault]
    site.start()
    rt.settle()
    assert site.delivered == []  # the first attempt failed; a retry is booked
    if fault == "429":
        rt.advance(6.9)  # Retry-After: 7 is honoured
        assert site.delivered == []
    rt.advance(PAST_BACKOFF)
    assert site.delivered == [_shown(site)]
    assert site.health() == {"delivered": 1, "retried": 1, "failed": 0, "uncertain": 0}


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("site", list(SITES), indirect=True)
def test_a_permanent_fault_moves_to_the_alternate_path_or_is_logged_and_counted(
    rt: Any, site: Site, fault: str, caplog: Any
) -> None:
    caplog.set_level(logging.INFO, logger=DELIVERY_LOGGER)
    site.primary.permanent = fault
    _run(rt, site, rounds=5)
    if site.has_alternate:
        assert len(site.delivered) == 1
        assert site.delivered[0] in (ANSWER, "**Answer**")
        assert site.health()["delivered"] == 1 and site.health()["failed"] == 0
        assert _loss_records(caplog) == []
    else:
        assert site.delivered == []
        assert len(_loss_records(caplog)) == 1
        assert site.health()["failed"] == 1 and site.health()["delivered"] == 0
    assert site.channel.delivery.pending == 0


@pytest.mark.parametrize("site", list(SITES), indirect=True)
def test_with_every_path_down_the_loss_is_logged_once_and_counted(
    rt: Any, site: Site, caplog: Any
) -> None:
    caplog.set_level(logging.INFO, logger=DELIVERY_LOGGER)
    for endpoint in site.endpoints:
        endpoint.permanent = "500"
        endpoint.only = lambda body: True  # every path, not only the first
    _run(rt, site, rounds=10)
    assert site.delivered == []
    (record,) = _loss_records(caplog)
    fields = record.delivery  # type: ignore[attr-defined]
    assert fields["chat_id"] == site.chat
    assert fields["run_id"]
    assert fields["owner_id"] == site.owner
    assert fields["reason"]
    assert ANSWER not in record.getMessage() and ANSWER not in json.dumps(fields)
    assert site.health() == {"delivered": 0, "retried": 1, "failed": 1, "uncertain": 0}
    # every path had its bounded attempts, no more
    paths = 2 if site.has_alternate else 1
    assert sum(e.calls for e in site.endpoints) == 4 * paths


@pytest.mark.parametrize("body", ["garbage", "deep"])
@pytest.mark.parametrize("site", [s for s in SITES if s != "dingtalk-webhook"], indirect=True)
def test_a_malformed_answer_to_the_final_send_is_a_failed_call_and_retried(
    rt: Any, site: Site, body: str
) -> None:
    site.primary.faults = [body]
    _run(rt, site)
    assert site.delivered == [_shown(site)]
    assert site.health()["delivered"] == 1 and site.health()["retried"] == 1


@pytest.mark.parametrize("site", ["feishu-card", "feishu-text"], indirect=True)
def test_a_read_timeout_is_retried_with_the_same_feishu_uuid(rt: Any, site: Site) -> None:
    site.primary.faults = ["read-timeout"]
    _run(rt, site)
    assert site.delivered == [ANSWER]
    assert isinstance(site, FeishuSite)
    sent = [r.json() for r in site.mock.request_history if r.path.endswith("/im/v1/messages")]
    assert len(sent) == 2 and sent[0]["uuid"] == sent[1]["uuid"]  # Feishu keeps one


@pytest.mark.parametrize("site", ["telegram", "weixin", "dingtalk-robot"], indirect=True)
def test_a_read_timeout_without_an_idempotency_key_is_not_retried(
    rt: Any, site: Site, caplog: Any
) -> None:
    caplog.set_level(logging.INFO, logger=DELIVERY_LOGGER)
    site.primary.faults = ["read-timeout"]
    _run(rt, site)
    # the request may have arrived: a retry could show the answer twice
    assert site.primary.calls == 1
    (record,) = _loss_records(caplog)
    assert record.delivery["uncertain"] is True  # type: ignore[attr-defined]
    assert site.health() == {"delivered": 0, "retried": 0, "failed": 1, "uncertain": 1}


@pytest.mark.parametrize("site", ["dingtalk-webhook"], indirect=True)
def test_a_read_timeout_on_the_first_path_does_not_try_the_alternate(rt: Any, site: Site) -> None:
    site.primary.faults = ["read-timeout"]
    _run(rt, site)
    assert [e.calls for e in site.endpoints] == [1, 0]  # no duplicate through the robot API
    assert site.health()["uncertain"] == 1


@pytest.mark.parametrize(
    "site", ["telegram", "weixin", "dingtalk-webhook", "dingtalk-robot"], indirect=True
)
def test_an_answer_lost_in_a_read_timeout_is_sent_again_by_slash_last(rt: Any, site: Site) -> None:
    """Not resent without an idempotency key, but never gone: ``/last`` sends it."""
    site.primary.faults = ["read-timeout"]
    _run(rt, site)
    assert site.delivered == [] and site.health()["uncertain"] == 1
    channel = site.channel
    assert site.owner is not None
    handle = channel.handle_inbound(InboundMessage(channel.name, site.chat, site.owner, "/last"))
    assert isinstance(handle, CommandHandle) and handle.reply == ANSWER  # no new run
    rt.settle()
    assert site.delivered == [ANSWER]
