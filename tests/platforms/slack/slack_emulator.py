"""Drive the real ``SlackChannel`` against the playground's Slack emulator over real HTTP.

:class:`SlackRig` starts a :class:`~channelkit.playground.Playground` for Slack (the
channel, the emulated Web API and the person's side, all on 127.0.0.1) with a given
agent, and speaks to it the way the page does: the person's messages and clicks go
through ``/_emulator/...`` (the emulator delivers them as signed Events API /
interactivity POSTs, or Socket Mode envelopes), and what Slack shows is read back from
the emulator's state and its record of Web API calls. Timers run on a
:class:`~channelkit.runtime.FakeClock`, so a form's lifetime passes only when a test
advances it.

The race helpers make interleavings deterministic without sleeps:

* :class:`HeldResponder` replaces the agent's ``respond_to_permission``: the first
  answer that reaches the agent (a ``/deny``, a form's answer) blocks inside it until
  the test releases it, so the request is held by that answer meanwhile.
* :class:`ObservedContexts` wraps every request context the channel hands to its
  question presenter: ``entered`` / ``returned`` events around the presenter's
  ``respond()``, the results, and an optional ``hold`` that keeps the presenter's
  ``respond()`` from calling through until the test lets it.

Nothing here is Slack-specific except the emulator's view names, so a cross-platform
contract suite can reuse the pattern with another emulator.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import requests
from channelkit.agents.base import AgentBridge
from channelkit.playground import Playground
from channelkit.runtime import FakeClock

#: Generous bound for any wait on a loaded 2-core machine (never slept through).
LONG = 20.0


class SlackRig:
    """A running Slack playground with ``agent``; see the module docstring."""

    def __init__(self, pg: Playground, clock: FakeClock) -> None:
        self.pg = pg
        self.clock = clock

    @classmethod
    @contextmanager
    def start(
        cls, agent: AgentBridge, *, ingress: str = "events", **options: Any
    ) -> Iterator[SlackRig]:
        """A Slack playground (``ingress``: ``events`` or ``socket``) with ``agent`` on a
        fake clock (``options``: more `Playground` options); closed on exit."""
        clock = FakeClock(start=time.monotonic(), wall_start=time.time())
        with Playground(
            platform="slack", ingress=ingress, agent=agent, clock=clock, **options
        ) as pg:
            rig = cls(pg, clock)
            # the fake clock stands still here: a post past the channel's burst would
            # wait (real seconds) for a token; the pacing has its own tests
            pg.channel.outbound_pacer.enabled = False
            if ingress == "socket":
                (connection,) = pg.channel.connections
                rig.wait(lambda: connection.state().status == "connected", "Socket Mode")
            yield rig

    # -- handles ---------------------------------------------------------------------------
    @property
    def channel(self) -> Any:
        """The real ``SlackChannel``."""
        return self.pg.channel

    @property
    def emulator(self) -> Any:
        """The Slack emulator (``SlackEmulator``)."""
        return self.pg.emulator

    @property
    def chat(self) -> str:
        """The direct message's channel id."""
        return str(self.emulator.channel)

    # -- waiting -----------------------------------------------------------------------------
    @staticmethod
    def wait(predicate: Callable[[], Any], what: str, timeout: float = LONG) -> Any:
        """Poll ``predicate`` until truthy (bounded); its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.01)

    # -- the person ---------------------------------------------------------------------------
    def send(self, text: str) -> int:
        """The person types ``text`` in the direct message; returns how many bot
        messages existed before (index into :meth:`views`)."""
        before = len(self.views())
        response = requests.post(f"{self.pg.url}/_emulator/send", json={"text": text}, timeout=5)
        assert response.status_code == 200, response.text
        assert response.json()["status"] == 200, response.json()  # the channel ACKed it
        return before

    def click(
        self, ts: str, action: str, form: Any = None, *, user_id: str | None = None
    ) -> dict[str, Any]:
        """A click on the bot message ``ts`` (``submit`` / ``cancel`` / ``stop`` /
        ``tap``); ``form`` maps question names to chosen values (see :meth:`choices`)."""
        payload: dict[str, Any] = {"action": action, "form": form or {}}
        if user_id is not None:
            payload["userId"] = user_id
        response = requests.post(
            f"{self.pg.url}/_emulator/cards/{ts}/action", json=payload, timeout=5
        )
        assert response.status_code == 200, response.text
        body = dict(response.json())
        assert body["status"] == 200, body  # the channel ACKed it
        return body

    # -- what Slack shows -----------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        response = requests.get(f"{self.pg.url}/_emulator/state", timeout=5)
        assert response.status_code == 200
        return dict(response.json())

    def views(self) -> list[dict[str, Any]]:
        """The bot's messages, in timeline order, as the page shows them."""
        current = self.state()
        return [current["views"][e["card"]] for e in current["timeline"] if e["kind"] == "card"]

    def view(self, ts: str) -> dict[str, Any]:
        return dict(self.state()["views"][ts])

    def message(self, ts: str) -> dict[str, Any]:
        """The emulator's raw record of message ``ts`` (text, blocks, pinned...)."""
        return dict(self.emulator.cards()[ts])

    def calls(self, path: str | None = None) -> list[dict[str, Any]]:
        """The Web API calls the channel made (``path`` like ``/chat.update``)."""
        response = requests.get(f"{self.pg.url}/_emulator/calls?since=0", timeout=5)
        assert response.status_code == 200
        found = list(response.json()["calls"])
        return [c for c in found if path is None or c["path"] == path]

    def forms(self, start: int = 0) -> list[dict[str, Any]]:
        """The Block Kit forms still waiting for an answer, after index ``start``."""
        return [v for v in self.views()[start:] if v["kind"] == "question"]

    def pending_form(self, start: int = 0, *, armed: bool = False) -> dict[str, Any]:
        """The first form after ``start``. ``armed``: also wait until the channel holds it
        as pending with its expiry armed (before a test moves the clock)."""
        form = self.wait(lambda: next(iter(self.forms(start)), None), "a Block Kit form")
        if armed:
            self.wait(
                lambda: any(
                    f.ts == form["id"] and f.state.state == "pending" and f.timer is not None
                    for f in self.channel.questions.live_forms()
                ),
                "the channel to arm the form's expiry",
            )
        return dict(form)

    @staticmethod
    def choices(form: dict[str, Any], *labels: str) -> dict[str, Any]:
        """The form's answers: one option label per question, in order (a multi-select
        question gets a list with that one option)."""
        out: dict[str, Any] = {}
        for question, label in zip(form["questions"], labels, strict=True):
            value = next(o["value"] for o in question["options"] if o["text"] == label)
            out[question["name"]] = [value] if question["multi"] else value
        return out

    def form_updates(self, ts: str) -> list[dict[str, Any]]:
        """Every ``chat.update`` body the channel sent for message ``ts``."""
        return [c["body"] for c in self.calls("/chat.update") if c["body"].get("ts") == ts]

    def texts(self, start: int = 0) -> list[str]:
        """The texts of the bot's plain messages after ``start``."""
        return [v.get("text", "") for v in self.views()[start:] if v["kind"] == "message"]


class HeldResponder:
    """The agent's ``respond_to_permission``, with the first answer held inside it.

    ``entered`` is set when the first answer reached the agent; it returns only after
    :meth:`release`. ``calls`` records every answer that reached the agent.
    """

    def __init__(self, agent: Any) -> None:
        self._inner = agent.respond_to_permission
        self._lock = threading.Lock()
        self._released = threading.Event()
        self.entered = threading.Event()
        self.calls: list[tuple[str, Any]] = []
        agent.respond_to_permission = self

    def __call__(self, request_id: str, response: Any) -> bool:
        with self._lock:
            self.calls.append((request_id, response))
            first = len(self.calls) == 1
        if first:
            self.entered.set()
            assert self._released.wait(LONG), "the held answer was never released"
        return bool(self._inner(request_id, response))

    def release(self) -> None:
        self._released.set()


class ObservedContexts:
    """Wraps the request contexts ``channel`` hands to ``present_user_input_request``."""

    def __init__(self, channel: Any) -> None:
        self._present = channel.present_user_input_request
        self._lock = threading.Lock()
        self.entered = threading.Event()  # the presenter called respond()
        self.returned = threading.Event()  # ... and it returned
        self.hold = threading.Event()  # cleared: respond() waits for it first
        self.hold.set()
        self.results: list[bool] = []
        self.contexts: list[Any] = []
        channel.present_user_input_request = self._wrap

    def _wrap(self, context: Any) -> Any:
        observed = _ObservedContext(context, self)
        with self._lock:
            self.contexts.append(observed)
        return self._present(observed)

    def record(self, ok: bool) -> None:
        with self._lock:
            self.results.append(ok)


class _ObservedContext:
    def __init__(self, context: Any, observer: ObservedContexts) -> None:
        self._context = context
        self._observer = observer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)

    def respond(self, response: Any) -> bool:
        self._observer.entered.set()
        assert self._observer.hold.wait(LONG), "the presenter's answer was never let through"
        ok = bool(self._context.respond(response))
        self._observer.record(ok)
        self._observer.returned.set()
        return ok
