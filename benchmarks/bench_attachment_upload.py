"""Attachment upload: peak memory and throughput of a 20 MB file, beside plain requests.

A local HTTP server on 127.0.0.1 (in this process, a thread) reads each request body in
64 KiB pieces, counts it and throws it away, and answers like the Telegram Bot API. Each
client runs in its own child process so its peak RSS (``ru_maxrss``, a high-water mark)
is its own, and uploads the same 20 MiB file from disk:

1. ``channelkit``: the generated Telegram client's ``send_document`` with an
   `UploadFile` part (what `TelegramChannel.upload_file` sends): a ``multipart/form-data``
   body streamed from the file with its exact Content-Length;
2. ``requests stream``: the plain streamed copy, the open file as the request body
   (``data=file``, no multipart framing), nothing else;
3. ``requests files=``: requests' own multipart upload (``files={"document": file}``),
   which builds the whole body in memory first.

Each child warms up (imports, one small upload), reads its RSS high-water mark, uploads
the file ``ROUNDS`` times and reports the increase of the mark and the median
throughput; the server checks every body carried all the file's bytes.

Run: ``python benchmarks/bench_attachment_upload.py``
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SIZE = 20 * 1024 * 1024
BLOCK = bytes(range(256)) * 256  # 64 KiB
ROUNDS = 5
MODES = ("channelkit", "requests stream", "requests files=")
TOKEN = "123456:bench"
ANSWER = json.dumps(
    {"ok": True, "result": {"message_id": 7, "date": 0, "chat": {"id": 1, "type": "private"}}}
).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    received: list[int] = []  # body sizes, in arrival order (one list per server)

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        left = int(self.headers.get("Content-Length", "0"))
        total = 0
        while left:
            piece = self.rfile.read(min(left, len(BLOCK)))
            if not piece:
                break
            total += len(piece)
            left -= len(piece)
        self.received.append(total)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(ANSWER)))
        self.end_headers()
        self.wfile.write(ANSWER)


def _maxrss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def _once(mode: str, client: object, session: object, base: str, path: Path) -> None:
    import requests
    from channelkit.clients.telegram import SendDocumentRequest, TelegramClient
    from channelkit.http.multipart import UploadFile

    if mode == "channelkit":
        assert isinstance(client, TelegramClient)
        size = path.stat().st_size
        part = UploadFile(path.name, "application/octet-stream", size, lambda: path.open("rb"))
        body = SendDocumentRequest(chat_id=1, document=part)
        client.send_document(body=body, timeout=(10.0, 120.0))
        return
    assert isinstance(session, requests.Session)
    url = f"{base}/bot{TOKEN}/sendDocument"
    with path.open("rb") as file:
        if mode == "requests stream":
            response = session.post(url, data=file, timeout=(10, 120))
        else:
            response = session.post(
                url, data={"chat_id": "1"}, files={"document": file}, timeout=(10, 120)
            )
    response.raise_for_status()


def _child(mode: str, port: int) -> None:
    import requests
    from channelkit.clients.telegram import TelegramClient

    base = f"http://127.0.0.1:{port}"
    client = TelegramClient(token=TOKEN, base_url=base)
    with requests.Session() as session, tempfile.TemporaryDirectory() as tmp:
        small, big = Path(tmp) / "small.bin", Path(tmp) / "big.bin"
        small.write_bytes(BLOCK)
        with big.open("wb") as out:
            for _ in range(SIZE // len(BLOCK)):
                out.write(BLOCK)
        _once(mode, client, session, base, small)  # warm-up: imports, connection
        before = _maxrss_kib()
        seconds = []
        for _ in range(ROUNDS):
            started = time.perf_counter()
            _once(mode, client, session, base, big)
            seconds.append(time.perf_counter() - started)
        after = _maxrss_kib()
        print(json.dumps({"rss_increase_kib": after - before, "seconds": seconds}))


def _run_child(mode: str, port: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(port)],
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
    _Handler.received = []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    port = httpd.server_address[1]
    print(f"20 MiB upload to 127.0.0.1, {ROUNDS} rounds per client, median throughput")
    print(f"{'client':<18} {'peak RSS +':>12} {'MiB/s':>8}")
    try:
        for mode in MODES:
            _Handler.received = []
            timed = _run_child(mode, port)
            big = [n for n in _Handler.received if n >= SIZE]
            assert len(big) == ROUNDS, f"{mode}: {len(big)} of {ROUNDS} bodies carried the file"
            rate = (SIZE / 1024 / 1024) / statistics.median(timed["seconds"])
            print(f"{mode:<18} {timed['rss_increase_kib']:>9.0f} KiB {rate:>8.0f}")
    finally:
        httpd.shutdown()
        httpd.server_close()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        _child(sys.argv[2], int(sys.argv[3]))
    else:
        main()
