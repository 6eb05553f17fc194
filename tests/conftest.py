"""Suite-wide test settings and shared fixtures."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FIXTURE_SPEC = ROOT / "tests" / "codegen" / "fixtures" / "acme.json"

# Property tests assert behaviour, never speed: a loaded CI machine must not turn a slow
# example into a DeadlineExceeded failure. Modules that need other settings pass their own.
# The suite's examples are derandomized: the same run passes or fails the same way on
# every machine (a new random edge case must not reject an unrelated change). To search
# for new cases, run with CHANNELKIT_HYPOTHESIS=explore (random examples, ten times as
# many); a case found there becomes a fixed example or a fix.
settings.register_profile("channelkit", deadline=None, derandomize=True)
settings.register_profile("explore", deadline=None, max_examples=1_000)
settings.load_profile(
    "explore" if os.environ.get("CHANNELKIT_HYPOTHESIS") == "explore" else "channelkit"
)


#: Markers of the files that take many seconds of real time (a browser, a real agent,
#: processes started and killed, bursts of hundreds of messages). Their files run first:
#: pytest-xdist hands out files in collection order, and a 30-second file handed out last
#: keeps one worker busy while the others have finished (about 30 s at the end of a run).
START_FIRST_MARKERS = ("slow", "browser", "acp_real")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put the files with a `START_FIRST_MARKERS` test first, each file's tests kept
    together and in order (a stable sort)."""
    first = {
        item.path
        for item in items
        if any(item.get_closest_marker(name) for name in START_FIRST_MARKERS)
    }
    items.sort(key=lambda item: item.path not in first)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Before pytest-xdist starts its workers, write the tests' rewritten bytecode once
    (`bytecode_warmup`)."""
    from tests.bytecode_warmup import warm_before_workers

    warm_before_workers(session.config)


@pytest.fixture(scope="session")
def acme(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """The fixture spec generated into a scratch dir and imported as channelkit.clients.acme."""
    from codegen.sandbox import load_generated

    return load_generated(FIXTURE_SPEC, tmp_path_factory.mktemp("generated"))


class RedisServer:
    """A throwaway ``redis-server`` on 127.0.0.1 (no persistence), for the whole session.

    ``url`` stays the same across :meth:`stop` / :meth:`start`, so a test can take Redis
    away and bring it back under a store it built. A test that stops it restarts it
    before it ends (``try``/``finally``): the server is shared by the whole session.
    """

    host = "127.0.0.1"

    def __init__(self, executable: str, port: int, workdir: Path) -> None:
        self.executable = executable
        self.port = port
        self.workdir = workdir
        self.url = f"redis://{self.host}:{port}/0"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, timeout_s: float = 10.0) -> None:
        """Start the server (no-op when running) and wait until it answers PING."""
        if self.running:
            return
        self._process = subprocess.Popen(
            [
                self.executable,
                "--port", str(self.port),
                "--bind", self.host,
                "--save", "",
                "--appendonly", "no",
                "--dir", str(self.workdir),
                "--protected-mode", "yes",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while not self._answers():
            if self._process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self._process.returncode}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not answer on port {self.port}")
            time.sleep(0.02)  # polling a starting process, not waiting for a timer

    def stop(self) -> None:
        """Stop the server (no-op when stopped); its clients see their connections close."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

    def _answers(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A local redis-server for the session: ``url``, ``stop()``, ``start()``, ``running``.

    Skips with a clear reason only when ``redis-server`` is not installed. Tests share
    the server: use a namespace of your own (e.g. from ``uuid4``) rather than flushing,
    and restart it in a ``finally`` after stopping it.
    """
    executable = shutil.which("redis-server")
    if executable is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    workdir = tmp_path_factory.mktemp("redis")
    last: Exception | None = None
    for _ in range(3):  # another process may take the free port before redis binds it
        server = RedisServer(executable, _free_port(), workdir)
        try:
            server.start()
        except RuntimeError as exc:
            last = exc
            continue
        try:
            yield server
        finally:
            server.stop()
        return
    raise RuntimeError(f"could not start redis-server: {last}")
