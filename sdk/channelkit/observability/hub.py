"""Where channelkit reports to its observers (see `channelkit.observability.observer`).

The reporting places call the functions here: the core's run events (runs started and
ended, the first reaction, queued runs, pending questions), the shared inbound hand-off
and the WSGI dispatcher (ingress), the delivery chain (deliveries), the generated
clients' base (platform API calls), the long connections (their state) and the state
stores (each operation's latency). Each
function hands the report to every installed observer and never raises.

The log observer (`channelkit.observability.logs.LogObserver`) and the tracing observer
(`TracingObserver`: a span per platform API call, when tracing is on) are installed from
the start; `add_observer()` installs more (``install_metrics()`` installs the Prometheus
one). The channel -> platform map (`platform_for()`) lets reports that know only a
channel's name (deliveries, queue and question gauges) carry the platform label; it
holds at most 1,000 channels.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

from channelkit.observability import tracing
from channelkit.observability.logs import LogObserver
from channelkit.observability.observer import Observer, RunReport, platform_of
from channelkit.state.base import set_operation_listener

__all__ = [
    "TracingObserver",
    "add_observer",
    "api_call",
    "channel_opened",
    "connection_state",
    "delivery",
    "first_reaction",
    "inbound",
    "ingress",
    "observers",
    "pending_questions",
    "platform_for",
    "remove_observer",
    "run_ended",
    "run_started",
    "runs_queued",
    "shutdown",
    "store_operation",
]

logger = logging.getLogger(__name__)

_MAX_CHANNELS = 1000

_lock = threading.Lock()


class TracingObserver(Observer):
    """Turns each platform API call attempt into a span (`channelkit.observability.tracing`;
    nothing when tracing is off). Installed from the start."""

    def api_call(self, platform: str, operation: str, status: str, seconds: float) -> None:
        tracing.record_api_call(platform, operation, status, seconds)


_observers: tuple[Observer, ...] = (LogObserver(), TracingObserver())
_channels: OrderedDict[str, str] = OrderedDict()


def observers() -> tuple[Observer, ...]:
    """The installed observers, in the order they are called."""
    return _observers


def add_observer(observer: Observer) -> None:
    """Install ``observer`` (once: adding it again does nothing)."""
    global _observers
    if not isinstance(observer, Observer):
        raise TypeError(f"observer: must be an Observer, got {type(observer).__name__}")
    with _lock:
        if observer not in _observers:
            _observers = (*_observers, observer)


def remove_observer(observer: Observer) -> None:
    """Uninstall ``observer`` (nothing when it is not installed)."""
    global _observers
    with _lock:
        _observers = tuple(o for o in _observers if o is not observer)


def platform_for(channel: str) -> str:
    """The platform of the channel named ``channel`` (``"other"`` when unknown)."""
    with _lock:
        return _channels.get(channel, "other")


_warned: set[tuple[str, str]] = set()  # (observer class, method): warned once each


def _each(method: str, *args: object) -> None:
    for observer in _observers:
        try:
            getattr(observer, method)(*args)
        except Exception:
            key = (type(observer).__name__, method)
            with _lock:
                first = key not in _warned and len(_warned) < _MAX_CHANNELS
                if first:
                    _warned.add(key)
            level = logging.WARNING if first else logging.DEBUG
            logger.log(level, "observer %s.%s failed", *key, exc_info=True)


def channel_opened(channel: object) -> str:
    """Record a channel (its ``name`` and `platform_of()` it); its platform label."""
    name = str(getattr(channel, "name", "") or type(channel).__name__)
    platform = platform_of(channel)
    tracing.tracing_enabled()  # import opentelemetry (when installed) now, not on an ACK
    with _lock:
        _channels[name] = platform
        _channels.move_to_end(name)
        while len(_channels) > _MAX_CHANNELS:
            _channels.popitem(last=False)
    _each("channel_opened", name, platform)
    return platform


def inbound(platform: str, channel: str, chat: str, outcome: str, run_id: str = "") -> None:
    """A person's message was handed to a channel (see `Observer.inbound`); also counted
    as ingress with the same outcome."""
    _each("inbound", platform, channel, chat, outcome, run_id)
    _each("ingress", platform, outcome)


def ingress(platform: str, outcome: str) -> None:
    """An inbound request was judged (see `Observer.ingress`)."""
    _each("ingress", platform, outcome)


def run_started(report: RunReport) -> None:
    """See `Observer.run_started`."""
    _each("run_started", report)


def first_reaction(platform: str, seconds: float) -> None:
    """See `Observer.first_reaction`."""
    _each("first_reaction", platform, max(0.0, seconds))


def run_ended(report: RunReport) -> None:
    """See `Observer.run_ended`."""
    _each("run_ended", report)


def runs_queued(channel: str, delta: int) -> None:
    """See `Observer.runs_queued`."""
    if delta:
        _each("runs_queued", channel, delta)


def pending_questions(channel: str, delta: int) -> None:
    """See `Observer.pending_questions`."""
    if delta:
        _each("pending_questions", channel, delta)


def delivery(channel: str, outcome: str) -> None:
    """See `Observer.delivery`."""
    _each("delivery", channel, outcome)


def api_call(platform: str, operation: str, status: str, seconds: float) -> None:
    """See `Observer.api_call`."""
    _each("api_call", platform or "other", operation, status, seconds)


def connection_state(connection: str, old: str, new: str) -> None:
    """See `Observer.connection_state` (nothing when the status did not change)."""
    if old != new:
        _each("connection_state", connection, old, new)


def store_operation(store: str, operation: str, seconds: float) -> None:
    """See `Observer.store_operation`."""
    _each("store_operation", store, operation, max(0.0, seconds))


set_operation_listener(store_operation)  # the stores' latency reaches the observers


def shutdown() -> None:
    """See `Observer.shutdown`."""
    _each("shutdown")
