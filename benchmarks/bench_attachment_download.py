"""Attachment download: peak memory and throughput of a 20 MB file, beside plain requests.

A local HTTP server on 127.0.0.1 (in this process, a thread) serves a 20 MiB body in
64 KiB writes with its Content-Length. Each client runs in its own child process so
its peak RSS (``ru_maxrss``, a high-water mark) is its own:

1. ``channelkit``: `channelkit.attachments.download` (cap 20 MiB, 64 KiB chunks) into a
   temporary directory: streamed, counted, hashed (sha256) and sniffed;
2. ``requests stream``: the plain copy, ``session.get(stream=True)`` then
   ``iter_content(64 KiB)`` written to a file, nothing else;
3. ``requests + sha256``: the same plain copy hashing each chunk, the part of
   channelkit's work that costs (it reports each file's sha256);
4. ``requests .content``: the whole body read into memory (what not to do), for scale.

Each child warms up (imports, one small download), reads its RSS high-water mark,
downloads the file ``ROUNDS`` times and reports the increase of the mark and the median
throughput. A second pass under ``tracemalloc`` reports the peak of Python allocations
during one download.

Run: ``python benchmarks/bench_attachment_download.py``
"""

from __future__ import annotations

import hashlib
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SIZE = 20 * 1024 * 1024
BLOCK = bytes(range(256)) * 256  # 64 KiB
ROUNDS = 5
CHUNK = 64 * 1024
MODES = ("channelkit", "requests stream", "requests + sha256", "requests .content")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        size = SIZE if self.path == "/big" else len(BLOCK)
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(size))
        self.end_headers()
        left = size
        while left:
            piece = BLOCK[: min(left, len(BLOCK))]
            self.wfile.write(piece)
            left -= len(piece)


def _maxrss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def _once(mode: str, session: object, url: str, folder: Path) -> None:
    import requests
    from channelkit.attachments import DownloadLimits, download

    assert isinstance(session, requests.Session)
    if mode == "channelkit":
        got = download(
            session,
            url,
            folder,
            name="big.bin",
            limits=DownloadLimits(per_file=SIZE, chunk_size=CHUNK),
        )
        got.path.unlink()
    elif mode in ("requests stream", "requests + sha256"):
        digest = hashlib.sha256()
        hashing = mode == "requests + sha256"
        with (
            session.get(url, stream=True, timeout=(10, 30)) as response,
            (folder / "big.bin").open("wb") as out,
        ):
            for chunk in response.iter_content(CHUNK):
                if hashing:
                    digest.update(chunk)
                out.write(chunk)
        (folder / "big.bin").unlink()
    else:
        body = session.get(url, timeout=(10, 30)).content
        (folder / "big.bin").write_bytes(body)
        (folder / "big.bin").unlink()
        del body


def _child(mode: str, port: int, traced: bool) -> None:
    import requests

    base = f"http://127.0.0.1:{port}"
    with requests.Session() as session, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _once(mode, session, base + "/small", folder)  # warm-up: imports, connection
        if traced:
            tracemalloc.start()
            _once(mode, session, base + "/big", folder)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            print(json.dumps({"traced_peak": peak}))
            return
        before = _maxrss_kib()
        seconds = []
        for _ in range(ROUNDS):
            started = time.perf_counter()
            _once(mode, session, base + "/big", folder)
            seconds.append(time.perf_counter() - started)
        after = _maxrss_kib()
        print(json.dumps({"rss_increase_kib": after - before, "seconds": seconds}))


def _run_child(mode: str, port: int, traced: bool) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(port), "1" if traced else "0"],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    port = httpd.server_address[1]
    expected = hashlib.sha256(BLOCK * (SIZE // len(BLOCK))).hexdigest()
    print(f"20 MiB download from 127.0.0.1, {ROUNDS} rounds per client, median throughput")
    print(f"(body sha256 {expected[:16]}...)")
    print(f"{'client':<20} {'peak RSS +':>12} {'tracemalloc peak':>17} {'MiB/s':>8}")
    try:
        for mode in MODES:
            timed = _run_child(mode, port, traced=False)
            traced = _run_child(mode, port, traced=True)
            rate = (SIZE / 1024 / 1024) / statistics.median(timed["seconds"])
            print(
                f"{mode:<20} {timed['rss_increase_kib']:>9.0f} KiB"
                f" {traced['traced_peak'] / 1024:>13.0f} KiB {rate:>8.0f}"
            )
    finally:
        httpd.shutdown()
        httpd.server_close()


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        _child(sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1")
    else:
        main()
