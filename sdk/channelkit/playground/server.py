"""A small threaded WSGI server on 127.0.0.1 for the playground and tests.

The standard library's ``wsgiref`` server with one thread per connection. It is fine for
the playground and tests; production deployments use a real WSGI server (see
docs/deployment.md).
"""

from __future__ import annotations

import logging
import random
import signal
import socket
import socketserver
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from channelkit.platforms import PLATFORMS, PlaygroundDefaults

__all__ = ["EmulatorServer", "LocalServer", "free_port"]

logger = logging.getLogger(__name__)

WSGIApplication = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


#: Where `free_port()` looks first: from here up to the start of the OS's ephemeral range.
_LOWEST_CHOSEN_PORT = 10_000
_EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_ATTEMPTS = 64
_random = random.Random()


def _ephemeral_port_floor(path: Path = _EPHEMERAL_RANGE_FILE) -> int | None:
    """The lowest port the OS hands to outgoing connections (Linux's
    ``ip_local_port_range``), or None where that is not known."""
    try:
        low = int(path.read_text(encoding="ascii").split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return low if 0 < low <= 65_535 else None


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago, for a server that binds it later.

    Chosen below the OS's ephemeral range when that range is known (Linux): the OS gives
    ports of that range to outgoing connections, so a port it picked (``bind(0)``) could
    be taken by any connection before the server binds it; below the range only another
    program choosing the same number can. Where the range is unknown, or no free port
    turns up below it, the OS picks.
    """
    floor = _ephemeral_port_floor()
    if floor is not None and floor > _LOWEST_CHOSEN_PORT:
        for _ in range(_ATTEMPTS):
            port = _random.randrange(_LOWEST_CHOSEN_PORT, floor)
            if _bindable(host, port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


class _ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    # a burst of simultaneous calls (the SDK's card writes of 128 runs at once) must
    # queue at the listening socket, not be reset (socketserver's default backlog is 5)
    request_queue_size = 256
    allow_reuse_address = True
    block_on_close = False


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s - %s", self.address_string(), format % args)


class _Swappable:
    """Lets the server bind (and learn its port) before the real app exists."""

    def __init__(self) -> None:
        self.app: WSGIApplication | None = None

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        app = self.app
        if app is None:
            start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
            return [b"starting"]
        return app(environ, start_response)


class LocalServer:
    """A threaded WSGI server on ``host:port`` (port 0 = a free port) in a daemon thread.

    Bind first (``port`` and ``url`` are known at once), then `start()` with the app.
    Use as a context manager or call `stop()`.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._slot = _Swappable()
        self._server = make_server(
            host, port, self._slot, server_class=_ThreadingWSGIServer, handler_class=_QuietHandler
        )
        self.host = host
        self.port = int(self._server.server_address[1])
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://host:port`` (no trailing slash)."""
        return f"http://{self.host}:{self.port}"

    def start(self, app: WSGIApplication) -> LocalServer:
        """Serve ``app`` from a daemon thread."""
        self._slot.app = app
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.2},
                name=f"channelkit-http-{self.port}",
                daemon=True,
            )
            self._thread.start()
        return self

    def serve_forever(self, app: WSGIApplication) -> None:
        """Serve ``app`` until interrupted: Ctrl+C (SIGINT) or SIGTERM raise
        ``KeyboardInterrupt`` here, on the calling (main) thread.

        The server itself runs on its daemon thread and keeps answering until
        `stop()`, so shutdown work that calls back into it (the playground's channel
        finalizing its cards on the emulator this server hosts) is answered at once
        instead of waiting for a request timeout.
        """
        self.start(app)
        thread = self._thread
        restore: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                if signal.getsignal(signum) is not signal.SIG_IGN:
                    restore[int(signum)] = signal.signal(signum, _interrupt)
        try:
            while thread is not None and thread.is_alive():
                thread.join(0.5)  # wakes for signals; returns when stop() ends the server
        finally:
            for number, handler in restore.items():
                signal.signal(number, handler)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving and close the socket."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _playground(platform: str) -> PlaygroundDefaults:
    """The registry's playground entry of ``platform`` (a ValueError naming the choices)."""
    spec = PLATFORMS.get(platform)
    if spec is None or spec.playground is None:
        emulated = [name for name, entry in PLATFORMS.items() if entry.playground is not None]
        raise ValueError(f"platform: must be one of {', '.join(emulated)} (got {platform!r})")
    return spec.playground


class EmulatorServer:
    """A platform emulator served on 127.0.0.1 - the thing a test fixture starts.

    ::

        with EmulatorServer(robot_callback_url=..., card_callback_url=...) as emu:
            client = DingtalkClient(base_url=emu.url)
            ...
            emu.emulator.calls()

        EmulatorServer(platform="feishu", events_url=..., card_url=...)
        EmulatorServer(platform="telegram", webhook_url=...)

    ``platform`` is any registered platform with an emulator (its ``playground`` entry in
    ``channelkit.platforms.PLATFORMS``). The emulator class gets the registry's playground
    credentials, then the keyword arguments given here (credentials, callback URLs,
    ``deliver``), which can also be set later on ``emu.emulator``.
    """

    def __init__(
        self, *, port: int = 0, platform: str = "dingtalk", **emulator_options: Any
    ) -> None:
        defaults = _playground(platform)
        emulator_class = defaults.emulator.load()
        self.server = LocalServer(port=port)
        self.emulator: Any = emulator_class(**defaults.emulator_kwargs(**emulator_options))
        self.emulator.base_url = self.server.url
        self.server.start(self.emulator)

    @property
    def url(self) -> str:
        """The emulator's base URL (give it to clients as ``base_url``)."""
        return self.server.url

    def close(self) -> None:
        """Stop the server (and what the emulator started, e.g. DingTalk's gateway)."""
        self.emulator.close()
        self.server.stop()

    def __enter__(self) -> EmulatorServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
