"""JSON-RPC 2.0 over the agent's stdio: framing, request/response correlation, timeouts.

One JSON object per line in each direction (lines are read by
`channelkit.agents.acp.process.read_line()`). `RpcPeer` writes messages
through one lock, numbers the bridge's requests (a `Call`
each, kept on the process they were sent to), settles them when the reader thread hands
it the agent's responses (`RpcPeer.dispatch()`), and lets a caller wait for a
response with a timeout. Requests and notifications *from* the agent are handed to the bridge's
callbacks; what they mean is the bridge's business.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from channelkit.agents.acp.process import AgentProcess, Call
from channelkit.errors import AcpRequestError, AcpTimeoutError, AgentProcessError

logger = logging.getLogger(__name__)

#: JSON-RPC error codes used in replies to the agent.
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602

_T = TypeVar("_T")


def notification(method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON-RPC notification message."""
    return {"jsonrpc": "2.0", "method": method, "params": params}


def _no_overdue(now: float) -> tuple[list[Any], float | None]:
    return [], None


def _ignore(items: list[Any]) -> None:
    return None


class RpcPeer:
    """The bridge's side of the JSON-RPC conversation with one agent process at a time.

    ``cond`` is the bridge's state condition: calls are registered and settled under it
    and waiters sleep on it. ``agent_name`` names the agent in write errors.
    """

    def __init__(self, cond: threading.Condition, agent_name: str) -> None:
        self._cond = cond
        self._agent_name = agent_name
        self._ids = itertools.count(1)
        #: Serializes writes to stdin (one message per write, never interleaved).
        self.write_lock = threading.Lock()

    # ------------------------------------------------------------------ writing
    def send(self, proc: AgentProcess, message: Mapping[str, Any]) -> None:
        """Write one message; raises `AgentProcessError` if the process is gone."""
        data = (json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        stdin = proc.popen.stdin
        with self.write_lock:
            if proc.dead or stdin is None or stdin.closed:
                raise proc.gone_error()
            try:
                stdin.write(data)
                stdin.flush()
            except (OSError, ValueError) as exc:
                raise AgentProcessError(
                    f"cannot write to agent {self._agent_name!r}: {exc}",
                    returncode=proc.returncode(),
                ) from exc

    def request(self, proc: AgentProcess, method: str, params: Mapping[str, Any]) -> Call:
        """Send a request and return its `Call` (settled by `dispatch()`)."""
        rpc_id = next(self._ids)
        call = Call(method)
        with self._cond:
            if proc.dead:
                raise proc.gone_error()
            proc.calls[rpc_id] = call
        try:
            self.send(proc, {"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params})
        except AgentProcessError:
            with self._cond:
                proc.calls.pop(rpc_id, None)
            raise
        return call

    def notify(self, proc: AgentProcess, method: str, params: Mapping[str, Any]) -> bool:
        """Send a notification; False if the process is gone."""
        try:
            self.send(proc, notification(method, params))
        except AgentProcessError:
            return False
        return True

    def reply_result(self, proc: AgentProcess, rpc_id: Any, result: Any) -> None:
        """Answer an agent request with a result (quietly dropped if the process is gone)."""
        with contextlib.suppress(AgentProcessError):
            self.send(proc, {"jsonrpc": "2.0", "id": rpc_id, "result": result})

    def reply_error(self, proc: AgentProcess, rpc_id: Any, code: int, message: str) -> None:
        """Answer an agent request with an error (quietly dropped if the process is gone)."""
        with contextlib.suppress(AgentProcessError):
            self.send(
                proc, {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": message}}
            )

    # ------------------------------------------------------------------ waiting
    def wait(
        self,
        proc: AgentProcess,
        call: Call,
        timeout: float,
        *,
        take_overdue: Callable[[float], tuple[list[_T], float | None]] = _no_overdue,
        answer_overdue: Callable[[list[_T]], None] = _ignore,
    ) -> Any:
        """Block until ``call`` settles or ``timeout`` passes; return its result.

        Raises the call's error (`AcpRequestError`, `AgentProcessError`) or
        `AcpTimeoutError`. While waiting, the thread also serves deadlines nobody
        else watches: ``take_overdue(now)`` (called under the condition) removes and
        returns what is overdue plus the next deadline to wake at, and
        ``answer_overdue(items)`` (called outside it) settles them.
        """
        deadline = time.monotonic() + timeout
        while True:
            expired: list[_T] = []
            with self._cond:
                while not call.done:
                    now = time.monotonic()
                    if now >= deadline:
                        break
                    wake = deadline
                    expired, next_due = take_overdue(now)
                    if expired:
                        break
                    if next_due is not None:
                        wake = min(wake, next_due)
                    self._cond.wait(wake - now)
            if not expired:
                break
            answer_overdue(expired)
        if not call.done:
            with self._cond:
                for rpc_id, pending in list(proc.calls.items()):
                    if pending is call:
                        del proc.calls[rpc_id]
            raise AcpTimeoutError(call.method, timeout)
        if call.error is not None:
            raise call.error
        return call.result

    # ------------------------------------------------------------------ reading
    def dispatch(
        self,
        proc: AgentProcess,
        line: bytes,
        on_request: Callable[[AgentProcess, Any, str, Any], None],
        on_notification: Callable[[str, Any], None],
    ) -> None:
        """Handle one line from the agent: settle a response, or hand on a request
        (``on_request(proc, rpc_id, method, params)``) or a notification
        (``on_notification(method, params)``). Malformed lines are logged and skipped."""
        try:
            message = json.loads(line)
        except ValueError:
            logger.warning("acp agent wrote a line that is not JSON (%d bytes); skipped", len(line))
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            logger.warning("acp agent wrote a message that is not JSON-RPC 2.0; skipped")
            return
        method = message.get("method")
        if method is not None:
            if not isinstance(method, str):
                logger.warning("acp agent message has a non-string method; skipped")
                if "id" in message:
                    self.reply_error(proc, message["id"], INVALID_PARAMS, "invalid method")
                return
            params = message.get("params")
            if "id" in message and message["id"] is not None:
                on_request(proc, message["id"], method, params)
            else:
                on_notification(method, params)
            return
        if "id" in message and ("result" in message or "error" in message):
            self._settle(proc, message)
            return
        logger.warning("acp agent wrote a JSON-RPC message of unknown shape; skipped")

    def _settle(self, proc: AgentProcess, message: Mapping[str, Any]) -> None:
        rpc_id = message.get("id")
        with self._cond:
            call = proc.calls.pop(rpc_id, None) if isinstance(rpc_id, int) else None
            if call is None:
                logger.warning("acp agent answered an unknown request id %r; skipped", rpc_id)
                return
            error = message.get("error")
            if error is not None:
                if isinstance(error, Mapping):
                    call.error = AcpRequestError(
                        call.method,
                        error.get("code"),
                        str(error.get("message", "")),
                        error.get("data"),
                    )
                else:
                    call.error = AcpRequestError(call.method, None, str(error))
            else:
                call.result = message.get("result")
            call.done = True
            self._cond.notify_all()
