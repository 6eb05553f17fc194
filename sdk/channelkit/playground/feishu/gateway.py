"""The Feishu emulator's long-connection gateway: endpoint URLs, a WebSocket server, frames.

``POST /callback/ws/endpoint`` (answered by the Feishu emulator) calls
`FeishuGateway.endpoint()`: with the app's ``AppID``/``AppSecret`` it starts the
WebSocket server on 127.0.0.1 on first use (``websockets.sync.server`` in a daemon
thread) and answers ``{"code": 0, "data": {"URL", "ClientConfig"}}``; the URL carries
``device_id``, ``service_id`` and a one-time ``access_key``, usable for ``url_lifetime``
seconds (a handshake without a valid one is refused with HTTP 403 and a
``handshake-status`` header).

Frames are protobuf ``pbbp2.Frame`` messages. The schema is declared here on its own (as
a text-format descriptor), independently of the SDK's, so the SDK's field numbers are
checked against a second reading of Feishu's published ``pbbp2.proto``.

* ping control frames are answered with a pong (its payload: `pong_config`, a
  ``ClientConfig``, when set) and counted;
* `FeishuGateway.deliver()` sends a payload as a data frame (header ``type``
  ``event``, a fresh ``message_id``, ``trace_id``, ``sum``/``seq``: ``fragments`` > 1
  splits it) and waits for its ACK (the frame sent back with ``{"code", "data"}``). A
  frame not ACKed when the connection ended is sent again on the next connection (the
  same ``message_id``), as Feishu redelivers; a delivery gives up after ``ack_timeout``.

Faults for tests: `drop()` (the socket dies, no close frame),
`refuse_handshakes()` (the next n get HTTP 503), `send_raw()` (any bytes or text),
`lose_acks()` (the next n ACKs are lost with their connection) and
`redeliver()` (an ACKed frame again).
"""

from __future__ import annotations

import base64
import functools
import importlib
import json
import logging
import secrets
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from channelkit.playground.ws_gateway import WsGateway, bounded_put

__all__ = ["FeishuGateway", "WsAck", "decode_frame", "encode_frame"]

logger = logging.getLogger(__name__)

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


class FeishuGateway(WsGateway[WsAck]):
    """One app's long-connection gateway; see the module docstring.

    ``counts``: ``endpoints``, ``connections``, ``pings``, ``drops``, ``refused``,
    ``redelivered``, ``acks``, ``bad_keys``.
    """

    _log = logger
    _ws_logger = _WS_LOGGER
    _label = "feishu gateway"
    _thread_name = "channelkit-emulator-feishu-ws"
    _busy_text = "system busy\n"
    _ack_count = "acks"

    def __init__(
        self,
        app_id: str,
        app_secret: str,
        *,
        ack_timeout: float = 10.0,
        url_lifetime: float = DEFAULT_URL_LIFETIME,
    ) -> None:
        super().__init__(ack_timeout=ack_timeout)
        self.app_id = app_id
        self.app_secret = app_secret
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
        self._keys: OrderedDict[str, float] = OrderedDict()

    # -- the endpoint call ---------------------------------------------------------------
    def endpoint(self, data: Any) -> tuple[int, dict[str, Any]]:
        """``(HTTP status, body)`` of ``POST /callback/ws/endpoint``."""
        if not isinstance(data, Mapping) or not data.get("AppID") or not data.get("AppSecret"):
            return 200, {"code": 1000040344, "msg": "app_id or app_secret is null"}
        if data.get("AppID") != self.app_id or data.get("AppSecret") != self.app_secret:
            return 200, {"code": 403, "msg": "forbidden: invalid app credentials"}
        self.listen()
        key = secrets.token_urlsafe(24)
        device = uuid.uuid4().hex[:16]
        with self._cond:
            bounded_put(self._keys, key, time.time() + self.url_lifetime)
            self._count("endpoints")
            config = dict(self.client_config)
        url = (
            f"ws://127.0.0.1:{self.port}/ws?device_id={device}"
            f"&service_id={self.service_id}&access_key={key}"
        )
        return 200, {"code": 0, "msg": "ok", "data": {"URL": url, "ClientConfig": config}}

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
        return message_id, self._deliver(message_id, frames)

    # -- the WebSocket server -------------------------------------------------------------
    def _admit(self, connection: Any, query: dict[str, list[str]]) -> Any:  # lock held
        key = (query.get("access_key") or [""])[0]
        expiry = self._keys.pop(key, None)  # one-time
        if expiry is None or expiry < time.time():
            self._count("bad_keys")
            response = connection.respond(HTTPStatus.FORBIDDEN, "invalid access key\n")
            response.headers["handshake-status"] = "403"
            response.headers["handshake-msg"] = "invalid access key"
            return response
        return None

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
        self._record_ack(connection, message_id, WsAck(message_id, code, data, headers))
