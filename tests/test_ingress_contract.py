"""IngressResponse deferred work: run once, after the ACK, failures isolated."""

from __future__ import annotations

import threading

from channelkit.ingress import Headers, IngressResponse


def test_deferred_work_runs_once_in_order_and_survives_a_failure() -> None:
    calls: list[str] = []

    def boom() -> None:
        calls.append("boom")
        raise RuntimeError("deferred failure")

    response = IngressResponse.json(200, {"ok": True}, after=[lambda: calls.append("a"), boom])
    response = response.with_after(lambda: calls.append("c"))
    assert calls == []  # building the ACK runs nothing
    response.run_after()
    response.run_after()
    assert calls == ["a", "boom", "c"]
    assert response.body == b'{"ok":true}'


def test_concurrent_run_after_runs_the_work_exactly_once() -> None:
    counter: list[int] = []
    response = IngressResponse.json(200, {}, after=[lambda: counter.append(1)])
    start = threading.Barrier(16)

    def worker() -> None:
        start.wait(timeout=5)
        response.run_after()

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=5)
    assert counter == [1]


def test_headers_are_case_insensitive() -> None:
    headers = Headers([("X-Lark-Signature", "abc")])
    assert headers["x-lark-signature"] == "abc"
    assert "X-LARK-SIGNATURE" in headers
    assert list(headers) == ["X-Lark-Signature"]
