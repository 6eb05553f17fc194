"""Discord REST rate limits: per-route buckets from the headers, the global window, 429
``retry_after`` honoured on the scheduler, nothing dropped."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from channelkit.errors import ConfigurationError, RateLimited
from channelkit.platforms.discord.ratelimit import DiscordRateLimiter, RestAnswer, route_key
from channelkit.runtime.clock import FakeClock
from channelkit.runtime.pool import WorkerPool
from channelkit.runtime.scheduler import Scheduler
from channelkit.testing import WAIT


@dataclass
class Answer:
    status_code: int
    headers: Mapping[str, str] = field(default_factory=dict)
    content: bytes = b"{}"


class Runtime:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.pool = WorkerPool(4, name="test-discord-rl")
        self.scheduler = Scheduler(self.pool, clock=self.clock)

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.settle()

    def settle(self) -> None:
        # a send finishing pumps its route, which may post more sends: wait until quiet
        for _ in range(20):
            assert self.pool.wait_idle(5.0)


@pytest.fixture
def rt() -> Iterator[Runtime]:
    runtime = Runtime()
    yield runtime
    runtime.scheduler.stop(2.0)
    runtime.pool.shutdown(timeout=2.0)


class Bucket:
    """Discord's side of one bucket: ``limit`` requests a window of ``window`` seconds on
    the fake clock; one more answers 429."""

    def __init__(self, clock: FakeClock, limit: int = 2, window: float = 1.0) -> None:
        self.clock = clock
        self.limit = limit
        self.window = window
        self.lock = threading.Lock()
        self.started = clock.now()
        self.used = 0
        self.ok = 0
        self.throttled = 0

    def send(self) -> RestAnswer:
        with self.lock:
            now = self.clock.now()
            if now >= self.started + self.window:
                self.started, self.used = now, 0
            reset_after = self.started + self.window - now
            if self.used >= self.limit:
                self.throttled += 1
                body = {"message": "You are being rate limited.", "retry_after": reset_after}
                return Answer(429, {"X-RateLimit-Scope": "user"}, json.dumps(body).encode())
            self.used += 1
            self.ok += 1
            return Answer(
                200,
                {
                    "X-RateLimit-Bucket": "abcd",
                    "X-RateLimit-Limit": str(self.limit),
                    "X-RateLimit-Remaining": str(self.limit - self.used),
                    "X-RateLimit-Reset-After": f"{reset_after:.3f}",
                },
            )


def test_route_key_keeps_the_top_level_resource_only() -> None:
    assert route_key("patch", "/channels/123456/messages/987654") == (
        "PATCH /channels/123456/messages/{id}"
    )
    assert route_key("POST", "/webhooks/111111/tok-en/messages/222222?wait=true") == (
        "POST /webhooks/111111/tok-en/messages/{id}"
    )
    assert route_key("GET", "/users/123456789") == "GET /users/{id}"
    with pytest.raises(ConfigurationError, match="path"):
        route_key("GET", "channels/1")


def test_a_burst_goes_out_at_the_buckets_pace_and_never_meets_a_429(rt: Runtime) -> None:
    limiter = DiscordRateLimiter(rt.scheduler, rt.pool)
    bucket = Bucket(rt.clock, limit=2, window=1.0)
    futures = [
        limiter.submit("PATCH", f"/channels/100000/messages/{200000 + i}", bucket.send)
        for i in range(7)
    ]
    rt.settle()
    assert bucket.ok == 2  # the first alone (bucket unknown), then what it said was left
    assert limiter.bucket_of("PATCH", "/channels/100000/messages/123456")[:2] == ("abcd", 0)
    rt.advance(0.5)
    assert bucket.ok == 2  # the window has not reset
    rt.advance(0.5)
    assert bucket.ok == 4  # the window reset: two more
    rt.advance(0.9)
    assert bucket.ok == 4
    rt.advance(0.1)
    assert bucket.ok == 6
    rt.advance(1.0)
    assert bucket.ok == 7
    assert bucket.throttled == 0
    assert [f.result(timeout=1).status_code for f in futures] == [200] * 7
    assert limiter.waiting() == 0


def test_another_channel_has_its_own_bucket(rt: Runtime) -> None:
    limiter = DiscordRateLimiter(rt.scheduler, rt.pool)
    first = Bucket(rt.clock, limit=1)
    second = Bucket(rt.clock, limit=1)
    for _ in range(2):
        limiter.submit("POST", "/channels/111111/messages", first.send)
        limiter.submit("POST", "/channels/222222/messages", second.send)
    rt.settle()
    assert (first.ok, second.ok) == (1, 1)  # each waits for its own window only
    rt.advance(1.0)
    assert (first.ok, second.ok) == (2, 2)


def test_a_429_is_sent_again_after_its_retry_after(rt: Runtime) -> None:
    limiter = DiscordRateLimiter(rt.scheduler, rt.pool)
    answers = [
        Answer(429, {}, json.dumps({"retry_after": 2.5, "global": False}).encode()),
        Answer(200, {"X-RateLimit-Remaining": "4", "X-RateLimit-Reset-After": "1"}),
    ]
    calls: list[float] = []

    def send() -> RestAnswer:
        calls.append(rt.clock.now())
        return answers[len(calls) - 1]

    future = limiter.submit("POST", "/channels/333333/messages", send)
    rt.settle()
    assert len(calls) == 1 and not future.done()
    rt.advance(2.4)
    assert len(calls) == 1  # not before retry_after
    rt.advance(0.1)
    assert len(calls) == 2
    assert future.result(timeout=1).status_code == 200
    assert calls[1] - calls[0] == pytest.approx(2.5)
    assert limiter.counts["throttled"] == 1


def test_a_global_429_pauses_every_route(rt: Runtime) -> None:
    limiter = DiscordRateLimiter(rt.scheduler, rt.pool)
    sent: list[str] = []
    first = [True]

    def send(name: str) -> RestAnswer:
        sent.append(name)
        if first[0]:
            first[0] = False
            body = json.dumps({"retry_after": 3.0, "global": True}).encode()
            return Answer(429, {"X-RateLimit-Global": "true"}, body)
        return Answer(200)

    a = limiter.submit("POST", "/channels/444444/messages", lambda: send("a"))
    rt.settle()
    b = limiter.submit("POST", "/channels/555555/messages", lambda: send("b"))
    rt.settle()
    assert sent == ["a"]  # the other route waits out the global pause too
    rt.advance(3.0)
    assert sorted(sent) == ["a", "a", "b"]
    assert a.result(timeout=1).status_code == b.result(timeout=1).status_code == 200


def test_the_global_window_holds_the_fifty_first_request(rt: Runtime) -> None:
    limiter = DiscordRateLimiter(rt.scheduler, rt.pool, global_per_second=50)
    sent: list[int] = []
    lock = threading.Lock()

    def send(i: int) -> RestAnswer:
        with lock:
            sent.append(i)
        return Answer(200)

    futures = [
        limiter.submit("POST", f"/channels/{600000 + i}/messages", lambda i=i: send(i))
        for i in range(60)
    ]
    rt.settle()
    assert len(sent) == 50
    rt.advance(1.0)
    assert len(sent) == 60
    assert all(f.result(timeout=1).status_code == 200 for f in futures)


def test_endless_429s_fail_the_request_and_a_full_queue_refuses(rt: Runtime) -> None:
    limiter = DiscordRateLimiter(rt.scheduler, rt.pool, max_queued=2)
    body = json.dumps({"retry_after": 1.0}).encode()
    future = limiter.submit("GET", "/channels/777777", lambda: Answer(429, {}, body))
    answering = threading.Event()  # the second request is still waiting for its answer

    def slow() -> RestAnswer:
        answering.wait(WAIT)
        return Answer(200)

    second = limiter.submit("GET", "/channels/888888", slow)
    with pytest.raises(RateLimited, match="already waiting"):
        limiter.submit("GET", "/channels/999999", lambda: Answer(200))
    answering.set()
    assert second.result(timeout=WAIT).status_code == 200
    for _ in range(7):
        rt.advance(1.0)
    with pytest.raises(RateLimited, match="429"):
        future.result(timeout=1)
    assert limiter.waiting() == 0


def test_a_send_error_reaches_its_future_and_the_route_goes_on(rt: Runtime) -> None:
    limiter = DiscordRateLimiter(rt.scheduler, rt.pool)

    def boom() -> RestAnswer:
        raise OSError("connection reset")

    failed = limiter.submit("POST", "/channels/123123/messages", boom)
    ok = limiter.submit("POST", "/channels/123123/messages", lambda: Answer(200))
    rt.settle()
    with pytest.raises(OSError, match="reset"):
        failed.result(timeout=1)
    assert ok.result(timeout=1).status_code == 200


def test_a_real_http_429_is_honoured(rt: Runtime) -> None:
    hits: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            hits.append(rt.clock.now())
            if len(hits) == 1:
                body = json.dumps({"message": "slow down", "retry_after": 0.75, "global": False})
                status = 429
            else:
                body = json.dumps({"id": "1"})
                status = 200
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("X-RateLimit-Bucket", "b1")
            self.send_header("X-RateLimit-Limit", "5")
            self.send_header("X-RateLimit-Remaining", "0" if status == 429 else "4")
            self.send_header("X-RateLimit-Reset-After", "0.75")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/channels/1/messages"
    try:
        limiter = DiscordRateLimiter(rt.scheduler, rt.pool)
        future = limiter.submit(
            "POST", "/channels/1/messages", lambda: requests.post(url, json={}, timeout=5)
        )
        rt.settle()
        assert len(hits) == 1
        rt.advance(0.75)
        answer = future.result(timeout=5)
        assert answer.status_code == 200 and len(hits) == 2
        assert hits[1] - hits[0] == pytest.approx(0.75)
    finally:
        server.shutdown()
        server.server_close()


def test_a_thousand_edits_all_arrive_at_the_buckets_pace(rt: Runtime) -> None:
    limiter = DiscordRateLimiter(rt.scheduler, rt.pool)
    bucket = Bucket(rt.clock, limit=5, window=5.0)  # Discord's edit budget, roughly
    futures = [
        limiter.submit("PATCH", f"/channels/100000/messages/{300000 + i % 7}", bucket.send)
        for i in range(1000)
    ]
    rt.settle()
    windows = 0
    while limiter.waiting():
        rt.advance(5.0)
        windows += 1
        assert windows <= 200
    assert windows == 199  # 5 a window: the first window's 5, then 199 more
    assert bucket.ok == 1000 and bucket.throttled == 0
    assert all(f.result(timeout=1).status_code == 200 for f in futures)


def test_close_fails_what_waits_and_a_cancelled_request_is_never_sent(rt: Runtime) -> None:
    from channelkit.errors import ChannelKitError

    limiter = DiscordRateLimiter(rt.scheduler, rt.pool)
    bucket = Bucket(rt.clock, limit=1, window=10.0)
    sent = limiter.submit("POST", "/channels/424242/messages", bucket.send)
    rt.settle()
    cancelled = limiter.submit("POST", "/channels/424242/messages", bucket.send)
    waiting = limiter.submit("POST", "/channels/424242/messages", bucket.send)
    assert cancelled.cancel()
    rt.advance(10.0)  # the cancelled one is skipped, the next one goes
    assert bucket.ok == 2 and waiting.result(timeout=1).status_code == 200
    left = limiter.submit("POST", "/channels/424242/messages", bucket.send)
    assert limiter.close() == 1
    with pytest.raises(ChannelKitError, match="closed"):
        left.result(timeout=1)
    with pytest.raises(ChannelKitError, match="closed"):
        limiter.submit("POST", "/channels/424242/messages", bucket.send)
    assert sent.result(timeout=1).status_code == 200 and limiter.waiting() == 0
