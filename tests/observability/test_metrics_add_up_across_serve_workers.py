"""``channelkit serve --workers 2``: ``GET /metrics`` of either worker counts both.

Requests reach the two workers through their one shared socket (the kernel picks the
worker). Each refused request (no DingTalk signature: 401) is counted by the worker that
answered it, in its own file of the multiprocess directory; once both workers counted
some, every scrape (whichever worker answers it) reports the total of all requests sent,
and that total is the sum of the two workers' own counts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import channelkit
import pytest
import requests
from channelkit import cli
from channelkit.testing import wait_until

pytest.importorskip("prometheus_client")
pytest.importorskip("waitress")
from prometheus_client.multiprocess import MultiProcessCollector  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

#: the sdk directory of the channelkit under test (the workers run the same code)
SDK = Path(channelkit.__file__).resolve().parents[1]

CHANNEL = {
    "platform": "dingtalk",
    "name": "helpdesk",
    "credentials": {
        "clientId": "ding-app",
        "clientSecret": "ding-secret",
        "cardCallbackSecret": "card-secret",
    },
    "options": {
        "ingress": "http",
        "cardCallbackRouteKey": "helpdesk-cards",
        "apiBaseUrl": "http://127.0.0.1:9",
        "interactiveCards": {"enabled": True},
    },
}

BAD_SIGNATURE = {"platform": "dingtalk", "outcome": "bad_signature"}


def refused_in(text: str) -> float:
    """``channelkit_ingress_total{platform="dingtalk", outcome="bad_signature"}`` of a
    Prometheus text page."""
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "channelkit_ingress_total"
        and all(sample.labels.get(k) == v for k, v in BAD_SIGNATURE.items())
    )


def refused_per_worker(directory: Path) -> dict[str, float]:
    """Each worker's own count (its ``counter_<pid>.db`` file), by pid."""
    counts: dict[str, float] = {}
    for path in sorted(directory.glob("counter_*.db")):
        for metric in MultiProcessCollector.merge([str(path)], accumulate=True):
            for sample in metric.samples:
                if sample.name == "channelkit_ingress_total" and all(
                    sample.labels.get(k) == v for k, v in BAD_SIGNATURE.items()
                ):
                    counts[path.stem.split("_", 1)[1]] = sample.value
    return counts


def test_two_workers_count_into_one_sum_that_every_scrape_reports(
    tmp_path: Path, redis_server: Any
) -> None:
    namespace = f"metrics-{uuid.uuid4().hex[:8]}"
    config = {
        "channels": [CHANNEL],
        "agent": {"type": "demo"},
        "state": {"redis": {"url": redis_server.url, "namespace": namespace}},
    }
    path = tmp_path / "channelkit.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": str(SDK),
        "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),  # serve keeps one it is given
    }
    argv = ["serve", "--config", str(path), "--workers", "2", "--port", "0", "--grace", "5"]
    if hasattr(cli, "EXIT_STARTUP_CHECK"):  # made-up credentials: nothing to check
        argv.append("--skip-startup-checks")
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "channelkit", *argv],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert "2 workers on http://127.0.0.1:" in first, first
        url = first.strip().rsplit(" ", 1)[-1]

        def healthy() -> bool:
            try:
                return requests.get(url + "/healthz", timeout=5).status_code == 200
            except requests.RequestException:
                return False

        wait_until(healthy, timeout=60, what="/healthz answers")
        assert requests.get(url + "/metrics", timeout=5).status_code == 200
        sent = 0

        def both_counted() -> bool:
            nonlocal sent
            for _ in range(10):  # a new connection each: the kernel picks the worker
                with requests.Session() as session:
                    answer = session.post(url + "/dingtalk/robot", json={}, timeout=5)
                assert answer.status_code in (401, 403), answer.text
                sent += 1
            counts = refused_per_worker(metrics_dir)
            return len(counts) == 2 and all(n > 0 for n in counts.values())

        wait_until(both_counted, timeout=60, what="both workers counted refused requests")
        per_worker = refused_per_worker(metrics_dir)
        assert sum(per_worker.values()) == sent, per_worker
        for _ in range(6):  # whichever worker answers the scrape: the same total
            with requests.Session() as session:
                page = session.get(url + "/metrics", timeout=5)
            assert page.status_code == 200, page.text
            assert refused_in(page.text) == sent
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        log.close()
