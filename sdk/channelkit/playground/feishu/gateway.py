"""The Feishu emulator's long-connection gateway: endpoint URLs, a WebSocket server, frames.

``POST /callback/ws/endpoint`` (answered by the Feishu emulator) calls
:meth:`FeishuGateway.endpoint`: with the app's ``AppID``/``AppSecret`` it starts the
WebSocket server on 127.0.0.1 on first use (``websockets.sync.server`` in a daemon
thread) and answers ``{"code": 0, "data": {"URL", "ClientConfig"}}``; the URL carries
``device_id``, ``service_id`` and a one-time ``access_key``, usable for ``url_lifetime``
seconds (a handshake without a valid one is refused with HTTP 403 and a
``handshake-status`` header).

Frames are protobuf ``pbbp2.Frame`` messages. The schema is declared here on its own (as
a text-format descriptor), independently of the SDK's, so the SDK's field numbers are
checked against a second reading of Feishu's published ``pbbp2.proto``.

* ping control frames are answered with a pong (its payload: :attr:`pong_config`, a
  ``ClientConfig``, when set) and counted;
* :meth:`FeishuGateway.deliver` sends a payload as a data frame (header ``type``
  ``event``, a fresh ``message_id``, ``trace_id``, ``sum``/``seq``: ``fragments`` > 1
  splits it) and waits for its ACK (the frame sent back with ``{"code", "data"}``). A
  frame not ACKed when the connection ended is sent again on the next connection (the
  same ``message_id``), as Feishu redelivers; a delivery gives up after ``ack_timeout``.

Faults for tests: :meth:`drop` (the socket dies, no close frame),
:meth:`refuse_handshakes` (the next n get HTTP 503), :meth:`send_raw` (any bytes or text),
:meth:`lose_acks` (the next n ACKs are lost with their connection) and
:meth:`redeliver` (an ACKed frame again).
"""

from __future__ import annotations

import base64
import functools
import importlib
import json
import logging
import secrets
import socket
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["FeishuGateway", "WsAck", "decode_frame", "encode_frame"]

logger = logging.getLogger(__name__)

#: Frames, keys and ACKs kept (oldest dropped).
MAX_KEPT = 1_000
#: Seconds an endpoint URL stays usable.
DEFAULT_URL_LIFETIME = 90.0

_WS_LOGGER = logging.getLogger("channelkit.playground.feishu.gateway.websockets")
_WS_LOGGER.addHandler(logging.NullHandler())
_WS_LOGGER.propagate = False

_PBBP2 = """
name: "channelkit/playground/pbbp2.proto" package: "pbbp2" syntax: "proto2"
message_type {
  name: "Header"
  field { name: "key" number: 1 label: LABEL_REQUIRED type: TYPE_STRING }
  field { name: "value" number: 2 label: LABEL_REQUIRED type: TYPE_STRING }
}
message_type {
  name: "Frame"
  field { name: "SeqID" number: 1 label: LABEL_REQUIRED type: TYPE_UINT64 }
  field { name: "LogID" number: 2 label: LABEL_REQUIRED type: TYPE_UINT64 }
  field { name: "service" number: 3 label: LABEL_REQUIRED type: TYPE_INT32 }
  field { name: "method" number: 4 label: LABEL_REQUIRED type: TYPE_INT32 }
  field {
    name: "headers" number: 5 label: LABEL_REPEATED type: TYPE_MESSAGE
    type_name: ".pbbp2.Header"
  }
  field { name: "payload_encoding" number: 6 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "payload_type" number: 7 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "payload" number: 8 label: LABEL_OPTIONAL type: TYPE_BYTES }
  field { name: "LogIDNew" number: 9 label: LABEL_OPTIONAL type: TYPE_STRING }
}
"""


@functools.lru_cache(maxsize=1)
def _frame_class() -> Any:
    pb2 = importlib.import_module("google.protobuf.descriptor_pb2")
    pools = importlib.import_module("google.protobuf.descriptor_pool")
    factory = importlib.import_module("google.protobuf.message_factory")
    text_format = importlib.import_module("google.protobuf.text_format")
    proto = text_format.Parse(_PBBP2, pb2.FileDescriptorProto())
    pool = pools.DescriptorPool()
    pool.Add(proto)
    return factory.GetMessageClass(pool.FindMessageTypeByName("pbbp2.Frame"))


def encode_frame(
    method: int,
    headers: Mapping[str, str],
    payload: bytes = b"",
    *,
    service: int = 0,
    seq_id: int = 0,
    log_id: int = 0,
) -> bytes:
    """A ``pbbp2.Frame`` as bytes (``method`` 0 control, 1 data)."""
    frame = _frame_class()(SeqID=seq_id, LogID=log_id, service=service, method=method)
    for key, value in headers.items():
        frame.headers.add(key=key, value=value)
    if payload:
        frame.payload = payload
    data: bytes = frame.SerializeToString()
    return data


def decode_frame(data: bytes) -> tuple[int, dict[str, str], bytes]:
    """``(method, headers, payload)`` of a ``pbbp2.Frame``; ``ValueError`` otherwise."""
    frame = _frame_class()()
    try:
        frame.ParseFromString(data)
    except Exception:
        raise ValueError("not a pbbp2.Frame") from None
    if not frame.IsInitialized():
        raise ValueError("not a pbbp2.Frame")
    headers = {str(h.key): str(h.value) for h in frame.headers}
    return int(frame.method), headers, bytes(frame.payload)


@dataclass(frozen=True)
class WsAck:
    """The bot's ACK of one data frame: its ``code``, the decoded ``data`` and the frame's
    headers (``biz_rt`` included)."""

    message_id: str
    code: int
    data: str
    headers: Mapping[str, str]


def _bounded_put(store: OrderedDict[str, Any], key: str, value: Any) -> None:
    store[key] = value
    while len(store) > MAX_KEPT:
        store.popitem(last=False)


class FeishuGateway:
    """One app's long-connection gateway; see the module docstring."""

    def __init__(
        self,
        app_id: str,
        app_secret: str,
        *,
        ack_timeout: float = 10.0,
        url_lifetime: float = DEFAULT_URL_LIFETIME,
    ) -> None:
        self.app_id = app_id
        self.app_secret = app_secret
        self.ack_timeout = ack_timeout
        self.url_lifetime = url_lifetime
        self.service_id = 33554678
        #: the ``ClientConfig`` of endpoint answers (seconds)
        self.client_config: dict[str, int] = {
            "ReconnectCount": -1,
            "ReconnectInterval": 120,
            "ReconnectNonce": 30,
            "PingInterval": 120,
        }
        #: a ``ClientConfig`` sent in every pong (None: empty pongs)
        self.pong_config: dict[str, int] | None = None
        self._cond = threading.Condition()
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._keys: OrderedDict[str, float] = OrderedDict()
        self._live: Any = None
        self._pending: OrderedDict[str, list[bytes]] = OrderedDict()  # id -> frames
        self._sent: OrderedDict[str, list[bytes]] = OrderedDict()  # ACKed frames
        self._acks: OrderedDict[str, WsAck] = OrderedDict()
        self._refuse = 0
        self._lose = 0
        #: ``endpoints``, ``connections``, ``pings``, ``drops``, ``refused``,
        #: ``redelivered``, ``acks``, ``bad_keys``
        self.counts: dict[str, int] = {}

    # -- the endpoint call ---------------------------------------------------------------
    def endpoint(self, data: Any) -> tuple[int, dict[str, Any]]:
        """``(HTTP status, body)`` of ``POST /callback/ws/endpoint``."""
        if not isinstance(data, Mapping) or not data.get("AppID") or not data.get("AppSecret"):
            return 200, {"code": 1000040344, "msg": "app_id or app_secret is null"}
        if data.get("AppID") != self.app_id or data.get("AppSecret") != self.app_secret:
            return 200, {"code": 403, "msg": "forbidden: invalid app credentials"}
        self._ensure_server()
        key = secrets.token_urlsafe(24)
        device = uuid.uuid4().hex[:16]
        with self._cond:
            _bounded_put(self._keys, key, time.time() + self.url_lifetime)
            self._count("endpoints")
            config = dict(self.client_config)
        url = (
            f"ws://127.0.0.1:{self.port}/ws?device_id={device}"
            f"&service_id={self.service_id}&access_key={key}"
        )
        return 200, {"code": 0, "msg": "ok", "data": {"URL": url, "ClientConfig": config}}

    @property
    def port(self) -> int:
        """The WebSocket server's port (0 before the first endpoint call)."""
        server = self._server
        return int(server.socket.getsockname()[1]) if server is not None else 0

    @property
    def connected(self) -> bool:
        """The bot holds a live connection."""
        with self._cond:
            return self._live is not None

    def wait_connected(self, timeout: float = 10.0, *, connections: int = 1) -> bool:
        """Wait until the bot is connected and at least ``connections`` were accepted."""
        return self.wait_for(
            lambda: self._live is not None and self.counts.get("connections", 0) >= connections,
            timeout,
        )

    def wait_for(self, predicate: Any, timeout: float = 10.0) -> bool:
        """Wait (bounded) until ``predicate()`` (called with the lock held) is true."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def _count(self, name: str) -> None:  # with the lock held
        self.counts[name] = self.counts.get(name, 0) + 1
        self._cond.notify_all()

    # -- delivering --------------------------------------------------------------------
    def deliver(
        self, payload: Mapping[str, Any], *, fragments: int = 1, kind: str = "event"
    ) -> tuple[str, WsAck | None]:
        """Send ``payload`` as a data frame (split in ``fragments``); ``(message_id, the ACK
        or None when none came within ack_timeout)``."""
        message_id = uuid.uuid4().hex
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        size = -(-len(data) // fragments)
        parts = [data[i * size : (i + 1) * size] for i in range(fragments)]
        trace = uuid.uuid4().hex
        seq_id = secrets.randbelow(1 << 40)
        frames = [
            encode_frame(
                1,
                {
                    "type": kind,
                    "message_id": message_id,
                    "trace_id": trace,
                    "sum": str(fragments),
                    "seq": str(i),
                },
                part,
                service=self.service_id,
                seq_id=seq_id,
                log_id=seq_id + 1,
            )
            for i, part in enumerate(parts)
        ]
        with self._cond:
            _bounded_put(self._pending, message_id, frames)
            live = self._live
        if live is not None:
            for frame in frames:
                self._send(live, frame)
        return message_id, self.wait_ack(message_id, self.ack_timeout)

    def wait_ack(self, message_id: str, timeout: float) -> WsAck | None:
        """The ACK of ``message_id`` once it arrived (None after ``timeout``)."""
        self.wait_for(lambda: message_id in self._acks, timeout)
        with self._cond:
            return self._acks.get(message_id)

    def acks(self) -> list[WsAck]:
        """Every ACK received (oldest first, bounded)."""
        with self._cond:
            return list(self._acks.values())

    def redeliver(self, message_id: str) -> WsAck | None:
        """Send an already ACKed message again (as after a lost ACK); the new ACK."""
        with self._cond:
            frames = self._sent.get(message_id)
            live = self._live
            if frames is None or live is None:
                raise KeyError(message_id)
            self._acks.pop(message_id, None)
            _bounded_put(self._pending, message_id, frames)
        for frame in frames:
            self._send(live, frame)
        return self.wait_ack(message_id, self.ack_timeout)

    @staticmethod
    def _send(connection: Any, data: bytes | str) -> None:
        try:
            connection.send(data)
        except Exception as exc:  # the connection died; pending frames wait for the next
            logger.debug("feishu gateway: send failed: %s", type(exc).__name__)

    # -- faults --------------------------------------------------------------------------
    def drop(self) -> bool:
        """Kill the live connection's socket (no close frame); False if none."""
        with self._cond:
            live = self._live
            if live is not None:
                self._count("drops")
        if live is None:
            return False
        try:
            live.socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        return True

    def send_raw(self, data: bytes | str) -> bool:
        """Send ``data`` as one frame to the live connection; False if not connected."""
        with self._cond:
            live = self._live
        if live is None:
            return False
        self._send(live, data)
        return True

    def refuse_handshakes(self, count: int) -> None:
        """Refuse the next ``count`` handshakes with HTTP 503."""
        with self._cond:
            self._refuse = count

    def lose_acks(self, count: int) -> None:
        """The next ``count`` ACKs are lost with their connection (dropped at once): the
        messages stay unACKed and are redelivered on the next connection."""
        with self._cond:
            self._lose = count

    # -- the WebSocket server -------------------------------------------------------------
    def _ensure_server(self) -> None:
        with self._cond:
            if self._server is not None:
                return
            from websockets.sync.server import serve

            self._server = serve(
                self._handle,
                "127.0.0.1",
                0,
                process_request=self._process_request,
                compression=None,
                max_size=1 << 20,
                logger=_WS_LOGGER,
            )
            self._thread = threading.Thread(
                target=self._server.serve_forever, name="channelkit-emulator-feishu-ws", daemon=True
            )
            self._thread.start()

    def _process_request(self, connection: Any, request: Any) -> Any:
        query = parse_qs(urlsplit(request.path).query)
        key = (query.get("access_key") or [""])[0]
        with self._cond:
            if self._refuse > 0:
                self._refuse -= 1
                self._count("refused")
                return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE, "system busy\n")
            expiry = self._keys.pop(key, None)  # one-time
            if expiry is None or expiry < time.time():
                self._count("bad_keys")
                response = connection.respond(HTTPStatus.FORBIDDEN, "invalid access key\n")
                response.headers["handshake-status"] = "403"
                response.headers["handshake-msg"] = "invalid access key"
                return response
        return None

    def _handle(self, connection: Any) -> None:
        with self._cond:
            previous, self._live = self._live, connection
            self._count("connections")
            backlog = [f for frames in self._pending.values() for f in frames]
        if previous is not None:
            previous.close()
        for frame in backlog:
            with self._cond:
                self._count("redelivered")
            self._send(connection, frame)
        try:
            for raw in connection:
                self._on_frame(connection, raw)
        except Exception as exc:
            logger.debug("feishu gateway: connection ended: %s", type(exc).__name__)
        finally:
            with self._cond:
                if self._live is connection:
                    self._live = None
                self._cond.notify_all()

    def _on_frame(self, connection: Any, raw: bytes | str) -> None:
        if not isinstance(raw, bytes):
            return
        try:
            method, headers, payload = decode_frame(raw)
        except ValueError:
            return
        if method == 0:
            if headers.get("type") == "ping":
                with self._cond:
                    self._count("pings")
                    pong = self.pong_config
                body = json.dumps(pong).encode() if pong is not None else b""
                self._send(
                    connection, encode_frame(0, {"type": "pong"}, body, service=self.service_id)
                )
            return
        message_id = headers.get("message_id", "")
        try:
            answer = json.loads(payload)
            code = int(answer["code"])
            data = base64.b64decode(answer["data"]).decode("utf-8") if answer.get("data") else ""
        except (ValueError, KeyError, TypeError):
            return  # not an ACK
        ack = WsAck(message_id, code, data, headers)
        with self._cond:
            lose = self._lose > 0 and message_id in self._pending
            if lose:
                self._lose -= 1
            else:
                frames = self._pending.pop(message_id, None)
                if frames is not None:
                    _bounded_put(self._sent, message_id, frames)
                _bounded_put(self._acks, message_id, ack)
                self._count("acks")
        if lose:
            try:
                connection.socket.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        """Stop the server and close the live connection."""
        with self._cond:
            server, self._server = self._server, None
            live, self._live = self._live, None
            thread, self._thread = self._thread, None
        if live is not None:
            live.close()
        if server is not None:
            server.shutdown()
        if thread is not None:
            thread.join(5.0)
