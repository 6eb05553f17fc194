"""Test drivers for the platform contract suite: one per chat platform, one protocol.

A driver starts the platform's emulator and the real channel (``Playground``) with a given
agent and an injected FakeClock, over real HTTP/WebSocket on 127.0.0.1, and translates the
contract's vocabulary into the emulator's: a person sends text, the bot's visible output
segments end ``running`` / ``completed`` / ``cancelled`` / ``failed``, a person presses
Stop, a question is shown (a native form or a text prompt) and settles in place
(``pending`` / ``submitted`` / ``cancelled`` / ``expired``), a person answers or cancels
it, notices reach one person privately.

What a platform lacks is a :class:`Capabilities` flag with a reason; the suite skips a rule
only where a driver declares the capability missing (``Driver.require``), never silently.
A new platform adds a driver class and one entry in :data:`DRIVERS`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
import requests
from channelkit.agents.base import AgentBridge
from channelkit.playground import Playground
from channelkit.runtime import FakeClock

#: Bound on every wait of the suite (real seconds; the machine may be loaded).
BOUND_S = 10.0
#: The person who talks to the bot (each emulator's default user).
OWNER = None
#: Somebody else in the chat (a teammate pressing the owner's buttons).
FOREIGN = "70017001"

SEGMENT_STATES = ("running", "completed", "cancelled", "failed")
PROMPT_STATES = ("pending", "submitted", "cancelled", "expired")


@dataclass(frozen=True)
class Segment:
    """One visible output segment: ``id`` (its message/card), ``text``, ``state``."""

    id: str
    text: str
    state: str
    stop_id: str | None = None  # where its Stop button lives (None: no Stop button)


@dataclass(frozen=True)
class Prompt:
    """A question as the chat shows it: ``native`` (a form / keyboard the person answers
    in place) or a text prompt; ``state`` one of :data:`PROMPT_STATES`."""

    id: str
    native: bool
    state: str
    text: str
    view: dict[str, Any] = field(repr=False, default_factory=dict)


@dataclass(frozen=True)
class Capabilities:
    """What a platform offers; each missing capability names why (the skip reason)."""

    live_output: str | None = None  # None: a segment shows while it runs; else why not
    stop_button: str | None = None  # None: it has one; else why not
    keeps_failed_text: str | None = None  # a failed segment keeps the text said so far
    private_notice: str | None = None
    foreign_users: str | None = None  # somebody else can press the bot's buttons
    native_questions: str | None = None
    approval_buttons: str | None = None
    native_presentation: str | None = None
    presentation_buttons: str | None = None  # a presentation's value button can be pressed
    pins: str | None = None
    groups: str | None = None  # None: people write to the bot in group chats too
    threads: str | None = None  # None: a group has threads (a thread is a conversation)
    #: None: a person's files reach the agent (issue 25); wired platform by platform, so
    #: missing unless a driver says otherwise
    attachments_in: str | None = "inbound attachments are not wired for this platform yet"
    #: None: the agent's files and images are uploaded natively (issue 25, outbound)
    files_out: str | None = "the agent's files are not uploaded natively here yet"
    #: None: an image the agent sends shows its file name in the chat
    image_names: str | None = None
    #: None: an answer no live message showed goes out as a send of its own (through
    #: the channel's delivery chain); else why there is none
    final_send: str | None = None
    #: None: a "working on it" indicator shows in a direct chat while a run works
    working_indicator: str | None = None
    #: None: a queue notice is one message or card, edited in place as the queue moves
    edited_queue_notice: str | None = None


def wait_for(
    predicate: Callable[[], Any],
    what: str | Callable[[], str],
    timeout: float = BOUND_S,
    tick: Callable[[], None] | None = None,
) -> Any:
    """Poll ``predicate`` until truthy (bounded); ``tick`` runs between polls. ``what``
    names the awaited thing in the timeout's message; a callable is read only then (the
    chat as it is at the timeout, and no emulator state fetched for a wait that ends)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            said = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout} s waiting for {said}")
        if tick is not None:
            tick()
        time.sleep(0.01)


class Driver:
    """The protocol the contract tests use (see the module docstring)."""

    platform: ClassVar[str]
    caps: ClassVar[Capabilities] = Capabilities()
    #: contract rule -> the platform's open defect breaking it (a strict xfail: the test
    #: fails as soon as the defect is fixed, so the entry gets removed)
    known_defects: ClassVar[dict[str, str]] = {}
    playground_options: ClassVar[dict[str, Any]] = {}

    def __init__(self, pg: Playground, clock: FakeClock) -> None:
        self.pg = pg
        self.clock = clock
        self.emulator: Any = pg.emulator
        self._labels: dict[str, str] = {}
        self._last_msg_id: str | None = None
        # every HTTP delivery to the SDK (the emulator's public ``deliver`` seam), so a
        # test can deliver one again as the platform retries it
        self._deliveries: list[tuple[str, dict[str, str], bytes]] = []  # the last 20
        self._deliveries_lock = threading.Lock()  # the emulator delivers from many threads
        self._deliver = self.emulator.deliver

        def recording(url: str, headers: Any, body: bytes) -> Any:
            with self._deliveries_lock:
                self._deliveries.append((url, dict(headers), body))
                del self._deliveries[:-20]
            return self._deliver(url, headers, body)

        self.emulator.deliver = recording

    # -- lifecycle ---------------------------------------------------------------------------
    @classmethod
    @contextmanager
    def start(
        cls, agent: AgentBridge, clock: FakeClock, **channel_options: Any
    ) -> Iterator[Driver]:
        """The platform's emulator and channel (``channel_options``: `ChannelConfig`
        overrides, e.g. admission limits)."""
        options = dict(cls.playground_options)
        if channel_options:
            options["channel_options"] = channel_options
        with Playground(platform=cls.platform, agent=agent, clock=clock, **options) as pg:
            driver = cls(pg, clock)
            # the fake clock stands still between ticks (a reset waits for idle without
            # one): a write past a chat's burst would wait real seconds for its token.
            # The rate-limit rule turns the pacing on (Telegram's stays on as before).
            pacer = getattr(pg.channel, "outbound_pacer", None)
            if pacer is not None:
                pacer.enabled = False
            driver.ready()
            yield driver

    def ready(self) -> None:
        """Wait until the channel can receive (long connections connected)."""
        for connection in getattr(self.pg.channel, "connections", ()) or ():
            wait_for(lambda c=connection: c.state().status == "connected", "the connection")

    def reset(self) -> None:
        """Between tests: no run active, no request pending, the emulator forgets."""
        wait_for(lambda: self.pg.channel.wait_idle(0.2), "the channel to go idle")
        wait_for(lambda: not self.pg.channel.pending_request_ids(), "no pending request")
        self._drain()
        response = requests.post(f"{self.pg.url}/_emulator/reset", timeout=5)
        assert response.status_code == 200

    def require(self, capability: str) -> None:
        """Skip (with the platform's reason) when the platform lacks ``capability``."""
        reason = getattr(self.caps, capability)
        if reason is not None:
            pytest.skip(f"{self.platform} has no {capability.replace('_', ' ')}: {reason}")

    def tick(self) -> None:
        """Let the channel's fake time pass a little (card flushes are >= 500 ms apart)."""
        self.clock.advance(0.25)

    def settle(self) -> None:
        """Let pending flushes and projections run out (fake time + bounded real time).

        Tests call it before checking that something did NOT happen, so each step keeps
        its real pause: work that has not reached the channel's pools yet (an ingress
        request's deferred part, a run about to start) gets the time to show."""
        for _ in range(8):
            self.tick()
            time.sleep(0.01)

    def _drain(self) -> None:
        """The reset's settle, for a channel already idle with nothing pending: eight
        clock steps, each followed by the channel finishing what became due (the fake
        clock hands due timers to the pool in this thread, so an idle channel means
        their work is done); no real pause. A step whose work is still running after
        `BOUND_S` fails the reset, naming it."""
        for step in range(8):
            self.tick()
            wait_for(
                lambda: self.pg.channel.wait_idle(0.2), f"the channel to go idle (step {step})"
            )

    # -- the emulator's generic surface ------------------------------------------------------
    def state(self) -> dict[str, Any]:
        response = requests.get(f"{self.pg.url}/_emulator/state", timeout=5)
        assert response.status_code == 200
        return dict(response.json())

    def bot_views(self) -> list[dict[str, Any]]:
        """The bot's cards/messages in timeline order."""
        current = self.state()
        return [
            current["views"][e["card"]]
            for e in current["timeline"]
            if e["kind"] == "card" and e["card"] in current["views"]
        ]

    def chat_texts(self) -> list[str]:
        """Every text the bot shows in the chat now (messages and cards), in order."""
        current = self.state()
        out = []
        for entry in current["timeline"]:
            if entry.get("from") != "bot":
                continue
            if entry["kind"] == "card":
                view = current["views"].get(entry["card"]) or {}
                out.append(str(view.get("text") or view.get("content") or ""))
            else:
                out.append(str(entry.get("text", "")))
        return out

    def send(self, text: str) -> None:
        """The owner sends ``text``; the channel ACKs it."""
        response = requests.post(f"{self.pg.url}/_emulator/send", json={"text": text}, timeout=5)
        assert response.status_code == 200, response.text
        assert response.json()["status"] == 200, response.json()
        self._last_msg_id = str(response.json()["msgId"])

    def send_as(
        self,
        text: str,
        *,
        user: str | None = None,
        chat: str | None = None,
        group: bool = False,
        mentions_bot: bool = False,
        thread: str | None = None,
    ) -> str:
        """``user`` (None: the owner) sends ``text`` to the bot: in a direct chat, or in
        a group (``chat``: a group of the platform's id shape, None: the emulator's),
        mentioning the bot the platform's structured way or not; the channel ACKs it.
        Returns the message id."""
        payload: dict[str, Any] = {"text": text, "group": group, "mentionsBot": mentions_bot}
        for key, value in (("userId", user), ("chatId", chat), ("threadId", thread)):
            if value is not None:
                payload[key] = value
        response = requests.post(f"{self.pg.url}/_emulator/send", json=payload, timeout=5)
        assert response.status_code == 200, response.text
        assert response.json()["status"] == 200, response.json()
        return str(response.json()["msgId"])

    #: what a platform's people type to address everybody in a group (never the bot)
    everyone_forms: ClassVar[tuple[str, ...]] = ("@all", "@everyone", "@here")
    #: a group chat of the platform besides the emulator's default one (its id's shape)
    other_group: ClassVar[str] = "other-group"
    #: API paths (parts) of the platform's "working on it" indicators
    indicator_paths: ClassVar[tuple[str, ...]] = ()

    def indicator_shown(self) -> bool | None:
        """Whether the person sees the "working on it" indicator now, where the emulator
        keeps it as state (a reaction, a typing status); None where it only expires in
        real time after the bot's last call (a typing action), so only calls tell."""
        return None

    def indicators(self) -> list[str]:
        """The indicator calls (reactions, typing, status) the bot made so far."""
        return [
            c["path"]
            for c in self.emulator.calls()
            if any(part in c["path"] for part in self.indicator_paths)
        ]

    #: two threads of one group chat (their ids' shape), where the platform has threads
    thread_ids: ClassVar[tuple[str, str]] = ("thread-a", "thread-b")

    def landed(self) -> list[tuple[str, str | None]]:
        """``(text, thread)`` of every message and card the bot shows, in order: the
        thread (the emulator's ``threadId``) it was posted in, None: the chat itself."""
        current = self.state()
        out = []
        for entry in current["timeline"]:
            if entry.get("from") != "bot":
                continue
            if entry["kind"] == "card":
                view = current["views"].get(entry["card"]) or {}
                text = str(view.get("text") or view.get("content") or "")
            else:
                text = str(entry.get("text", ""))
            out.append((text, entry.get("threadId")))
        return out

    #: a chat of the platform other than the emulated one (its id's shape)
    other_chat: ClassVar[str] = "other-chat"

    @property
    def live_message_limit(self) -> int | None:
        """Where the live message of a segment holds at most this many characters and the
        rest of a longer final answer is posted as new messages (None: no such limit)."""
        return None

    #: the ingress path a person's message is delivered to (HTTP ingress)
    message_path: ClassVar[str] = ""

    def last_delivery(self) -> tuple[str, dict[str, str], bytes]:
        """The last HTTP delivery of a person's message to the SDK."""
        with self._deliveries_lock:
            return next(d for d in reversed(self._deliveries) if d[0].endswith(self.message_path))

    def redeliver_last_message(self) -> int:
        """Deliver the owner's last message again, as the platform retries a delivery it
        thinks was lost (same message / event id); the channel's answer status."""
        url, headers, body = self.last_delivery()
        return int(self._deliver(url, headers, body).status)

    def click(
        self, card_id: str, action: str, form: Any = None, user: str | None = None
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {"action": action, "form": form or {}}
        if user is not None:
            payload["userId"] = user
        response = requests.post(
            f"{self.pg.url}/_emulator/cards/{card_id}/action", json=payload, timeout=5
        )
        assert response.status_code == 200, response.text
        body = dict(response.json())
        assert body["status"] == 200, body
        return body

    # -- output segments ---------------------------------------------------------------------
    def segments(self) -> list[Segment]:
        raise NotImplementedError

    def segment(self, containing: str) -> Segment | None:
        """The segment whose text contains ``containing`` (the newest), or None."""
        found = [s for s in self.segments() if containing in s.text]
        return found[-1] if found else None

    def wait_segment(self, containing: str, state: str) -> Segment:
        assert state in SEGMENT_STATES

        def find() -> Segment | None:
            seg = self.segment(containing)
            return seg if seg is not None and seg.state == state else None

        return wait_for(
            find,
            lambda: f"a {state} segment with {containing!r} (now: {self.segments()})",
            tick=self.tick,
        )

    def wait_stoppable(self, containing: str) -> Segment:
        """The running segment with ``containing``, once its Stop button shows."""

        def find() -> Segment | None:
            seg = self.segment(containing)
            return seg if seg is not None and seg.state == "running" and seg.stop_id else None

        return wait_for(
            find, lambda: f"a Stop button on {containing!r}: {self.segments()}", tick=self.tick
        )

    def failures(self) -> int:
        """How many times the chat tells that a run failed (failed segments + notices)."""
        raise NotImplementedError

    def stop(self, segment: Segment, user: str | None = None) -> None:
        """``user`` (None: the owner) presses the Stop button of ``segment``."""
        assert segment.stop_id is not None, f"{segment} has no Stop button"
        self.click(segment.stop_id, "stop", user=user)

    def stop_run(self, segment: Segment | None) -> None:
        """The owner stops the run showing ``segment`` (Stop button or ``/cancel``)."""
        assert segment is not None
        self.stop(segment)

    # -- notices -----------------------------------------------------------------------------
    def notices(self, user: str) -> list[str]:
        """The notices shown to ``user`` alone (ephemeral messages, toasts)."""
        raise NotImplementedError

    # -- questions ---------------------------------------------------------------------------
    def prompts(self) -> list[Prompt]:
        """The questions shown, each with the text it was first shown with (a settled
        form may show its answers or terminal label instead)."""
        out = []
        for p in self._prompts():
            text = self._labels.setdefault(p.id, p.text)
            out.append(Prompt(p.id, p.native, p.state, text, p.view))
        return out

    def _prompts(self) -> list[Prompt]:
        raise NotImplementedError

    def prompt(self, containing: str) -> Prompt | None:
        found = [p for p in self.prompts() if containing in p.text]
        return found[-1] if found else None

    def wait_prompt(self, containing: str, state: str = "pending") -> Prompt:
        assert state in PROMPT_STATES

        def find() -> Prompt | None:
            p = self.prompt(containing)
            return p if p is not None and p.state == state else None

        return wait_for(find, lambda: f"a {state} question with {containing!r}: {self.prompts()}")

    def inputs(self, prompt: Prompt) -> list[str]:
        """What the person can still press on ``prompt`` (buttons / form actions)."""
        current = next((p for p in self.prompts() if p.id == prompt.id), prompt)
        view = current.view
        keys = [b["text"] for row in view.get("keyboard") or [] for b in row if b.get("data")]
        return keys + [a for a in view.get("actions") or [] if a != "tap"]

    def shown(self, prompt: Prompt) -> str:
        """Everything the chat shows of ``prompt`` now (its answers once submitted)."""
        current = next((p for p in self.prompts() if p.id == prompt.id), prompt)
        return json.dumps(current.view, ensure_ascii=False)

    def answer(self, prompt: Prompt, label: str, user: str | None = None) -> None:
        """``user`` answers a one-question, single-choice ``prompt`` with ``label``."""
        raise NotImplementedError

    def cancel(self, prompt: Prompt, user: str | None = None) -> None:
        raise NotImplementedError

    # -- approvals ---------------------------------------------------------------------------
    def approval_buttons(self, title: str) -> dict[str, Any] | None:
        """The bot message offering approval buttons for the tool ``title``: ``{"id",
        "buttons": {label: data}}`` (no buttons once settled), or None."""
        for v in self.bot_views():
            if title not in json.dumps(v, ensure_ascii=False):
                continue
            buttons = {b["text"]: b["data"] for row in v.get("keyboard") or [] for b in row}
            return {"id": v["id"], "buttons": {k: d for k, d in buttons.items() if d}}
        return None

    def presentation_keyboard(self, label: str) -> dict[str, Any] | None:
        """The bot message whose buttons include ``label``: ``{"id", "buttons": {label:
        {"data", "url"}}}``, or None."""
        for v in self.bot_views():
            buttons = {b["text"]: b for row in v.get("keyboard") or [] for b in row}
            if label in buttons:
                return {"id": v["id"], "buttons": buttons}
        return None

    def press(self, approval: dict[str, Any], label: str, user: str | None = None) -> None:
        """``user`` presses the approval button ``label``."""
        self.click(approval["id"], "tap", {"data": approval["buttons"][label]}, user=user)

    # -- presentations -----------------------------------------------------------------------
    def presentations(self, title: str) -> list[dict[str, Any]]:
        """The bot messages rendering a presentation titled ``title``: ``{"messageId",
        "text", "pinned"}``; a ``messageId`` of None means no platform message id."""
        raise NotImplementedError


# -- DingTalk ----------------------------------------------------------------------------------


def _status_state(raw: str) -> str:
    return {"stopped": "cancelled"}.get(raw, raw)


class DingtalkDriver(Driver):
    platform = "dingtalk"
    other_chat = "cidOtherChat"
    other_group = "cidOtherGroup"
    everyone_forms = ("@所有人", "@all", "@everyone", "@here")
    indicator_paths = ("/v1.0/robot/emotion/",)
    caps = Capabilities(
        pins="DingTalk robots cannot pin messages",
        presentation_buttons="robot Markdown shows a value button as a text line (links stay)",
        threads="DingTalk group conversations have no threads: a group is one conversation",
        attachments_in=None,
        files_out=None,
        final_send="a segment's card opens with its first text and ends holding the answer",
    )

    def indicator_shown(self) -> bool:
        return bool(self.state().get("reactions"))  # the eye on the person's message

    def redeliver_last_message(self) -> int:
        """Stream mode: the gateway sends the ACKed frame again (same message id)."""
        frame = next(c for c in reversed(self.emulator.callbacks()) if c["kind"] == "robot")
        ack = self.emulator.stream.redeliver(frame["messageId"])
        return 200 if ack is not None and ack.code == 200 else 0

    def segments(self) -> list[Segment]:
        return [
            Segment(
                v["id"],
                v.get("content", ""),
                _status_state(v["state"]),
                v["id"] if "stop" in v["actions"] else None,
            )
            for v in self.bot_views()
            if v["kind"] == "status"
        ]

    def _markdown(self) -> list[dict[str, Any]]:
        return [
            e for e in self.state()["timeline"] if e.get("from") == "bot" and e["kind"] == "message"
        ]

    def failures(self) -> int:
        from channelkit.platforms.dingtalk.adapter import FAILED_TEXT

        notices = [e for e in self._markdown() if FAILED_TEXT in e.get("text", "")]
        return len(notices) + sum(1 for s in self.segments() if s.state == "failed")

    def notices(self, user: str) -> list[str]:
        out = []
        for call in self.emulator.calls("/v1.0/robot/oToMessages/batchSend"):
            body = call["body"]
            if body.get("userIds") == [user]:
                param = json.loads(body.get("msgParam") or "{}")
                out.append(str(param.get("text") or param.get("content") or ""))
        return out

    def _prompts(self) -> list[Prompt]:
        out = [
            Prompt(v["id"], True, v["state"], f"{v.get('desc', '')}", v)
            for v in self.bot_views()
            if v["kind"] == "question"
        ]
        out += [
            Prompt(str(e["seq"]), False, "pending", e.get("text", ""), e)
            for e in self._markdown()
            if "/approve" in e.get("text", "") or "reply with" in e.get("text", "").lower()
        ]
        return out

    def answer(self, prompt: Prompt, label: str, user: str | None = None) -> None:
        (question,) = prompt.view["questions"]
        value = next(o["value"] for o in question["options"] if o["text"] == label)
        self.click(prompt.id, "submit", {question["name"]: value}, user=user)

    def cancel(self, prompt: Prompt, user: str | None = None) -> None:
        self.click(prompt.id, "cancel", user=user)

    def approval_buttons(self, title: str) -> dict[str, Any] | None:
        """DingTalk: an approval card (one choice per agent option, then Submit)."""
        for v in self.bot_views():
            if v["kind"] == "question" and v.get("title") == title:
                if v["state"] != "pending":
                    return {"id": v["id"], "buttons": {}}
                (question,) = v["questions"]
                options = {o["text"]: o["value"] for o in question["options"]}
                return {"id": v["id"], "buttons": options}
        return None

    def press(self, approval: dict[str, Any], label: str, user: str | None = None) -> None:
        self.click(approval["id"], "submit", {"0": approval["buttons"][label]}, user=user)

    def presentations(self, title: str) -> list[dict[str, Any]]:
        out = []
        for call in self.emulator.calls():
            body = call.get("body") or {}
            if not isinstance(body, dict) or "msgParam" not in body:
                continue
            param = json.loads(body.get("msgParam") or "{}")
            if param.get("title") == title:
                response = call.get("response") or {}
                message_id = response.get("processQueryKey") if isinstance(response, dict) else None
                out.append(
                    {
                        "messageId": message_id,
                        "text": param.get("text"),
                        "native": body.get("msgKey") != "sampleText",
                        "pinned": False,
                    }
                )
        return out


# -- Feishu ------------------------------------------------------------------------------------


class FeishuDriver(Driver):
    platform = "feishu"
    caps = Capabilities(attachments_in=None, files_out=None)
    thread_ids = ("omt_thread_a", "omt_thread_b")
    other_chat = "oc_other_chat"
    other_group = "oc_other_group"
    everyone_forms = ("@_all", "@所有人", "@all", "@everyone", "@here")
    indicator_paths = ("/reactions",)
    message_path = "/feishu/events"

    def indicator_shown(self) -> bool:
        return bool(self.state().get("reactions"))  # the reaction on the person's message

    def redeliver_last_message(self) -> int:
        """Feishu retries an event with the same ``event_id`` under a fresh signature."""
        url, _, _ = self.last_delivery()
        with self._deliveries_lock:
            envelope = self._sealed[-1]
        headers, body = self._seal(envelope)
        return int(self._deliver(url, headers, body).status)

    def segments(self) -> list[Segment]:
        return [
            Segment(
                v["id"],
                v.get("content", ""),
                _status_state(v["state"]),
                v["id"] if "stop" in v["actions"] else None,
            )
            for v in self.bot_views()
            if v["kind"] == "status"
        ]

    def _texts(self) -> list[dict[str, Any]]:
        return [
            e for e in self.state()["timeline"] if e.get("from") == "bot" and e["kind"] == "message"
        ]

    def failures(self) -> int:
        notices = [e for e in self._texts() if "Failed, please retry" in e.get("text", "")]
        return len(notices) + sum(1 for s in self.segments() if s.state == "failed")

    def click(
        self, card_id: str, action: str, form: Any = None, user: str | None = None
    ) -> dict[str, Any]:
        body = super().click(card_id, action, form, user)
        self._toasts.append((user, card_id, body))
        return body

    def __init__(self, pg: Playground, clock: FakeClock) -> None:
        super().__init__(pg, clock)
        self._toasts: list[tuple[str | None, str, dict[str, Any]]] = []
        self._sealed: list[Any] = []  # the message events sealed for delivery
        self._seal = self.emulator.seal

        def seal(payload: Any) -> Any:
            if (payload.get("header") or {}).get("event_type") == "im.message.receive_v1":
                with self._deliveries_lock:
                    self._sealed.append(payload)
                    del self._sealed[:-20]
            return self._seal(payload)

        self.emulator.seal = seal

    def reset(self) -> None:
        super().reset()
        self._toasts.clear()

    def notices(self, user: str) -> list[str]:
        """Feishu's toast answers the clicker alone."""
        out = []
        for who, _, body in self._toasts:
            if who != user:
                continue
            try:
                toast = json.loads(body.get("body") or "{}").get("toast") or {}
            except ValueError:
                continue
            if toast.get("content"):
                out.append(str(toast["content"]))
        return out

    def _prompts(self) -> list[Prompt]:
        out = []
        for v in self.bot_views():
            if v["kind"] != "question":
                continue
            label = " ".join(q["label"] for q in v.get("questions", []))
            out.append(Prompt(v["id"], True, v["state"], label or v.get("desc", ""), v))
        out += [
            Prompt(str(e["seq"]), False, "pending", e.get("text", ""), e)
            for e in self._texts()
            if "/approve" in e.get("text", "") or "reply with" in e.get("text", "").lower()
        ]
        return out

    def answer(self, prompt: Prompt, label: str, user: str | None = None) -> None:
        (question,) = prompt.view["questions"]
        value = next(o["value"] for o in question["options"] if o["text"] == label)
        self.click(prompt.id, "submit", {question["name"]: value}, user=user)

    def cancel(self, prompt: Prompt, user: str | None = None) -> None:
        self.click(prompt.id, "cancel", user=user)

    def presentations(self, title: str) -> list[dict[str, Any]]:
        return [
            {
                "messageId": v.get("messageId"),
                "text": v.get("content"),
                "native": True,  # an interactive card
                "pinned": v["pinned"],
            }
            for v in self.bot_views()
            if v["kind"] not in ("status", "question") and title in (v.get("title") or "")
        ]


# -- Telegram ----------------------------------------------------------------------------------


class TelegramDriver(Driver):
    platform = "telegram"
    thread_ids = ("101", "202")  # forum topics (message_thread_id)
    other_chat = "777001"
    other_group = "-1009876543210"
    indicator_paths = ("sendChatAction", "sendMessageDraft")
    # webhook ingress: a redelivered update is the same POST again (the polling path
    # has its own tests)
    playground_options = {"ingress": "webhook"}
    message_path = "/telegram/webhook"
    caps = Capabilities(
        stop_button="a run is stopped with /cancel (streamed drafts carry no buttons)",
        attachments_in=None,
        files_out=None,
    )

    def _messages(self) -> list[dict[str, Any]]:
        return self.bot_views()

    def segments(self) -> list[Segment]:
        from channelkit.platforms.telegram.adapter import TEXT_FAILED
        from channelkit.platforms.telegram.output import CANCELLED_MARKER, FAILED_MARKER

        out = []
        for v in self._messages():
            text = v.get("text", "")
            if v["keyboard"] or v["state"] == "deleted" or text == TEXT_FAILED:
                continue
            state = "completed"
            if text.endswith("\n\n" + CANCELLED_MARKER):
                state = "cancelled"
            elif text.endswith("\n\n" + FAILED_MARKER):
                state = "failed"
            out.append(Segment(v["id"], text, state))
        draft = self.state().get("draft")
        if draft and draft.get("text"):
            out.append(Segment("draft", str(draft["text"]), "running"))
        return out

    def failures(self) -> int:
        from channelkit.platforms.telegram.adapter import TEXT_FAILED

        return sum(1 for v in self._messages() if v.get("text") == TEXT_FAILED)

    def stop_run(self, segment: Segment | None) -> None:
        self.send("/cancel")

    def click(
        self, card_id: str, action: str, form: Any = None, user: str | None = None
    ) -> dict[str, Any]:
        before = {q["id"] for q in self.emulator.callback_answers()}
        body = super().click(card_id, action, form, user)
        for q in self.emulator.callback_answers():
            if q["id"] not in before:
                self._taps[q["id"]] = user
        return body

    def __init__(self, pg: Playground, clock: FakeClock) -> None:
        super().__init__(pg, clock)
        self._taps: dict[str, str | None] = {}

    def notices(self, user: str) -> list[str]:
        """answerCallbackQuery's text is shown to the person who tapped."""
        out = []
        for q in self.emulator.callback_answers():
            if self._taps.get(q["id"]) == user and q.get("answer"):
                out.append(str(q["answer"]))
        return out

    def _prompts(self) -> list[Prompt]:
        from channelkit.platforms.telegram.questions import (
            LABEL_CANCELLED,
            LABEL_EXPIRED,
            LABEL_SUBMITTED,
        )

        out = []
        for v in self._messages():
            text = v.get("text", "")
            if v.get("awaitsAnswer"):
                out.append(Prompt(v["id"], True, "pending", text, v))
                continue
            for label, state in (
                (LABEL_SUBMITTED, "submitted"),
                (LABEL_CANCELLED, "cancelled"),
                (LABEL_EXPIRED, "expired"),
            ):
                if label in text and "\n" in text:
                    out.append(Prompt(v["id"], True, state, text, v))
                    break
            else:
                if "/approve" in text or "reply with" in text.lower():
                    out.append(Prompt(v["id"], False, "pending", text, v))
        return out

    def answer(self, prompt: Prompt, label: str, user: str | None = None) -> None:
        data = next(b["data"] for row in prompt.view["keyboard"] for b in row if b["text"] == label)
        self.click(prompt.id, "tap", {"data": data}, user=user)

    def cancel(self, prompt: Prompt, user: str | None = None) -> None:
        data = next(
            b["data"] for row in prompt.view["keyboard"] for b in row if b["text"] == "Cancel"
        )
        self.click(prompt.id, "tap", {"data": data}, user=user)

    def presentations(self, title: str) -> list[dict[str, Any]]:
        return [
            {
                "messageId": v["id"],
                "text": v["text"],
                "native": bool(v["keyboard"]),  # its buttons as an inline keyboard
                "pinned": v["pinned"],
            }
            for v in self._messages()
            if v.get("text", "").startswith(title)
        ]


# -- Slack -------------------------------------------------------------------------------------

_SLACK_CONTROL = {
    "Working…": "running",
    "Done.": "completed",
    "Stopped.": "cancelled",
    "Failed.": "failed",
}


class SlackDriver(Driver):
    platform = "slack"
    caps = Capabilities(
        attachments_in=None,
        files_out=None,
        working_indicator="Slack shows a status only in an assistant thread; a direct "
        "message outside one shows the streamed answer alone",
    )
    thread_ids = ("1700000000.000100", "1700000000.000200")  # the threads' parent ts
    other_chat = "D0OTHERCHAT"
    other_group = "C0OTHERGROUP"
    everyone_forms = ("<!everyone>", "<!here>", "<!channel>", "@everyone", "@here")
    indicator_paths = ("assistant.threads.setStatus", "chat.startStream")
    message_path = "/slack/events"

    def indicator_shown(self) -> bool:
        return bool(self.state().get("assistantStatus"))

    def redeliver_last_message(self) -> int:
        """Slack retries an event (same ``event_id``) with ``X-Slack-Retry-Num``, signed
        anew."""
        from channelkit.platforms.slack.ingress import (
            RETRY_HEADER,
            SIGNATURE_HEADER,
            TIMESTAMP_HEADER,
            sign,
        )

        url, headers, body = self.last_delivery()
        timestamp = str(int(time.time()) + 1)
        signed = {
            **headers,
            RETRY_HEADER: "1",
            TIMESTAMP_HEADER: timestamp,
            SIGNATURE_HEADER: sign(self.emulator.signing_secret, timestamp, body),
        }
        return int(self._deliver(url, signed, body).status)

    def _is_control(self, v: dict[str, Any]) -> bool:
        return "stop" in v["actions"] or (
            v.get("text") in _SLACK_CONTROL and not v.get("ephemeral")
        )

    def segments(self) -> list[Segment]:
        from channelkit.platforms.slack.adapter import TEXT_FAILED
        from channelkit.platforms.slack.output import TEXT_STOPPED

        current = self.state()
        placed = [  # (view, the thread it is in): threads interleave in the timeline
            (current["views"][e["card"]], e.get("threadId"))
            for e in current["timeline"]
            if e["kind"] == "card" and e["card"] in current["views"]
        ]
        placed = [(v, thread) for v, thread in placed if not v.get("ephemeral")]
        out = []
        for i, (v, thread) in enumerate(placed):
            if v["kind"] != "message" or self._is_control(v) or v.get("text") == TEXT_FAILED:
                continue
            control = None  # its own: the first control before the next message
            for c in (c for c, at in placed[i + 1 :] if at == thread):  # of its thread
                if self._is_control(c):
                    control = c
                    break
                if c["kind"] == "message" and c.get("text") != TEXT_FAILED:
                    break  # a message posted without a control (a delivered answer)
            text = v.get("text", "")
            if v.get("streaming"):
                state = "running"
            elif control is not None and "stop" not in control["actions"]:
                state = _SLACK_CONTROL.get(control.get("text", ""), "completed")
            elif text.endswith(TEXT_STOPPED):
                state = "cancelled"
            elif control is not None:
                state = "running"
            else:
                state = "completed"
            live = control is not None and "stop" in control["actions"]
            stop_id = control["id"] if live and control is not None else None
            out.append(Segment(v["id"], text, state, stop_id))
        return out

    def failures(self) -> int:
        from channelkit.platforms.slack.adapter import TEXT_FAILED

        views = [v for v in self.bot_views() if not v.get("ephemeral")]
        notices = sum(1 for v in views if v["kind"] == "message" and v.get("text") == TEXT_FAILED)
        return notices + sum(1 for s in self.segments() if s.state == "failed")

    def shown(self, prompt: Prompt) -> str:
        """The form's last ``chat.update`` (its blocks carry the answers)."""
        calls = self.emulator.calls("/chat.update")
        updates = [c["body"] for c in calls if c["body"].get("ts") == prompt.id]
        return json.dumps(updates[-1] if updates else prompt.view, ensure_ascii=False)

    def notices(self, user: str) -> list[str]:
        return [n["text"] for n in self.emulator.ephemerals() if n["user"] == user]

    def _prompts(self) -> list[Prompt]:
        from channelkit.platforms.slack.questions import TEXT_TERMINAL

        terminal = {label: state for state, label in TEXT_TERMINAL.items()}
        out = []
        for v in self.bot_views():
            if v.get("ephemeral"):
                continue
            if v["kind"] == "question":
                label = " ".join(q["label"] for q in v.get("questions", []))
                out.append(Prompt(v["id"], True, "pending", label, v))
            elif v["id"] in self._labels and v.get("text") in terminal:
                out.append(Prompt(v["id"], True, terminal[v["text"]], "", v))
            elif "/approve" in v.get("text", "") or "reply with" in v.get("text", "").lower():
                out.append(Prompt(v["id"], False, "pending", v["text"], v))
        return out

    def answer(self, prompt: Prompt, label: str, user: str | None = None) -> None:
        (question,) = prompt.view["questions"]
        value = next(o["value"] for o in question["options"] if o["text"] == label)
        self.click(prompt.id, "submit", {question["name"]: value}, user=user)

    def cancel(self, prompt: Prompt, user: str | None = None) -> None:
        self.click(prompt.id, "cancel", user=user)

    def presentations(self, title: str) -> list[dict[str, Any]]:
        out = []
        views = {v["id"]: v for v in self.bot_views()}
        for call in self.emulator.calls("/chat.postMessage"):
            body = call.get("body") or {}
            blocks = body.get("blocks")
            if title not in json.dumps(blocks) and title not in str(body.get("text")):
                continue
            response = call.get("response") or {}
            ts = response.get("ts") if isinstance(response, dict) else None
            out.append(
                {
                    "messageId": ts,
                    "text": body.get("text"),
                    "native": bool(blocks),
                    "pinned": bool(views.get(ts, {}).get("pinned")),
                }
            )
        return out


# -- Weixin ------------------------------------------------------------------------------------


class WeixinDriver(Driver):
    platform = "weixin"
    other_chat = "other-user@im.wechat"
    caps = Capabilities(
        live_output="iLink messages cannot be edited: a segment is sent once, when it ends",
        stop_button="iLink has no buttons: a run is stopped with /cancel",
        keeps_failed_text="a segment is sent when it ends, and a failed run sends no text",
        private_notice="iLink has no ephemeral messages or toasts",
        foreign_users="iLink has no buttons anybody else could press",
        native_questions="iLink has no cards: a question is the text prompt",
        approval_buttons="iLink has no buttons: /approve or /deny",
        native_presentation="iLink shows plain text only",
        presentation_buttons="iLink shows plain text only",
        pins="iLink has no pins",
        files_out=None,
        attachments_in=None,
        image_names="an iLink image message carries no file name",
        groups="iLink bots have direct chats only",
        threads="iLink bots have direct chats only, without threads",
        edited_queue_notice="iLink messages cannot be edited: the notice is sent once",
    )
    indicator_paths = ("/ilink/bot/sendtyping",)

    def indicator_shown(self) -> bool:
        return bool(self.emulator.typing())  # the last sendtyping said "typing"

    def bot_views(self) -> list[dict[str, Any]]:
        """The bot's text messages (as ``{"text"}``) and file cards in timeline order."""
        current = self.state()
        out: list[dict[str, Any]] = []
        for entry in current["timeline"]:
            if entry.get("from") != "bot":
                continue
            if entry["kind"] == "card" and entry["card"] in current["views"]:
                out.append(current["views"][entry["card"]])
            elif entry["kind"] == "message":
                out.append({"text": entry.get("text", "")})
        return out

    def redeliver_last_message(self) -> int:
        """iLink answers a message again to a poll that did not move past it."""
        response = requests.post(
            f"{self.pg.url}/_emulator/redeliver", json={"msgId": self._last_msg_id}, timeout=5
        )
        assert response.status_code == 200, response.text
        return 200

    def ready(self) -> None:
        """The channel receives once its ``getupdates`` long poll is held."""
        wait_for(lambda: self.state().get("waitingPolls"), "the channel's long poll")

    def _texts(self) -> list[dict[str, Any]]:
        return [
            e for e in self.state()["timeline"] if e.get("from") == "bot" and e["kind"] == "message"
        ]

    def segments(self) -> list[Segment]:
        from channelkit.platforms.weixin.adapter import TEXT_FAILED

        return [
            Segment(str(e["seq"]), str(e.get("text", "")), "completed")
            for e in self._texts()
            if e.get("text") != TEXT_FAILED
        ]

    def failures(self) -> int:
        from channelkit.platforms.weixin.adapter import TEXT_FAILED

        return sum(1 for e in self._texts() if e.get("text") == TEXT_FAILED)

    def stop_run(self, segment: Segment | None) -> None:
        self.send("/cancel")

    def notices(self, user: str) -> list[str]:
        return []

    def _prompts(self) -> list[Prompt]:
        return [
            Prompt(str(e["seq"]), False, "pending", str(e.get("text", "")), e)
            for e in self._texts()
            if "/approve" in e.get("text", "")
        ]

    def presentations(self, title: str) -> list[dict[str, Any]]:
        sent = {
            (c.get("body") or {}).get("msg", {}).get("client_id"): c
            for c in self.emulator.calls("/ilink/bot/sendmessage")
        }
        return [
            {"messageId": client_id, "text": json.dumps(call["body"]), "native": False}
            | {"pinned": False}
            for client_id, call in sent.items()
            if title in json.dumps(call.get("body"), ensure_ascii=False)
        ]


# -- Discord -----------------------------------------------------------------------------------


class DiscordDriver(Driver):
    """Discord over its emulator: the person's messages are Gateway dispatches, clicks
    are interactions (on the Gateway; `DiscordInteractionsDriver`: signed POSTs to the
    interactions endpoint)."""

    platform = "discord"
    caps = Capabilities(attachments_in=None, files_out=None)
    other_chat = "1300000000000000999"
    other_group = "1500000000000000999"
    thread_ids = ("1600000000000000001", "1600000000000000002")
    everyone_forms = ("@everyone", "@here")
    indicator_paths = ("/typing",)
    sender_attribute = "user_id"

    @property
    def live_message_limit(self) -> int | None:
        from channelkit.platforms.discord.output import MAX_CONTENT

        return MAX_CONTENT

    def redeliver_last_message(self) -> int:
        """The same ``MESSAGE_CREATE`` dispatched again (Discord redelivers an event the
        bot may not have handled after a new session)."""
        response = requests.post(
            f"{self.pg.url}/_emulator/redeliver", json={"msgId": self._last_msg_id}, timeout=5
        )
        assert response.status_code == 200, response.text
        return int(response.json()["status"])

    @staticmethod
    def dedup_gates(channel: Any) -> list[Any]:
        """The message-id guard every ``MESSAGE_CREATE`` passes (the Gateway's sequence
        numbers drop a resume's replays before it)."""
        return [channel._seen]

    def send_as(self, text: str, **kwargs: Any) -> str:
        msg_id = super().send_as(text, **kwargs)
        self._last_msg_id = msg_id
        return msg_id

    def _views(self) -> list[dict[str, Any]]:
        return [v for v in self.bot_views() if not v.get("ephemeral") and v["state"] != "deleted"]

    @staticmethod
    def _datas(view: dict[str, Any]) -> list[str]:
        ids = [b["data"] or "" for row in view.get("keyboard") or [] for b in row]
        return ids + [s["customId"] or "" for s in view.get("selects") or []]

    def __init__(self, pg: Playground, clock: FakeClock) -> None:
        super().__init__(pg, clock)
        self._forms: set[str] = set()  # messages seen as a question form
        # Discord's 3 s window for answering a click is real time: on a loaded machine a
        # slow thread must not turn into a lost click here (the window itself is tested
        # by the emulator's and the channel's own tests).
        self.emulator.interaction_ack_seconds = 15.0

    def reset(self) -> None:
        super().reset()
        self._forms.clear()

    @staticmethod
    def _in_every_locale(text: str) -> set[str]:
        """A catalog text (a Discord ``TEXT_*`` constant) in every language: a channel
        with a ``locale``, or a person whose client tells theirs, sees one of them."""
        from channelkit.core.catalog import CATALOG

        key = getattr(text, "key", None)
        return {table[key] for table in CATALOG.values()} if key else {text}

    def _is_segment(self, view: dict[str, Any]) -> bool:
        from channelkit.platforms.discord.adapter import TEXT_FAILED

        text = view.get("text", "")
        datas = self._datas(view)
        if any(d.startswith(("ck:q:", "ck:ap:")) for d in datas) or view["id"] in self._forms:
            return False
        failed = self._in_every_locale(TEXT_FAILED)
        if text in failed or "/approve" in text or "reply with" in text.lower():
            return False
        return not any(d and not d.startswith("ck:stop:") for d in datas)

    def segments(self) -> list[Segment]:
        from channelkit.platforms.discord.output import TEXT_FAILED_MARK, TEXT_STOPPED

        stopped = tuple(self._in_every_locale(TEXT_STOPPED))
        failed = tuple(self._in_every_locale(TEXT_FAILED_MARK))
        out = []
        for v in self._views():
            if not self._is_segment(v):
                continue
            text = v.get("text", "")
            stop = any(d.startswith("ck:stop:") for d in self._datas(v))
            if stop:
                state = "running"
            elif text.rstrip().endswith(stopped):
                state = "cancelled"
            elif text.rstrip().endswith(failed):
                state = "failed"
            else:
                state = "completed"
            out.append(Segment(v["id"], text, state, v["id"] if stop else None))
        return out

    def failures(self) -> int:
        from channelkit.platforms.discord.adapter import TEXT_FAILED

        failed = self._in_every_locale(TEXT_FAILED)
        notices = sum(1 for v in self._views() if v.get("text") in failed)
        return notices + sum(1 for s in self.segments() if s.state == "failed")

    def notices(self, user: str) -> list[str]:
        """Ephemeral messages: only the clicker sees them."""
        return [n["text"] for n in self.emulator.ephemerals() if n["user"] == user]

    def _prompts(self) -> list[Prompt]:
        from channelkit.platforms.discord.questions import TEXT_TERMINAL

        out = []
        for v in self._views():
            text = v.get("text", "")
            if any(d.startswith("ck:q:") for d in self._datas(v)):
                self._forms.add(v["id"])
                out.append(Prompt(v["id"], True, "pending", text, v))
            elif v["id"] in self._forms:  # a form settled in place (its label in any language)
                state = next(
                    (
                        s
                        for s, label in TEXT_TERMINAL.items()
                        if any(f"*{t}*" in text for t in self._in_every_locale(label))
                    ),
                    "pending",
                )
                out.append(Prompt(v["id"], True, state, text, v))
            elif "/approve" in text or "reply with" in text.lower():
                out.append(Prompt(v["id"], False, "pending", text, v))
        return out

    def inputs(self, prompt: Prompt) -> list[str]:
        current = next((p for p in self.prompts() if p.id == prompt.id), prompt)
        view = current.view
        keys = [b["text"] for row in view.get("keyboard") or [] for b in row if b.get("data")]
        return keys + [o["label"] for s in view.get("selects") or [] for o in s["options"]]

    def answer(self, prompt: Prompt, label: str, user: str | None = None) -> None:
        (menu,) = prompt.view["selects"]
        value = next(o["value"] for o in menu["options"] if o["label"] == label)
        self.click(prompt.id, "select", {"customId": menu["customId"], "values": [value]}, user)
        submit = next(
            b["data"]
            for row in prompt.view["keyboard"]
            for b in row
            if b["data"].endswith(":submit")
        )
        self.click(prompt.id, "tap", {"data": submit}, user=user)

    def cancel(self, prompt: Prompt, user: str | None = None) -> None:
        data = next(
            b["data"]
            for row in prompt.view["keyboard"]
            for b in row
            if b["data"].endswith(":cancel")
        )
        self.click(prompt.id, "tap", {"data": data}, user=user)

    def presentations(self, title: str) -> list[dict[str, Any]]:
        out = []
        views = {v["id"]: v for v in self.bot_views()}
        for call in self.emulator.calls():
            if call["method"] != "POST" or not call["path"].endswith("/messages"):
                continue
            body = call.get("body") or {}
            if title not in json.dumps(body, ensure_ascii=False):
                continue
            response = call.get("response") or {}
            message_id = response.get("id") if isinstance(response, dict) else None
            out.append(
                {
                    "messageId": message_id,
                    "text": views.get(message_id, {}).get("text"),
                    "native": bool(body.get("components")),
                    "pinned": bool(views.get(message_id, {}).get("pinned")),
                }
            )
        return out


class DiscordInteractionsDriver(DiscordDriver):
    """Discord with clicks as Ed25519-signed POSTs to the interactions endpoint."""

    playground_options = {"ingress": "interactions"}


#: Chat platform name -> its contract test driver (a new platform adds one entry). A
#: platform with a second ingress mode may add ``"<platform>-<mode>"`` too: a driver
#: whose ``platform`` is the registered name, running the suite over that mode.
DRIVERS: dict[str, type[Driver]] = {
    driver.platform: driver
    for driver in (
        DingtalkDriver,
        FeishuDriver,
        TelegramDriver,
        SlackDriver,
        WeixinDriver,
        DiscordDriver,
    )
}
DRIVERS["discord-interactions"] = DiscordInteractionsDriver
