"""Feishu's long connection: events and card actions over a WebSocket the bot opens.

With ``"ingress": "websocket"`` (Feishu console: *receive events through a persistent
connection*) the bot needs no public URL. One `FeishuLongConnection` (a
`LongConnection`) per channel; each
connection's life (`FeishuLongConnection.serve_once()`):

1. ``POST {base_url}/callback/ws/endpoint`` with ``{"AppID", "AppSecret"}`` answers
   ``{"code": 0, "data": {"URL", "ClientConfig"}}``: a fresh WebSocket URL (its query
   carries ``device_id`` and ``service_id``; the URL is never logged: it is a credential)
   and the client settings (``PingInterval``, ``ReconnectCount``, ``ReconnectInterval``,
   ``ReconnectNonce``, seconds);
2. the WebSocket connects (``websockets``' synchronous client);
3. binary frames are protobuf ``pbbp2.Frame`` messages (`Frame`): ``method`` 0 is a
   control frame (header ``type`` ``ping`` / ``pong``; a pong's payload may carry a new
   ``ClientConfig``), 1 a data frame (header ``type`` ``event`` or ``card``,
   ``message_id``, ``trace_id``, ``sum`` / ``seq`` when the payload was split);
4. the bot sends a ping control frame (``service`` = the URL's ``service_id``) every
   ``PingInterval`` seconds, on the connection's thread;
5. a data frame's payload is the same JSON Feishu POSTs to the callback URLs, in plain
   text (no encryption, no signature, no verification token check: the connection is
   authenticated by the app secret). It goes through the channel's transport-neutral
   `dispatch_event()` /
   `dispatch_card_action()` (the
   route the HTTP handlers take after their checks), the ACK is written (the frame sent
   back with the payload ``{"code": 200, "headers": {}, "data": base64(answer)}``, the
   card callback's answer for card actions, and a ``biz_rt`` header), and only then is
   the deferred work (agent run, responders, card writes) handed to the pool.

Bounds: a split payload is reassembled from at most `MAX_FRAGMENTS` parts into at
most `MAX_MESSAGE_BYTES`; at most `MAX_PARTIAL_MESSAGES` are assembled at
once, each for at most `FRAGMENT_TTL` seconds. Every data frame's ``message_id`` is
processed once (remembered for `DEDUP_TTL` seconds, bounded, across reconnects): a
redelivery is ACKed again and not processed. A frame that is not a ``pbbp2.Frame`` (or a
text frame) is counted and ignored; it never ends the connection.

A dropped or closed socket, a refused handshake or a failed endpoint call ends the
connection with an error: `LongConnection` reconnects after the shared capped,
jittered backoff (the server's ``Reconnect*`` hints are recorded in
`FeishuLongConnection.client_config`, not used). ``protobuf`` (the ``feishu-ws``
extra) is needed from construction on; ``websockets`` is imported when a connection
starts.
"""

from __future__ import annotations

import base64
import functools
import importlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from channelkit.errors import ConfigurationError, TransportError
from channelkit.ingress import IngressResponse, loads_json
from channelkit.platforms.common.connection import Backoff
from channelkit.platforms.common.replay import ReplayGuard
from channelkit.platforms.common.websocket import WebSocketConnection, silent_logger
from channelkit.runtime.clock import Clock

__all__ = [
    "CONTROL",
    "DATA",
    "DEDUP_TTL",
    "ENDPOINT_PATH",
    "FRAGMENT_TTL",
    "MAX_FRAGMENTS",
    "MAX_MESSAGE_BYTES",
    "MAX_PARTIAL_MESSAGES",
    "ClientConfig",
    "Endpoint",
    "FeishuLongConnection",
    "Frame",
    "LongConnectionHandlers",
    "ack_payload",
    "request_endpoint",
]

logger = logging.getLogger(__name__)

#: Where the bot asks for its WebSocket URL (``POST``, relative to ``base_url``).
ENDPOINT_PATH = "/callback/ws/endpoint"
#: ``Frame.method`` of control frames (ping, pong) and data frames (events, card actions).
CONTROL = 0
DATA = 1
#: Largest frame read (bigger ones close the connection; it reconnects).
MAX_FRAME_BYTES = 1 << 20
#: Largest reassembled payload, and the most parts one payload may be split into.
MAX_MESSAGE_BYTES = 1 << 20
MAX_FRAGMENTS = 64
#: Split payloads assembled at once (the oldest is dropped beyond), and for how long.
MAX_PARTIAL_MESSAGES = 32
FRAGMENT_TTL = 30.0
#: Seconds a processed ``message_id`` is remembered (a redelivery within it is not run).
DEDUP_TTL = 3600.0

# websockets logs frames (user text) and the handshake URL at DEBUG: its connections log
# here, and nothing is emitted from this logger.
_WS_LOGGER = silent_logger("channelkit.platforms.feishu.longconn.websockets")


# -- frames -------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _message_classes() -> tuple[Any, Any]:
    """``pbbp2.Header`` and ``pbbp2.Frame`` built at run time from a descriptor.

    proto2: ``Header {required string key = 1; required string value = 2}``; ``Frame
    {required uint64 SeqID = 1; required uint64 LogID = 2; required int32 service = 3;
    required int32 method = 4; repeated Header headers = 5; optional string
    payload_encoding = 6; optional string payload_type = 7; optional bytes payload = 8;
    optional string LogIDNew = 9}``. A private pool, so an application that also loads
    Feishu's own SDK (which registers ``pbbp2.proto``) does not clash.
    """
    try:
        pb2 = importlib.import_module("google.protobuf.descriptor_pb2")
        pools = importlib.import_module("google.protobuf.descriptor_pool")
        factory = importlib.import_module("google.protobuf.message_factory")
    except ImportError:
        raise ConfigurationError(
            "the Feishu long connection needs protobuf: pip install 'channelkit[feishu-ws]'",
            path="feishu.ingress",
        ) from None
    fdp = pb2.FieldDescriptorProto
    proto = pb2.FileDescriptorProto(
        name="channelkit/feishu/pbbp2.proto", package="pbbp2", syntax="proto2"
    )
    header = proto.message_type.add(name="Header")
    for name, number in (("key", 1), ("value", 2)):
        header.field.add(name=name, number=number, type=fdp.TYPE_STRING, label=fdp.LABEL_REQUIRED)
    frame = proto.message_type.add(name="Frame")
    required: list[tuple[str, int, str]] = [("SeqID", 1, "UINT64"), ("LogID", 2, "UINT64")]
    required += [("service", 3, "INT32"), ("method", 4, "INT32")]
    for name, number, kind in required:
        frame.field.add(
            name=name, number=number, type=getattr(fdp, f"TYPE_{kind}"), label=fdp.LABEL_REQUIRED
        )
    frame.field.add(
        name="headers",
        number=5,
        type=fdp.TYPE_MESSAGE,
        type_name=".pbbp2.Header",
        label=fdp.LABEL_REPEATED,
    )
    optional = [("payload_encoding", 6, "STRING"), ("payload_type", 7, "STRING")]
    optional += [("payload", 8, "BYTES"), ("LogIDNew", 9, "STRING")]
    for name, number, kind in optional:
        frame.field.add(
            name=name, number=number, type=getattr(fdp, f"TYPE_{kind}"), label=fdp.LABEL_OPTIONAL
        )
    pool = pools.DescriptorPool()
    pool.Add(proto)
    get = factory.GetMessageClass
    return get(pool.FindMessageTypeByName("pbbp2.Header")), get(
        pool.FindMessageTypeByName("pbbp2.Frame")
    )


def require_protobuf() -> None:
    """Raise `ConfigurationError` when protobuf is missing."""
    _message_classes()


@dataclass
class Frame:
    """One ``pbbp2.Frame`` (typed; encoded and decoded with protobuf)."""

    seq_id: int = 0
    log_id: int = 0
    service: int = 0
    method: int = 0
    headers: list[tuple[str, str]] = field(default_factory=list)
    payload: bytes = b""
    payload_encoding: str = ""
    payload_type: str = ""
    log_id_new: str = ""

    def header(self, key: str) -> str | None:
        """The first value of header ``key`` (None when absent)."""
        return next((v for k, v in self.headers if k == key), None)

    def encode(self) -> bytes:
        """The frame's protobuf bytes."""
        _, frame_class = _message_classes()
        message = frame_class(
            SeqID=self.seq_id, LogID=self.log_id, service=self.service, method=self.method
        )
        for key, value in self.headers:
            message.headers.add(key=key, value=value)
        for attr, name in (
            ("payload", "payload"),
            ("payload_encoding", "payload_encoding"),
            ("payload_type", "payload_type"),
            ("log_id_new", "LogIDNew"),
        ):
            if getattr(self, attr):
                setattr(message, name, getattr(self, attr))
        data: bytes = message.SerializeToString()
        return data

    @classmethod
    def decode(cls, data: bytes) -> Frame:
        """Parse protobuf bytes; ``ValueError`` when they are not a ``pbbp2.Frame``."""
        _, frame_class = _message_classes()
        message = frame_class()
        try:
            message.ParseFromString(bytes(data))
        except Exception as exc:  # google.protobuf.message.DecodeError
            raise ValueError(f"not a pbbp2.Frame: {type(exc).__name__}") from None
        if not message.IsInitialized():
            raise ValueError("not a pbbp2.Frame: required fields missing")
        return cls(
            seq_id=int(message.SeqID),
            log_id=int(message.LogID),
            service=int(message.service),
            method=int(message.method),
            headers=[(str(h.key), str(h.value)) for h in message.headers],
            payload=bytes(message.payload),
            payload_encoding=str(message.payload_encoding),
            payload_type=str(message.payload_type),
            log_id_new=str(message.LogIDNew),
        )


def ping_frame(service: int) -> Frame:
    """The ping control frame of a connection to ``service``."""
    return Frame(service=service, method=CONTROL, headers=[("type", "ping")])


def ack_payload(status: int, body: bytes) -> bytes:
    """An ACK's payload: ``{"code", "headers", "data"}`` (``data``: the base64 answer,
    left out when the answer is empty or ``{}``); a status other than 200 is code 500."""
    response: dict[str, Any] = {"code": 200 if status == 200 else 500, "headers": {}}
    if body.strip() not in (b"", b"{}"):
        response["data"] = base64.b64encode(body).decode("ascii")
    return json.dumps(response, separators=(",", ":")).encode("utf-8")


# -- the endpoint ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientConfig:
    """The server's settings for the client (seconds; ``reconnect_count`` -1 = forever)."""

    reconnect_count: int = -1
    reconnect_interval: float = 120.0
    reconnect_nonce: float = 30.0
    ping_interval: float = 120.0

    def merged(self, value: Any) -> ClientConfig:
        """This config updated with the keys ``value`` (a ClientConfig object) sets
        validly; anything else is ignored."""
        if not isinstance(value, Mapping):
            return self
        changes: dict[str, Any] = {}
        for key, name, low in (
            ("ReconnectCount", "reconnect_count", -1),
            ("ReconnectInterval", "reconnect_interval", 0),
            ("ReconnectNonce", "reconnect_nonce", 0),
            ("PingInterval", "ping_interval", 1),
        ):
            raw = value.get(key)
            if isinstance(raw, int) and not isinstance(raw, bool) and low <= raw <= 86_400:
                changes[name] = raw if name == "reconnect_count" else float(raw)
        return replace(self, **changes)


@dataclass(frozen=True)
class Endpoint:
    """Where to connect (``url`` is a credential: never log it) and the client settings."""

    url: str = field(repr=False)
    config: ClientConfig = field(default_factory=ClientConfig)

    @property
    def service_id(self) -> int:
        """The URL's ``service_id`` (the ``service`` of ping frames; 0 when absent)."""
        values = parse_qs(urlsplit(self.url).query).get("service_id") or ["0"]
        try:
            return int(values[0])
        except ValueError:
            return 0


def request_endpoint(
    base_url: str, app_id: str, app_secret: str, *, timeout: float = 10.0
) -> Endpoint:
    """``POST {base_url}/callback/ws/endpoint``; `TransportError` when refused
    (the message carries the status and Feishu's code, never the secret or the URL)."""
    import requests

    try:
        response = requests.post(
            base_url.rstrip("/") + ENDPOINT_PATH,
            json={"AppID": app_id, "AppSecret": app_secret},
            headers={"locale": "zh"},
            timeout=(min(5.0, timeout), timeout),
        )
    except requests.RequestException as exc:
        raise TransportError(f"the Feishu endpoint call failed: {type(exc).__name__}") from None
    try:
        answer = loads_json(response.content)
    except ValueError:
        answer = None
    code = answer.get("code") if isinstance(answer, Mapping) else None
    data = answer.get("data") if isinstance(answer, Mapping) else None
    url = data.get("URL") if isinstance(data, Mapping) else None
    if response.status_code != 200 or code != 0 or not isinstance(url, str) or not url:
        raise TransportError(
            f"the Feishu endpoint refused: HTTP {response.status_code}, code {code!r}"
        )
    assert isinstance(data, Mapping)
    return Endpoint(url, ClientConfig().merged(data.get("ClientConfig")))


# -- the connection ---------------------------------------------------------------------------


class LongConnectionHandlers(Protocol):
    """What the connection hands payloads to (the channel)."""

    def dispatch_event(self, payload: Any) -> IngressResponse: ...

    def dispatch_card_action(self, payload: Any) -> IngressResponse: ...


class _Fragments:
    """Split payloads being reassembled (bounded in count, size and age)."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self._parts: OrderedDict[str, tuple[float, list[bytes | None]]] = OrderedDict()

    def add(self, message_id: str, total: int, seq: int, part: bytes) -> bytes | None:
        """Store one part; the whole payload once every part arrived, else None."""
        now = self._now()
        for key in [k for k, (born, _) in self._parts.items() if now - born > FRAGMENT_TTL]:
            del self._parts[key]
        born, parts = self._parts.get(message_id, (now, [None] * total))
        if len(parts) != total:
            parts = [None] * total  # a different split: start over
        parts[seq] = part
        if sum(len(p) for p in parts if p is not None) > MAX_MESSAGE_BYTES:
            self._parts.pop(message_id, None)
            raise ValueError("payload too large")
        if any(p is None for p in parts):
            self._parts[message_id] = (born, parts)
            while len(self._parts) > MAX_PARTIAL_MESSAGES:
                self._parts.popitem(last=False)
            return None
        self._parts.pop(message_id, None)
        return b"".join(p for p in parts if p is not None)

    def __len__(self) -> int:
        return len(self._parts)


class FeishuLongConnection(WebSocketConnection):
    """The long connection of one channel; see the module docstring.

    ``open_endpoint()`` returns an `Endpoint` (the channel passes
    `request_endpoint()` with its app credentials). ``backoff`` and ``wait`` are
    `LongConnection`'s (tests inject a ``wait`` that records the delay and returns
    at once). Pings follow the injected clock: the read loop wakes at least every
    ``poll_s`` seconds to check whether one is due.
    """

    def __init__(
        self,
        handlers: LongConnectionHandlers,
        open_endpoint: Callable[[], Endpoint],
        *,
        name: str = "feishu-ws",
        clock: Clock | None = None,
        backoff: Backoff | None = None,
        wait: Callable[[threading.Event, float], bool] | None = None,
        open_timeout: float = 10.0,
        poll_s: float = 1.0,
    ) -> None:
        require_protobuf()
        super().__init__(name, clock=clock, backoff=backoff, wait=wait, open_timeout=open_timeout)
        self._handlers = handlers
        self._open_endpoint = open_endpoint
        self._poll_s = poll_s
        self._seen = ReplayGuard(self._clock.time, ttl=DEDUP_TTL)
        self._fragments = _Fragments(self._clock.now)
        #: the server's latest settings (endpoint answer, then pongs)
        self.client_config = ClientConfig()
        #: frames by outcome (``events``, ``cards``, ``duplicates``, ``pings``, ``pongs``,
        #: ``fragments``, ``garbage``, ``ignored``)
        self.counts: dict[str, int] = {}

    # -- the connection ------------------------------------------------------------------
    def serve_once(self) -> None:
        """Ask for an endpoint, connect, ping and read frames until the socket ends."""
        endpoint = self._open_endpoint()
        self.client_config = endpoint.config
        socket = self._connect(
            endpoint.url,
            "the Feishu gateway",
            max_size=MAX_FRAME_BYTES,
            compression=None,
            user_agent_header="channelkit",
            logger=_WS_LOGGER,
        )
        self._serve(socket, lambda s: self._read(s, endpoint.service_id), "the Feishu connection")

    def _refused(self, peer: str, response: Any) -> str:
        detail = response.headers.get("handshake-status")
        return super()._refused(peer, response) + (
            f" (handshake-status {detail})" if detail else ""
        )

    def _read(self, socket: Any, service: int) -> None:
        last_ping: float | None = None  # the first ping goes out at once
        while not self.stopping:
            now = self._clock.now()
            # from the last ping, at the latest interval (a pong may have changed it)
            interval = self.client_config.ping_interval
            if last_ping is None or now >= last_ping + interval:
                socket.send(ping_frame(service).encode())
                self._count("pings")
                last_ping = now
            next_ping = last_ping + interval
            try:
                raw = socket.recv(timeout=min(self._poll_s, max(0.0, next_ping - now)))
            except TimeoutError:
                continue
            self.handle_frame(raw, socket.send)

    # -- frames --------------------------------------------------------------------------
    def handle_frame(self, raw: str | bytes, send: Callable[[bytes], None]) -> None:
        """Handle one frame read from the socket; ``send`` writes a frame back."""
        try:
            if not isinstance(raw, bytes | bytearray):
                raise ValueError("a text frame")
            frame = Frame.decode(raw)
        except ValueError:
            self._count("garbage")
            logger.warning("[%s] ignored a frame that is not a pbbp2.Frame", self.name)
            return
        kind = frame.header("type")
        if frame.method == CONTROL:
            if kind == "pong":
                self._count("pongs")
                if frame.payload:
                    try:
                        update = loads_json(frame.payload)
                    except ValueError:
                        update = None
                    self.client_config = self.client_config.merged(update)
            return
        if frame.method != DATA or kind not in ("event", "card"):
            self._count("ignored")
            return
        message_id = frame.header("message_id")
        if not message_id:
            self._count("ignored")
            return
        payload = self._reassemble(frame, message_id)
        if payload is None:
            return
        started = time.monotonic()
        if not self._seen.first(message_id):
            self._count("duplicates")  # a redelivery: ACK it again, process nothing
            self._ack(send, frame, IngressResponse(200, b"{}"), started)
            return
        response = self._dispatch(kind, payload)
        if response.status >= 500:
            self._seen.forget(message_id)  # refused (closed): a redelivery may be served
        self._count("events" if kind == "event" else "cards")
        try:
            self._ack(send, frame, response, started)
        finally:
            # after the ACK: hand the slow work to the pool. It runs even when the ACK
            # could not be written: the message was claimed, and a redelivery is only
            # ACKed again (never processed twice)
            response.run_after()

    def _reassemble(self, frame: Frame, message_id: str) -> bytes | None:
        try:
            total = int(frame.header("sum") or "1")
            seq = int(frame.header("seq") or "0")
        except ValueError:
            total, seq = 0, 0
        if not 1 <= total <= MAX_FRAGMENTS or not 0 <= seq < total:
            self._count("garbage")
            logger.warning("[%s] ignored a data frame with bad sum/seq headers", self.name)
            return None
        if total == 1:
            return frame.payload
        self._count("fragments")
        try:
            return self._fragments.add(message_id, total, seq, frame.payload)
        except ValueError:
            self._count("garbage")
            logger.warning("[%s] dropped a split payload over the size limit", self.name)
            return None

    def _dispatch(self, kind: str, data: bytes) -> IngressResponse:
        try:
            payload = loads_json(data)
        except ValueError:
            payload = None
        if not isinstance(payload, Mapping):
            return IngressResponse(400, b"{}")
        if kind == "card":
            return self._handlers.dispatch_card_action(payload)
        return self._handlers.dispatch_event(payload)

    def _ack(
        self,
        send: Callable[[bytes], None],
        frame: Frame,
        response: IngressResponse,
        started: float,
    ) -> None:
        elapsed_ms = int((time.monotonic() - started) * 1000)
        ack = replace(
            frame,
            headers=[*frame.headers, ("biz_rt", str(elapsed_ms))],
            payload=ack_payload(response.status, response.body),
        )
        send(ack.encode())

    def seen_size(self) -> int:
        """``message_id``\\ s remembered (bounded)."""
        return len(self._seen)

    def partial_messages(self) -> int:
        """Split payloads still being assembled (bounded)."""
        return len(self._fragments)
