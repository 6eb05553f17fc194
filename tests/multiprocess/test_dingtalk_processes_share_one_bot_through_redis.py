"""Two processes serve one DingTalk bot through a real Redis: every card callback goes
to the process that does NOT own the run; 64 concurrent submits call the responder
once; a process killed with SIGKILL has its cards finalized by the other within the
lease expiry; Redis stopped mid-run and restarted loses no answer and duplicates none."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from channelkit.platforms.dingtalk import card_signature, robot_signature
from channelkit.playground import EmulatorServer
from channelkit.testing import wait_until

HERE = Path(__file__).parent
APP_KEY = "ding-test-app"
APP_SECRET = "ding-test-secret"
CARD_SECRET = "ding-card-secret"
OWNER = "staff-1"
_stamp = [int(time.time() * 1000)]
_stamp_lock = threading.Lock()


def _timestamp() -> str:
    with _stamp_lock:  # every signature is one-use: one millisecond each
        _stamp[0] = max(_stamp[0] + 1, int(time.time() * 1000))
        return str(_stamp[0])


def _post(url: str, body: dict, headers: dict) -> int:
    data = json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json", **headers}
    )
    for attempt in range(8):
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return int(response.status)
        except (ConnectionResetError, urllib.error.URLError) as exc:
            # 64 simultaneous connects overflow the test server's listen backlog: the
            # connection was refused before any request was read, so it is sent again
            if attempt == 7 or not _refused(exc):
                raise
            threading.Event().wait(0.02 * (attempt + 1))
    raise AssertionError("unreachable")


def _refused(exc: BaseException) -> bool:
    reason = getattr(exc, "reason", exc)
    return isinstance(reason, ConnectionResetError | ConnectionRefusedError)


READY_S = 60.0  # a process's start on a loaded 2-core CI machine


class Instance:
    """One ``dingtalk_instance.py`` process. It starts at once; the first use of ``url``
    or ``instance_id`` waits (bounded) for its ``PORT`` line, so instances made one after
    the other boot side by side."""

    def __init__(
        self,
        emulator_url: str,
        redis_url: str,
        namespace: str,
        log: Path,
        env: dict[str, str] | None = None,
    ):
        self.log = log
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "dingtalk_instance.py"), emulator_url, redis_url,
             namespace, str(log)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, **(env or {})},
        )  # fmt: skip
        self._port_line: list[str] | None = None
        self._ready_lock = threading.Lock()  # the first use may come from many threads

    def _ready(self) -> list[str]:
        with self._ready_lock:
            if self._port_line is None:
                readable, _, _ = select.select([self.process.stdout], [], [], READY_S)
                assert readable, f"no PORT line within {READY_S} s"
                line = self.process.stdout.readline().split()
                assert line and line[0] == "PORT", line
                self._port_line = line
            return self._port_line

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._ready()[1]}"

    @property
    def instance_id(self) -> str:
        return self._ready()[2]

    def message(self, text: str, chat: str) -> None:
        ts = _timestamp()
        body = {
            "msgId": "msg-" + uuid.uuid4().hex,
            "msgtype": "text",
            "text": {"content": text},
            "conversationId": chat,
            "conversationType": "2",
            "senderId": "$:LWCP_v1:$" + OWNER,
            "senderStaffId": OWNER,
            "senderNick": OWNER,
        }
        headers = {"timestamp": ts, "sign": robot_signature(ts, APP_SECRET)}
        assert _post(self.url + "/dingtalk/robot", body, headers) == 200

    def card(self, track: str, action: str, form: dict | None = None, actor: str = OWNER) -> int:
        ts = _timestamp()
        private = {"actionIds": [action]}
        if form is not None:
            private["params"] = {"form": form}
        body = {"outTrackId": track, "userId": actor}
        if action == "btn_stop":
            body["value"] = json.dumps({"outTrackId": track, "actionValue": "btn_stop"})
        else:
            body["content"] = json.dumps({"cardPrivateData": private})
        headers = {
            "x-ddpaas-signature-timestamp": ts,
            "x-ddpaas-signature": card_signature(ts, CARD_SECRET),
        }
        return _post(self.url + "/dingtalk/card", body, headers)

    def answers(self) -> list[str]:
        return self.log.read_text().split() if self.log.exists() else []

    def begin_stop(self) -> None:
        """Ask the process to stop (close its stdin) without waiting for it."""
        if self.process.poll() is None:
            try:
                self.process.stdin.close()
            except OSError:
                pass

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                self.begin_stop()
                self.process.wait(10)
            except Exception:
                pass
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def stop_all(instances: list[Instance]) -> None:
    """Stop the instances side by side (each takes about a second to close)."""
    for instance in instances:
        instance.begin_stop()
    for instance in instances:
        instance.stop()


@pytest.fixture
def bot(redis_server, tmp_path):
    made: list[Instance] = []
    emulator = EmulatorServer(app_key=APP_KEY, app_secret=APP_SECRET, api_secret=CARD_SECRET)
    namespace = "mp" + uuid.uuid4().hex[:8]

    def start(n: int) -> Instance:
        made.append(Instance(emulator.url, redis_server.url, namespace, tmp_path / f"log{n}"))
        return made[-1]

    try:
        yield emulator.emulator, start
    finally:
        stop_all(made)
        emulator.close()
        if not redis_server.running:
            redis_server.start()


def views(emulator, kind: str) -> list[dict]:
    found = [v for v in emulator.state()["views"].values() if v.get("kind") == kind]
    return found


def card_in(emulator, kind: str, state: str) -> dict | None:
    return next((v for v in views(emulator, kind) if v["state"] == state), None)


def test_a_conversation_whose_every_callback_reaches_the_other_process(bot):
    emulator, start = bot
    owner, other = start(1), start(2)
    owner.message("ask", "cid-g-1")
    question = wait_until(lambda: card_in(emulator, "question", "pending"), 20)
    assert other.card(question["id"], "submit", {"0": "Shanghai"}, actor="staff-2") == 200
    assert other.card(question["id"], "submit", {"0": "Shanghai"}) == 200
    wait_until(lambda: card_in(emulator, "question", "submitted"), 20)
    wait_until(
        lambda: any("Answer: Shanghai" in v["content"] for v in views(emulator, "status")), 20
    )
    assert owner.answers() == ["Shanghai"] and other.answers() == []
    # Stop on the other process cancels the owner's run
    owner.message("hold", "cid-g-2")
    live = wait_until(lambda: card_in(emulator, "status", "running"), 20)
    assert other.card(live["id"], "btn_stop") == 200
    wait_until(lambda: emulator.state()["views"][live["id"]]["state"] == "stopped", 20)


def test_64_concurrent_submits_across_two_processes_call_the_responder_once(bot):
    emulator, start = bot
    owner, other = start(1), start(2)
    owner.message("ask", "cid-g-1")
    question = wait_until(lambda: card_in(emulator, "question", "pending"), 20)
    barrier = threading.Barrier(64)
    statuses: list[int] = []

    def click(i: int) -> None:
        barrier.wait(10)
        target = other if i % 2 else owner
        statuses.append(
            target.card(question["id"], "submit", {"0": "Beijing" if i % 3 else "Shanghai"})
        )

    threads = [threading.Thread(target=click, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert statuses == [200] * 64
    wait_until(lambda: any("Answer:" in v["content"] for v in views(emulator, "status")), 20)
    assert len(owner.answers() + other.answers()) == 1


def test_a_killed_owner_process_has_its_cards_finalized_by_the_other(bot):
    emulator, start = bot
    owner, other = start(1), start(2)
    owner.message("ask", "cid-g-1")
    owner.message("hold", "cid-g-2")
    question = wait_until(lambda: card_in(emulator, "question", "pending"), 20)
    running = wait_until(lambda: card_in(emulator, "status", "running"), 20)
    owner.process.kill()  # SIGKILL: no clean-up of any kind
    owner.process.wait(10)
    killed = time.monotonic()
    wait_until(
        lambda: emulator.state()["views"][running["id"]]["state"] == "failed"
        and "Interrupted, please retry." in emulator.state()["views"][running["id"]]["content"]
        and emulator.state()["views"][question["id"]]["state"] == "expired",
        3.0 + 5.0 + 2.0,  # lease expiry + 5 s, plus the sweep's own second
    )
    assert time.monotonic() - killed < 3.0 + 5.0 + 2.0

    def told() -> int:
        sent = [c for c in emulator.calls() if c["path"] == "/v1.0/robot/groupMessages/send"]
        return sum("Interrupted, please retry." in json.dumps(c["body"]) for c in sent)

    wait_until(lambda: told() == 2, 10)  # each run's owner, once
    assert other.card(question["id"], "submit", {"0": "Beijing"}) == 200  # too late: nothing
    assert owner.answers() == [] and other.answers() == []


def test_redis_stopped_mid_run_and_restarted_loses_and_duplicates_nothing(bot, redis_server):
    emulator, start = bot
    owner, other = start(1), start(2)
    owner.message("ask", "cid-g-1")
    question = wait_until(lambda: card_in(emulator, "question", "pending"), 20)
    redis_server.stop()
    try:
        assert other.card(question["id"], "submit", {"0": "Beijing"}) == 200  # refused
        assert owner.card(question["id"], "submit", {"0": "Beijing"}) == 200  # refused
        assert emulator.state()["views"][question["id"]]["state"] == "pending"
    finally:
        redis_server.start()
    # the restarted Redis is empty: the owner still holds the card and applies the click
    wait_until(lambda: owner.card(question["id"], "submit", {"0": "Beijing"}) == 200
               and card_in(emulator, "question", "submitted"), 20)  # fmt: skip
    wait_until(
        lambda: any("Answer: Beijing" in v["content"] for v in views(emulator, "status")), 20
    )
    assert owner.answers() == ["Beijing"] and other.answers() == []
