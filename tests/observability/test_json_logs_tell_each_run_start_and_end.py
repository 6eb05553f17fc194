"""``--log-format json``: one JSON object per line, the story of each run in it.

In process: a Telegram playground conversation logged through `JsonFormatter` gives
one parseable line per record, among them the inbound message, ``run_start`` and
``run_end`` of the same run id with the platform, a hashed chat (never the chat id),
the outcome and the durations; neither the person's text nor the answer is in any
line, and a registered secret in a record's fields is scrubbed. As a command:
``channelkit playground --log-format json`` writes only JSON lines on stderr, the demo's
failing run among them with its start and its end (``failed``). The service's
shutdown writes one summary line, its counts as a JSON field too.
"""

from __future__ import annotations

import io
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import channelkit
import requests
from channelkit.agents.function import FunctionAgent, Turn
from channelkit.http.redact import REDACTOR
from channelkit.observability.logs import JsonFormatter
from channelkit.playground import Playground
from channelkit.testing import wait_until

#: the sdk directory of the channelkit under test (the command runs the same code)
SDK = Path(channelkit.__file__).resolve().parents[1]

#: the parts checked below are not hexadecimal: a run id or a hashed chat (hex digits)
#: may hold "4711" by chance, never "XK-4711"
QUESTION = "where is invoice XK-4711-private"
ANSWER = "in the drawer marked confidential-7"


def _answer(turn: Turn) -> str:
    turn.say("Looking. ")
    return ANSWER


def test_json_lines_hold_the_run_start_and_end_and_never_the_text_or_the_chat() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    events = logging.getLogger("channelkit.observability")
    events.addHandler(handler)
    level = events.level
    events.setLevel(logging.INFO)
    seen: list[Any] = []
    try:
        with Playground(platform="telegram", agent=FunctionAgent(_answer)) as pg:
            handle_inbound = pg.channel.handle_inbound

            def recording(message: Any, **kwargs: Any) -> Any:
                seen.append(message)
                return handle_inbound(message, **kwargs)

            pg.channel.handle_inbound = recording
            response = requests.post(
                f"{pg.url}/_emulator/send", json={"text": QUESTION}, timeout=10
            )
            assert response.status_code == 200, response.text
            wait_until(lambda: '"run_end"' in stream.getvalue(), timeout=30, what="run_end")
    finally:
        events.removeHandler(handler)
        events.setLevel(level)
    text = stream.getvalue()
    lines = [json.loads(line) for line in text.splitlines()]  # every line is JSON
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    starts = [line for line in lines if line.get("event") == "run_start"]
    ends = [line for line in lines if line.get("event") == "run_end"]
    inbound = [line for line in lines if line.get("event") == "inbound"]
    assert len(starts) == len(ends) == len(inbound) == 1, lines
    start, end = starts[0], ends[0]
    assert start["run_id"] == end["run_id"] == inbound[0]["run_id"]
    assert start["platform"] == end["platform"] == "telegram"
    assert end["outcome"] == "completed" and inbound[0]["outcome"] == "accepted"
    assert start["chat"] == end["chat"] == inbound[0]["chat"]
    assert end["ran_s"] >= 0 and end["waited_s"] >= 0 and end["first_reaction_s"] >= 0
    assert start["level"] == "INFO" and "run started" in start["message"]
    assert seen, "the channel received the message"
    for message in seen:
        assert message.chat_id not in text and message.sender_id not in text
    assert QUESTION not in text and ANSWER not in text
    assert "XK-4711" not in text and "confidential" not in text


def test_a_registered_secret_in_a_json_field_is_scrubbed() -> None:
    secret = "sk-observability-test-secret-91c2"
    REDACTOR.add(secret)
    record = logging.LogRecord(
        "channelkit.test", logging.INFO, __file__, 1, "token %s", (secret,), None
    )
    record.detail = {"header": f"Bearer {secret}"}
    document = json.loads(JsonFormatter().format(record))
    assert secret not in json.dumps(document)
    assert document["message"].startswith("token ")
    assert "Bearer" in document["detail"]["header"]


def test_playground_log_format_json_writes_only_json_lines_with_the_run() -> None:
    env = {**os.environ, "PYTHONPATH": str(SDK), "PYTHONUNBUFFERED": "1"}
    argv = ["playground", "--platform", "telegram", "--log-format", "json", "--delay", "0"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "channelkit", *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    errors: queue.Queue[str] = queue.Queue()
    outputs: queue.Queue[str] = queue.Queue()

    def pump(stream: Any, into: queue.Queue[str]) -> None:
        for line in stream:
            into.put(line)

    threading.Thread(target=pump, args=(proc.stderr, errors), daemon=True).start()
    threading.Thread(target=pump, args=(proc.stdout, outputs), daemon=True).start()
    records: list[dict[str, Any]] = []
    try:
        url = None
        deadline = time.monotonic() + 30
        while url is None:
            assert time.monotonic() < deadline, "no URL printed"
            line = outputs.get(timeout=max(0.1, deadline - time.monotonic()))
            if line.startswith("Open "):
                url = line.split()[1].rstrip("/")
        sent = requests.post(f"{url}/_emulator/send", json={"text": "fail"}, timeout=10)
        assert sent.status_code == 200, sent.text
        deadline = time.monotonic() + 30
        while not any(r.get("event") == "run_end" for r in records):
            assert time.monotonic() < deadline, f"no run_end line in {records}"
            try:
                line = errors.get(timeout=0.5)
            except queue.Empty:
                continue
            records.append(json.loads(line))  # stderr holds JSON lines only
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    start = next(r for r in records if r.get("event") == "run_start")
    end = next(r for r in records if r.get("event") == "run_end")
    assert start["run_id"] == end["run_id"]
    assert end["outcome"] == "failed" and end["platform"] == "telegram"
    while True:  # what came after the run (shutdown) is JSON too
        try:
            rest = errors.get_nowait()
        except queue.Empty:
            break
        json.loads(rest)


def test_serve_shutdown_writes_one_summary_line(caplog: Any) -> None:
    from channelkit.observability import hub
    from channelkit.web.service import ChannelService

    hub.inbound("telegram", "obs-summary", "0" * 12, "accepted", "r")  # one more to count
    caplog.set_level(logging.INFO, logger="channelkit.observability")
    assert ChannelService([]).shutdown(1.0) is True
    summaries = [r for r in caplog.records if getattr(r, "event", None) == "summary"]
    assert len(summaries) == 1
    (summary,) = summaries
    counts = summary.counts  # type: ignore[attr-defined]
    assert counts["inbound"]["accepted"] >= 1
    assert summary.getMessage().startswith("summary: ")
    assert "inbound accepted=" in summary.getMessage()
    document = json.loads(JsonFormatter().format(summary))
    assert document["event"] == "summary" and document["counts"] == counts
