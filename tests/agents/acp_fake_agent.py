"""A tiny ACP agent for fast bridge tests. Run it as ``[sys.executable, this_file]``.

It speaks JSON-RPC 2.0 over stdio (one object per line). What a turn does is chosen by the
prompt text (first word, arguments after a space):

``stream A|B|C``   streams the chunks A, B, C, a ``tool_call`` + ``tool_call_update``
                   and an update kind the bridge ignores, then ends the turn.
``ask``            streams "Before question.", asks a question through
                   ``session/request_permission`` (canonical ``_meta``), then streams
                   ``outcome=<outcome> answers=<json>`` and ends the turn.
``fs``             calls ``fs/read_text_file`` on the client and streams
                   ``fs-error=<code>`` (or ``fs-ok``) depending on the reply.
``malformed``      writes garbage lines, then streams "survived".
``hang``           streams "waiting", waits for ``session/cancel``, then ends the turn
                   with stopReason ``cancelled``.
``hang-forever``   never answers (ignores cancel).
``die``            streams "bye" and exits with code 3 without answering.
``ask-die``        asks a question, then exits with code 4 before the answer.
``echo X``         streams X.
``stderr``         writes ~400 KB to stderr, then streams "done".
``picture B64``    streams "Here it is.", an ``image`` block whose data is B64, "Anything else?".
``link URI``       streams "See the file.", a ``resource_link`` to URI, "Done.".
``blocks``         streams the prompt's content blocks as JSON, each base64 ``data``
                   (or ``blob``) replaced by ``sha256`` and ``bytes`` of what it decodes to.

Environment: ``FAKE_ACP_MODE`` = ``exit-on-start`` (exit 5 at once), ``no-init-reply``
(never answers ``initialize``), ``init-error`` (answers it with an error);
``FAKE_ACP_PROMPT_CAPABILITIES`` = JSON advertised as ``agentCapabilities.promptCapabilities``;
``FAKE_ACP_LOG`` = a file that receives every line the agent reads from stdin;
``FAKE_ACP_INIT_GATE`` = a path: ``initialize`` is answered only once it exists;
``FAKE_ACP_HISTORY`` = a directory: the agent advertises ``loadSession``, keeps each
session's prompts there (so they survive the process) and answers ``session/load`` for a
session it knows (an error otherwise), replaying the conversation first as ACP agents
do: each earlier prompt as a ``user_message_chunk`` and an ``agent_message_chunk``
``(replayed) <prompt>``, then ``fake-acp: replayed N turns`` on stderr; the turn
``history`` streams ``history=<earlier prompts joined by ,>``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
import threading
import urllib.parse
from typing import Any

_write_lock = threading.Lock()
_state_lock = threading.Lock()
_pending: dict[int, dict[str, Any]] = {}
_pending_events: dict[int, threading.Event] = {}
_cancelled: dict[str, threading.Event] = {}
_next_id = [100]
_sessions = [0]
_log_path = os.environ.get("FAKE_ACP_LOG")
_history_dir = os.environ.get("FAKE_ACP_HISTORY")


def _history_file(session_id: str) -> str:
    assert _history_dir is not None
    return os.path.join(_history_dir, session_id + ".json")


def _history(session_id: str) -> list[str]:
    try:
        with open(_history_file(session_id), encoding="utf-8") as f:
            return list(json.load(f))
    except FileNotFoundError:
        return []


def _remember(session_id: str, text: str) -> None:
    earlier = _history(session_id)
    with open(_history_file(session_id), "w", encoding="utf-8") as f:
        json.dump([*earlier, text], f)


QUESTIONS = [
    {
        "header": "Color",
        "question": "Which color?",
        "options": [
            {"label": "Blue", "description": "Calm"},
            {"label": "Green", "description": "Fresh"},
        ],
        "multiSelect": False,
    },
    {
        "header": "Extras",
        "question": "Which extras?",
        "options": [
            {"label": "Tests", "description": "Unit tests"},
            {"label": "Docs", "description": "Documentation"},
        ],
        "multiSelect": True,
    },
]


def write_raw(text: str) -> None:
    with _write_lock:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def send(message: dict[str, Any]) -> None:
    write_raw(json.dumps(message))


def update(session_id: str, payload: dict[str, Any]) -> None:
    send(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": session_id, "update": payload},
        }
    )


def chunk(session_id: str, text: str) -> None:
    update(
        session_id,
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}},
    )


def call_client(method: str, params: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
    with _state_lock:
        _next_id[0] += 1
        rpc_id = _next_id[0]
        event = threading.Event()
        _pending_events[rpc_id] = event
    send({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params})
    if not event.wait(timeout):
        return {"error": {"code": "timeout"}}
    with _state_lock:
        return _pending.pop(rpc_id)


def ask(session_id: str) -> dict[str, Any]:
    return call_client("session/request_permission", ask_params(session_id))


def ask_params(session_id: str) -> dict[str, Any]:
    return {
        "sessionId": session_id,
        "options": [
            {"optionId": "proceed_once", "name": "Submit", "kind": "allow_once"},
            {"optionId": "cancel", "name": "Cancel", "kind": "reject_once"},
        ],
        "toolCall": {
            "toolCallId": "ask-1",
            "status": "pending",
            "title": "Ask user 2 questions",
            "kind": "think",
            "rawInput": {"questions": QUESTIONS},
            "_meta": {
                "toolName": "ask_user_question",
                "qwenInteractionKind": "user_question",
                "qwenQuestions": QUESTIONS,
            },
        },
    }


def run_prompt(rpc_id: Any, params: dict[str, Any]) -> None:
    session_id = params["sessionId"]
    blocks = params.get("prompt") or []
    text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    command, _, arg = text.partition(" ")
    if text.split(maxsplit=1)[:1] == ["blocks"]:  # the files' path lines may follow
        command = "blocks"
    stop = "end_turn"
    if _history_dir is not None:
        earlier = _history(session_id)
        _remember(session_id, text)
        if command == "history":
            chunk(session_id, "history=" + ",".join(earlier))
            send({"jsonrpc": "2.0", "id": rpc_id, "result": {"stopReason": stop}})
            return
    cancelled = _cancelled.setdefault(session_id, threading.Event())
    if command == "stream":
        for part in arg.split("|"):
            chunk(session_id, part)
        update(
            session_id,
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "t1",
                "title": "Read file",
                "kind": "read",
                "status": "pending",
                "rawInput": {"path": "a.txt"},
            },
        )
        update(
            session_id,
            {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"},
        )
        update(session_id, {"sessionUpdate": "plan", "entries": []})
        update(
            session_id,
            {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}},
        )
    elif command == "stderr":
        for i in range(4000):  # ~400 KB: far more than a pipe buffer
            sys.stderr.write(f"noise line {i} " + "x" * 80 + "\n")
        sys.stderr.flush()
        chunk(session_id, "done")
    elif command == "echo":
        chunk(session_id, arg)
    elif command == "picture":
        chunk(session_id, "Here it is.")
        image = {"type": "image", "mimeType": "image/png", "data": arg}
        update(session_id, {"sessionUpdate": "agent_message_chunk", "content": image})
        chunk(session_id, "Anything else?")
    elif command == "link":
        chunk(session_id, "See the file.")
        name = urllib.parse.unquote(arg.rsplit("/", 1)[-1])
        link = {"type": "resource_link", "uri": arg, "name": name}
        update(session_id, {"sessionUpdate": "agent_message_chunk", "content": link})
        chunk(session_id, "Done.")
    elif command == "blocks":
        chunk(session_id, json.dumps([_summary(b) for b in blocks], sort_keys=True))
    elif command == "ask":
        chunk(session_id, "Before question.")
        reply = ask(session_id)
        result = reply.get("result") or {}
        outcome = (result.get("outcome") or {}).get("outcome")
        answers = result.get("answers")
        chunk(session_id, f"outcome={outcome} answers={json.dumps(answers, sort_keys=True)}")
        if cancelled.is_set():
            stop = "cancelled"
    elif command == "ask-die":
        params = ask_params(session_id)
        send({"jsonrpc": "2.0", "id": 7, "method": "session/request_permission", "params": params})
        # The client handles lines in order: its reply to this call means it has seen the ask.
        call_client("fs/read_text_file", {"sessionId": session_id, "path": "/x"})
        os._exit(4)
    elif command == "fs":
        reply = call_client("fs/read_text_file", {"sessionId": session_id, "path": "/etc/hostname"})
        if "error" in reply:
            chunk(session_id, f"fs-error={reply['error'].get('code')}")
        else:
            chunk(session_id, "fs-ok")
    elif command == "malformed":
        write_raw("this is not json")
        write_raw("[1, 2, 3]")
        write_raw('{"jsonrpc": "1.0", "method": "session/update"}')
        write_raw('{"jsonrpc": "2.0", "method": "session/update", "params": 7}')
        write_raw('{"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": 1}}')
        write_raw('{"jsonrpc": "2.0", "id": 987654, "result": {}}')
        write_raw('{"jsonrpc": "2.0", "id": "zzz"}')
        write_raw(
            '{"jsonrpc": "2.0", "id": 55, "method": "session/request_permission", "params": 1}'
        )
        write_raw("")
        update(session_id, {"sessionUpdate": "agent_message_chunk", "content": {"type": "image"}})
        chunk(session_id, "survived")
    elif command == "hang":
        chunk(session_id, "waiting")
        cancelled.wait(60)
        stop = "cancelled"
    elif command == "hang-forever":
        return
    elif command == "die":
        chunk(session_id, "bye")
        os._exit(3)
    send({"jsonrpc": "2.0", "id": rpc_id, "result": {"stopReason": stop}})


def _summary(block: dict[str, Any]) -> dict[str, Any]:
    """A content block with its base64 payloads replaced by their digest and size."""
    out = dict(block)
    for key in ("data", "blob"):
        if isinstance(out.get(key), str):
            raw = base64.b64decode(out.pop(key), validate=True)
            out["sha256"], out["bytes"] = hashlib.sha256(raw).hexdigest(), len(raw)
    if isinstance(out.get("resource"), dict):
        out["resource"] = _summary(out["resource"])
    return out


def handle(message: dict[str, Any]) -> None:
    method = message.get("method")
    rpc_id = message.get("id")
    params = message.get("params") or {}
    if method is None:
        with _state_lock:
            event = _pending_events.pop(rpc_id, None)
            if event is not None:
                _pending[rpc_id] = message
        if event is not None:
            event.set()
        return
    if method == "initialize":
        mode = os.environ.get("FAKE_ACP_MODE", "")
        gate = os.environ.get("FAKE_ACP_INIT_GATE")
        if gate:
            tick = threading.Event()
            while not os.path.exists(gate):
                tick.wait(0.01)
        if mode == "no-init-reply":
            return
        if mode == "init-error":
            send({"jsonrpc": "2.0", "id": rpc_id, "error": {"code": -32000, "message": "nope"}})
            return
        send(
            {
                "jsonrpc": "2.0",
                "id": rpc_id,
                "result": {
                    "protocolVersion": 1,
                    "agentCapabilities": {
                        "loadSession": _history_dir is not None,
                        **_prompt_capabilities(),
                    },
                    "authMethods": [],
                    "agentInfo": {"name": "fake-acp", "version": "1"},
                },
            }
        )
    elif method == "authenticate":
        send({"jsonrpc": "2.0", "id": rpc_id, "result": {}})
    elif method == "session/new":
        with _state_lock:
            _sessions[0] += 1
            # with a history kept across processes, ids must not repeat across processes
            prefix = f"{os.getpid()}-" if _history_dir is not None else ""
            session_id = f"fake-session-{prefix}{_sessions[0]}"
        if _history_dir is not None:
            with open(_history_file(session_id), "w", encoding="utf-8") as f:
                json.dump([], f)
        send({"jsonrpc": "2.0", "id": rpc_id, "result": {"sessionId": session_id}})
    elif method == "session/load" and _history_dir is not None:
        session_id = params.get("sessionId", "")
        if os.path.exists(_history_file(session_id)):
            earlier_turns = _history(session_id)
            for earlier in earlier_turns:  # the agent replays the conversation
                update(
                    session_id,
                    {
                        "sessionUpdate": "user_message_chunk",
                        "content": {"type": "text", "text": earlier},
                    },
                )
                chunk(session_id, f"(replayed) {earlier}")
            sys.stderr.write(f"fake-acp: replayed {len(earlier_turns)} turns\n")
            sys.stderr.flush()
            send({"jsonrpc": "2.0", "id": rpc_id, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": rpc_id, "error": {"code": -32002, "message": "gone"}})
    elif method == "session/prompt":
        _cancelled.setdefault(params["sessionId"], threading.Event()).clear()
        threading.Thread(target=run_prompt, args=(rpc_id, params), daemon=True).start()
    elif method == "session/cancel":
        _cancelled.setdefault(params.get("sessionId", ""), threading.Event()).set()
    elif rpc_id is not None:
        send({"jsonrpc": "2.0", "id": rpc_id, "error": {"code": -32601, "message": method}})


def _prompt_capabilities() -> dict[str, Any]:
    raw = os.environ.get("FAKE_ACP_PROMPT_CAPABILITIES")
    return {"promptCapabilities": json.loads(raw)} if raw else {}


def main() -> None:
    if os.environ.get("FAKE_ACP_MODE") == "exit-on-start":
        sys.exit(5)
    log = open(_log_path, "a", encoding="utf-8") if _log_path else None  # noqa: SIM115
    for line in sys.stdin:
        if log is not None:
            log.write(line)
            log.flush()
        line = line.strip()
        if not line:
            continue
        handle(json.loads(line))


if __name__ == "__main__":
    main()
