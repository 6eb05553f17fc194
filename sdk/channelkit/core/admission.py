"""Run admission: who runs now, who waits, in which order, and who is told "busy".

A run is *admitted* into one FIFO queue and *started* when three things hold: the queue
holds nothing older that could start, its session has no other run alive (runs of one
session execute one after another), and fewer than ``limit`` runs are *active*. A run
waiting on a person (a question or a permission request) is *parked*: it keeps its
thread and its session, but it does not count against ``limit``, so people who take
their time answering never reduce the capacity for everyone else.

The queue is bounded three ways, each checked when a run is admitted: ``max_queued`` in
all, ``max_queued_per_owner`` per person and ``max_queued_per_chat`` per chat (a chat's
or a person's backlog cannot fill the queue for everyone). A run over a bound is refused
with `ChannelBusy` naming the bound; ``ChannelBase`` tells the
person in the chat.

The callbacks run outside the admission lock: ``start(ticket)`` for each run that may
start now, ``moved(ticket, ahead)`` for each queued run whose position changed.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any, Literal

from channelkit.errors import ChannelBusy

__all__ = ["RunAdmission", "Ticket"]

TicketState = Literal["queued", "active", "parked", "done"]


class Ticket:
    """One run's place in `RunAdmission` (``payload`` is the caller's run)."""

    __slots__ = ("ahead", "chat", "held", "owner", "payload", "session", "state")

    def __init__(
        self, payload: Any, *, session: Hashable, owner: Hashable | None, chat: Hashable
    ) -> None:
        self.payload = payload
        self.session = session
        self.owner = owner
        self.chat = chat
        self.state: TicketState = "queued"
        self.held = False
        self.ahead = 0  # queued runs before this one (last value reported)

    def __repr__(self) -> str:
        return f"<Ticket {self.state} session={self.session!r} ahead={self.ahead}>"


class RunAdmission:
    """Admission control for agent runs; see the module docstring."""

    def __init__(
        self,
        *,
        limit: int,
        max_queued: int,
        max_queued_per_owner: int,
        max_queued_per_chat: int,
        start: Callable[[Ticket], None],
        moved: Callable[[Ticket, int], None] | None = None,
    ) -> None:
        for name, value in (
            ("limit", limit),
            ("max_queued", max_queued),
            ("max_queued_per_owner", max_queued_per_owner),
            ("max_queued_per_chat", max_queued_per_chat),
        ):
            if value < 1:
                raise ValueError(f"{name}: must be >= 1, got {value!r}")
        self.limit = limit
        self.max_queued = max_queued
        self.max_queued_per_owner = max_queued_per_owner
        self.max_queued_per_chat = max_queued_per_chat
        self._start = start
        self._moved = moved
        self._lock = threading.Lock()
        self._queue: deque[Ticket] = deque()
        self._busy_sessions: set[Hashable] = set()  # sessions with an active/parked run
        self._per_owner: dict[Hashable, int] = {}
        self._per_chat: dict[Hashable, int] = {}
        self._active = 0
        self._parked = 0

    # -- introspection ----------------------------------------------------------------

    @property
    def active(self) -> int:
        """Runs executing and not waiting on a person."""
        with self._lock:
            return self._active

    @property
    def parked(self) -> int:
        """Runs waiting on a person."""
        with self._lock:
            return self._parked

    @property
    def queued(self) -> int:
        """Runs admitted and not started yet."""
        with self._lock:
            return len(self._queue)

    def waits(self, ticket: Ticket) -> bool:
        """True when the queued ``ticket`` could not start now even if it were not
        held: every slot is taken, or a run of its session is alive or queued before it
        (runs of one session go one after another)."""
        with self._lock:
            if ticket.state != "queued":
                return False
            if self._active >= self.limit or ticket.session in self._busy_sessions:
                return True
            for other in self._queue:
                if other is ticket:
                    return False
                if other.session == ticket.session:
                    return True
            return False

    # -- transitions ------------------------------------------------------------------

    def admit(
        self,
        payload: Any,
        *,
        session: Hashable,
        owner: Hashable | None,
        chat: Hashable,
        hold: bool = False,
    ) -> Ticket:
        """Queue a run (``hold=True``: reserve its place, start it only after
        `release()`). Raises `ChannelBusy` when a bound is reached; the run
        may already have been started when this returns (``ticket.state``)."""
        ticket = Ticket(payload, session=session, owner=owner, chat=chat)
        ticket.held = hold
        with self._lock:
            if len(self._queue) >= self.max_queued:
                raise ChannelBusy(f"{self.max_queued} runs already queued", limit="max_queued_runs")
            if owner is not None and self._per_owner.get(owner, 0) >= self.max_queued_per_owner:
                raise ChannelBusy(
                    f"{self.max_queued_per_owner} runs of this person already queued",
                    limit="max_queued_per_owner",
                )
            if self._per_chat.get(chat, 0) >= self.max_queued_per_chat:
                raise ChannelBusy(
                    f"{self.max_queued_per_chat} runs of this chat already queued",
                    limit="max_queued_per_chat",
                )
            self._queue.append(ticket)
            ticket.ahead = len(self._queue) - 1
            if owner is not None:
                self._per_owner[owner] = self._per_owner.get(owner, 0) + 1
            self._per_chat[chat] = self._per_chat.get(chat, 0) + 1
            started, moved = self._pump_locked()
        self._notify(started, moved)
        return ticket

    def release(self, ticket: Ticket) -> None:
        """Make a held ticket eligible to start."""
        with self._lock:
            if not ticket.held:
                return
            ticket.held = False
            started, moved = self._pump_locked()
        self._notify(started, moved)

    def withdraw(self, ticket: Ticket) -> bool:
        """Remove a queued (not started) ticket; True if it was still queued."""
        with self._lock:
            if ticket.state != "queued":
                return False
            self._queue.remove(ticket)
            self._unqueue_counts_locked(ticket)
            ticket.state = "done"
            started, moved = self._pump_locked()
        self._notify(started, moved)
        return True

    def park(self, ticket: Ticket) -> None:
        """The run waits on a person: its slot goes to the next queued run."""
        with self._lock:
            if ticket.state != "active":
                return
            ticket.state = "parked"
            self._active -= 1
            self._parked += 1
            started, moved = self._pump_locked()
        self._notify(started, moved)

    def unpark(self, ticket: Ticket) -> None:
        """The person answered: the run counts as active again (it never waits for a
        slot: it already holds its thread, and stopping it would stall its answer)."""
        with self._lock:
            if ticket.state != "parked":
                return
            ticket.state = "active"
            self._parked -= 1
            self._active += 1

    def finish(self, ticket: Ticket) -> None:
        """The run ended (or never started): free its slot and its session."""
        with self._lock:
            state = ticket.state
            if state == "done":
                return
            if state == "queued":
                self._queue.remove(ticket)
                self._unqueue_counts_locked(ticket)
            else:
                if state == "active":
                    self._active -= 1
                else:
                    self._parked -= 1
                self._busy_sessions.discard(ticket.session)
            ticket.state = "done"
            started, moved = self._pump_locked()
        self._notify(started, moved)

    def drain(self) -> list[Ticket]:
        """Remove and return every queued ticket (closing)."""
        with self._lock:
            tickets = list(self._queue)
            self._queue.clear()
            self._per_owner.clear()
            self._per_chat.clear()
            for ticket in tickets:
                ticket.state = "done"
        return tickets

    # -- internals --------------------------------------------------------------------

    def _unqueue_counts_locked(self, ticket: Ticket) -> None:
        if ticket.owner is not None:
            left = self._per_owner.get(ticket.owner, 0) - 1
            if left > 0:
                self._per_owner[ticket.owner] = left
            else:
                self._per_owner.pop(ticket.owner, None)
        left = self._per_chat.get(ticket.chat, 0) - 1
        if left > 0:
            self._per_chat[ticket.chat] = left
        else:
            self._per_chat.pop(ticket.chat, None)

    def _pump_locked(self) -> tuple[list[Ticket], list[tuple[Ticket, int]]]:
        started: list[Ticket] = []
        if self._active < self.limit and self._queue:
            remaining: deque[Ticket] = deque()
            blocked = set(self._busy_sessions)
            for ticket in self._queue:
                if self._active < self.limit and not ticket.held and ticket.session not in blocked:
                    ticket.state = "active"
                    self._active += 1
                    self._busy_sessions.add(ticket.session)
                    self._unqueue_counts_locked(ticket)
                    started.append(ticket)
                else:
                    remaining.append(ticket)
                # a later run of the same session never overtakes an earlier one
                blocked.add(ticket.session)
            self._queue = remaining
        moved: list[tuple[Ticket, int]] = []
        if started or self._moved is not None:
            for index, ticket in enumerate(self._queue):
                if ticket.ahead != index:
                    ticket.ahead = index
                    moved.append((ticket, index))
        return started, moved

    def _notify(self, started: list[Ticket], moved: list[tuple[Ticket, int]]) -> None:
        for ticket in started:
            self._start(ticket)
        if self._moved is not None:
            for ticket, ahead in moved:
                self._moved(ticket, ahead)
