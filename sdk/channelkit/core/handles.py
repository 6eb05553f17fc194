"""Handles returned by ``handle_inbound`` / ``run_loop_prompt`` / ``run_webhook_task``."""

from __future__ import annotations

import concurrent.futures
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Literal

__all__ = ["CommandHandle", "CommandResult", "RunHandle", "RunResult"]


@dataclass(frozen=True)
class RunResult:
    """How a run ended. ``error`` is the exception for ``failed`` runs (and the
    `ChannelBusy` for ``rejected`` ones: the queue was full, the
    person was told, the run never started)."""

    run_id: str
    session_id: str
    status: Literal["completed", "failed", "cancelled", "rejected"]
    response: str = ""
    error: BaseException | None = None


@dataclass(frozen=True)
class CommandResult:
    """A permission or cancel command: its reply text (already sent) and whether the
    reply was delivered."""

    command: str
    reply: str
    delivered: bool


class RunHandle:
    """A scheduled agent run. ``result(timeout)`` waits until the run ended and every
    hook it triggered has run; it raises ``TimeoutError`` when ``timeout`` passes."""

    kind: Literal["run"] = "run"

    def __init__(self, run_id: str, session_id: str, future: Future[RunResult]) -> None:
        self.run_id = run_id
        self.session_id = session_id
        self._future = future

    def result(self, timeout: float | None = 30.0) -> RunResult:
        try:
            return self._future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"run {self.run_id} still running after {timeout}s") from None

    def done(self) -> bool:
        return self._future.done()

    def __repr__(self) -> str:
        return f"<RunHandle run={self.run_id} session={self.session_id} done={self.done()}>"


class CommandHandle:
    """A handled command. ``reply`` is known at once for permission commands (None for
    /cancel until it finished); ``result(timeout)`` waits until the reply was sent."""

    kind: Literal["command"] = "command"

    def __init__(self, command: str, reply: str | None, future: Future[CommandResult]) -> None:
        self.command = command
        self.reply = reply
        self._future = future

    def result(self, timeout: float | None = 30.0) -> CommandResult:
        try:
            return self._future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"command {self.command} not finished after {timeout}s") from None

    def done(self) -> bool:
        return self._future.done()

    def __repr__(self) -> str:
        return f"<CommandHandle {self.command} reply={self.reply!r}>"
