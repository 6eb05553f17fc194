"""OpenTelemetry traces (the ``otel`` extra: ``pip install 'channelkit[otel]'``).

channelkit uses only the OpenTelemetry *API* (``opentelemetry-api``), imported lazily
the first time a channel is built; the application installs and configures the SDK and
its exporter (``opentelemetry-sdk`` and an OTLP, Jaeger or console exporter), as with
any instrumented library. Without ``opentelemetry-api``, or with
``CHANNELKIT_TRACING=off``, every function here returns at once and nothing is
allocated: tracing costs nothing. With the API but no SDK configured (the global
provider is still the API's proxy), no span is made either; a provider the
application sets later is used within a second.

The spans (names are the constants below):

* `SPAN_INBOUND` - one per person's message handed to a channel (the ACK path);
* `SPAN_RUN` - one per agent run, a child of the inbound message that started it; it
  ends when the run's result is settled (after its final answer was handed over);
* `SPAN_AGENT_TURN` - the agent call (``bridge.prompt``), a child of the run;
* `SPAN_API_CALL` - one per platform API call attempt, a child of the work that made it
  (the run's hooks, its delivery, or the inbound message's ACK-path calls);
* `SPAN_DELIVERY` - one per final answer handed to the delivery chain, a child of the
  run; the API calls of its attempts (retries included) are its children.

Runs execute on other threads than ingress: the context is carried explicitly. A run
keeps the context current when it was created (`current()`), and the run's span is
made current on the run's thread; the serial lanes, the worker pool and the delivery
chain's retries capture the current context when work is queued (`bind()`) and
restore it when the work runs.

Attributes never carry a user id, a chat id or text: the platform, the channel's
configured name, the operation id of the platform's API, an HTTP status, the outcome
words, the run kind and the run id (a random id that names no person; the log lines
carry it too). An exception sets the span's status to error with the exception's class
name only (its message could echo a person's text).

Log records: `channelkit.observability.logs.JsonFormatter` adds ``trace_id`` and
``span_id`` (hex) when a span is current on the logging thread (`log_ids()`).

`install_tracing()` picks a tracer provider (default: the global one the application
set with ``opentelemetry.trace.set_tracer_provider``); `disable_tracing()` turns tracing
off. This module imports nothing from channelkit.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = [
    "SPAN_AGENT_TURN",
    "SPAN_API_CALL",
    "SPAN_DELIVERY",
    "SPAN_INBOUND",
    "SPAN_RUN",
    "TRACING_ENV",
    "bind",
    "current",
    "disable_tracing",
    "end_span",
    "install_tracing",
    "log_ids",
    "record_api_call",
    "run_span",
    "span",
    "start_span",
    "tracing_enabled",
    "use_span",
]

logger = logging.getLogger(__name__)

#: Set to ``off`` (or ``0``, ``false``, ``no``) to keep tracing off even when
#: ``opentelemetry-api`` is installed.
TRACING_ENV = "CHANNELKIT_TRACING"

#: A person's message handed to a channel.
SPAN_INBOUND = "channelkit.inbound"
#: An agent run, from its start until its result is settled.
SPAN_RUN = "channelkit.run"
#: The agent call of a run (``bridge.prompt``).
SPAN_AGENT_TURN = "channelkit.agent_turn"
#: One attempt of a platform API call.
SPAN_API_CALL = "channelkit.platform_api_call"
#: A final answer's delivery (all its parts, paths and retries).
SPAN_DELIVERY = "channelkit.delivery"

#: The instrumentation scope name of channelkit's spans.
TRACER_NAME = "channelkit"

_OFF_WORDS = frozenset({"0", "off", "false", "no"})

#: How often (seconds) channelkit looks again whether the application set a global
#: tracer provider, while it has not.
_RECHECK_S = 1.0

F = TypeVar("F", bound=Callable[..., Any])


class _Otel:
    """The resolved OpenTelemetry API: its modules and channelkit's tracer."""

    __slots__ = (
        "checked_at",
        "configured",
        "context",
        "follows_global",
        "kinds",
        "status",
        "trace",
        "tracer",
    )

    def __init__(self, trace: Any, context: Any, tracer: Any, follows_global: bool) -> None:
        self.trace = trace
        self.context = context
        self.tracer = tracer
        #: spans go to the global provider: none is made while no SDK was configured
        self.follows_global = follows_global
        self.configured = not follows_global  # a global provider once set stays set
        self.checked_at: float | None = None  # time.monotonic() of the last look
        self.kinds = {
            "internal": trace.SpanKind.INTERNAL,
            "client": trace.SpanKind.CLIENT,
            "consumer": trace.SpanKind.CONSUMER,
        }
        self.status = trace.Status, trace.StatusCode.ERROR


_UNRESOLVED: Any = object()
_lock = threading.Lock()
_otel: _Otel | None = _UNRESOLVED


def _load(tracer_provider: Any = None) -> _Otel | None:
    try:
        trace = importlib.import_module("opentelemetry.trace")
        context = importlib.import_module("opentelemetry.context")
    except ImportError:
        return None
    from importlib import metadata

    try:
        version = metadata.version("channelkit")
    except metadata.PackageNotFoundError:  # run from a source tree
        version = ""
    if tracer_provider is None:
        tracer = trace.get_tracer(TRACER_NAME, version or None)
    else:
        tracer = tracer_provider.get_tracer(TRACER_NAME, version or None)
    return _Otel(trace, context, tracer, tracer_provider is None)


def _resolve() -> _Otel | None:
    otel = _otel
    if otel is not _UNRESOLVED:
        return otel
    return _resolve_locked()


def _resolve_locked() -> _Otel | None:
    global _otel
    with _lock:
        if _otel is _UNRESOLVED:
            off = os.environ.get(TRACING_ENV, "").strip().lower() in _OFF_WORDS
            _otel = None if off else _load()
        return _otel


def install_tracing(tracer_provider: Any = None) -> bool:
    """Turn tracing on: channelkit's spans go to ``tracer_provider`` (an
    ``opentelemetry.sdk.trace.TracerProvider`` or any provider), by default to the
    global provider the application set (``opentelemetry.trace.set_tracer_provider``).
    Tracing is on without this call whenever ``opentelemetry-api`` is installed (and
    `TRACING_ENV` is not ``off``); call it to pick a provider or to turn tracing back
    on after `disable_tracing()`. False when ``opentelemetry-api`` is not installed."""
    global _otel
    otel = _load(tracer_provider)
    with _lock:
        _otel = otel
    return otel is not None


def disable_tracing() -> None:
    """Turn tracing off (every function here then returns at once) until
    `install_tracing()`."""
    global _otel
    with _lock:
        _otel = None


def tracing_enabled() -> bool:
    """True when channelkit makes spans (``opentelemetry-api`` is installed and tracing
    was not turned off)."""
    return _resolve() is not None


def _valid(otel: _Otel, ctx: Any = None) -> bool:
    """True when a span with a valid context is current (in ``ctx`` when given)."""
    current_span = otel.trace.get_current_span(ctx)
    return bool(current_span.get_span_context().is_valid)


def current() -> Any:
    """The current OpenTelemetry context when a span is current, else None (also when
    tracing is off): keep it with work that runs later on another thread and pass it as
    ``parent`` to `start_span()` / `span()`."""
    otel = _otel
    if otel is None:
        return None
    if otel is _UNRESOLVED:
        otel = _resolve_locked()
        if otel is None:
            return None
    if not _configured(otel) or not _valid(otel):
        return None
    return otel.context.get_current()


def bind(fn: F) -> F:
    """``fn`` run in the context current now (on whatever thread calls it later):
    ``fn`` itself when tracing is off or no span is current."""
    otel = _otel
    if otel is None or otel is _UNRESOLVED or not _configured(otel) or not _valid(otel):
        return fn
    captured = otel.context.get_current()
    attach, detach = otel.context.attach, otel.context.detach

    def bound(*args: Any, **kwargs: Any) -> Any:
        token = attach(captured)
        try:
            return fn(*args, **kwargs)
        finally:
            detach(token)

    bound.__qualname__ = getattr(fn, "__qualname__", "bound")
    bound.__wrapped__ = fn  # type: ignore[attr-defined]
    return bound  # type: ignore[return-value]


def _clean(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    if not attributes:
        return {}
    return {
        k: v
        for k, v in attributes.items()
        if v is not None and isinstance(v, str | bool | int | float)
    }


def _configured(otel: _Otel) -> bool:
    """True when spans go somewhere: a provider was given, or the application set the
    global one (the API alone hands out a proxy whose spans are no-ops: making them
    would only cost time). A provider set later counts within `_RECHECK_S`."""
    if otel.configured:
        return True
    now = time.monotonic()
    last = otel.checked_at
    if last is not None and now - last < _RECHECK_S:
        return False  # looked less than a second ago (a look reads the environment)
    otel.checked_at = now
    provider = otel.trace.get_tracer_provider()
    if isinstance(provider, otel.trace.ProxyTracerProvider):
        return False
    otel.configured = True
    return True


def start_span(
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    parent: Any = None,
    kind: str = "internal",
    start_time_ns: int | None = None,
) -> Any:
    """Start (not make current) a span named ``name``, a child of ``parent`` (a context
    from `current()`) or else of the current span; None when tracing is off. End it
    with `end_span()`. ``kind``: ``internal``, ``client`` or ``consumer``."""
    otel = _resolve()
    if otel is None or not _configured(otel):
        return None
    try:
        return otel.tracer.start_span(
            name,
            context=parent,
            kind=otel.kinds.get(kind, otel.kinds["internal"]),
            attributes=_clean(attributes),
            start_time=start_time_ns,
        )
    except Exception:
        logger.debug("starting span %s failed", name, exc_info=True)
        return None


def end_span(
    span_: Any,
    attributes: Mapping[str, Any] | None = None,
    *,
    error: BaseException | str | None = None,
    end_time_ns: int | None = None,
) -> None:
    """Set ``attributes`` on ``span_`` (from `start_span()`; None is ignored), mark it
    failed when ``error`` is given (the exception's class name, never its message), and
    end it."""
    if span_ is None:
        return
    otel = _otel
    try:
        values = _clean(attributes)
        if values:
            span_.set_attributes(values)
        if error is not None and otel is not None and otel is not _UNRESOLVED:
            status, code = otel.status
            described = error if isinstance(error, str) else type(error).__name__
            span_.set_status(status(code, described))
        span_.end(end_time=end_time_ns)
    except Exception:
        logger.debug("ending a span failed", exc_info=True)


def _is_real(span_: Any) -> bool:
    try:
        return bool(span_.get_span_context().is_valid)
    except Exception:
        return False


@contextmanager
def use_span(span_: Any) -> Iterator[None]:
    """Make ``span_`` (from `start_span()`; None: nothing) current inside the block,
    without ending it."""
    otel = _otel
    if span_ is None or otel is None or otel is _UNRESOLVED or not _is_real(span_):
        yield  # nothing to carry (e.g. the API without an SDK: an invalid no-op span)
        return
    token = otel.context.attach(otel.trace.set_span_in_context(span_))
    try:
        yield
    finally:
        otel.context.detach(token)


class SpanScope:
    """The span of a `span()` block: `set()` adds attributes (None values are left
    out); a no-op when tracing is off."""

    __slots__ = ("attributes", "span")

    def __init__(self, span_: Any) -> None:
        self.span = span_
        self.attributes: dict[str, Any] = {}

    def set(self, key: str, value: Any) -> None:
        """Set the attribute ``key`` when the block ends."""
        if self.span is not None:
            self.attributes[key] = value


_NULL_SCOPE = SpanScope(None)


class _NullContext:
    """The `span()` of tracing off: enters to the shared no-op scope."""

    __slots__ = ()

    def __enter__(self) -> SpanScope:
        return _NULL_SCOPE

    def __exit__(self, *exc: object) -> None:
        return None


_NULL_CONTEXT = _NullContext()


def span(
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    parent: Any = None,
    kind: str = "internal",
) -> Any:
    """A context manager: a span named ``name`` current inside the block (a child of
    ``parent`` or of the current span), ended when the block ends; an exception leaving
    the block marks it failed (class name only). Enters to a `SpanScope`. Tracing off:
    a shared no-op context manager."""
    otel = _otel
    if otel is _UNRESOLVED:
        otel = _resolve_locked()
    if otel is None or not _configured(otel):
        return _NULL_CONTEXT
    return _span(name, attributes, parent, kind)


@contextmanager
def _span(
    name: str, attributes: Mapping[str, Any] | None, parent: Any, kind: str
) -> Iterator[SpanScope]:
    started = start_span(name, attributes, parent=parent, kind=kind)
    scope = SpanScope(started)
    failed: BaseException | None = None
    try:
        with use_span(started):
            yield scope
    except BaseException as exc:
        failed = exc
        raise
    finally:
        end_span(started, scope.attributes, error=failed)


def _run_outcome(future: Any) -> tuple[str, BaseException | None]:
    try:
        result = future.result(0)
    except BaseException as exc:  # a future set with an exception
        return "failed", exc
    status = str(getattr(result, "status", "") or "unknown")
    error = getattr(result, "error", None)
    return status, error if isinstance(error, BaseException) and status == "failed" else None


@contextmanager
def run_span(platform: str, channel: str, run: Any) -> Iterator[None]:
    """The `SPAN_RUN` of ``run`` (a core run: ``run_id``, ``kind``, ``trace`` - the
    context it was created in - and ``future``), current inside the block; it ends when
    ``run.future`` is settled (its ``outcome`` attribute is the result's status), or
    when the block raises."""
    otel = _otel
    if otel is None or otel is _UNRESOLVED or not _configured(otel):
        yield  # tracing off (a channel's construction resolved it: never unresolved here)
        return
    started = start_span(
        SPAN_RUN,
        {
            "channelkit.platform": platform,
            "channelkit.channel": channel,
            "channelkit.run_id": getattr(run, "run_id", None),
            "channelkit.run_kind": getattr(run, "kind", None),
        },
        parent=getattr(run, "trace", None),
    )
    if started is None:
        yield
        return
    try:
        with use_span(started):
            yield
    except BaseException as exc:
        end_span(started, {"channelkit.outcome": "failed"}, error=exc)
        raise

    def settled(future: Any) -> None:
        outcome, error = _run_outcome(future)
        end_span(started, {"channelkit.outcome": outcome}, error=error)

    future = getattr(run, "future", None)
    if future is None:
        end_span(started)
    else:
        future.add_done_callback(settled)


def record_api_call(platform: str, operation: str, status: str, seconds: float) -> None:
    """A `SPAN_API_CALL` for an attempt that just ended after ``seconds`` (a child of
    the current span; ``status``: the HTTP status, ``timeout`` or ``error``)."""
    otel = _otel
    if otel is None or otel is _UNRESOLVED or not _configured(otel):
        return
    end = time.time_ns()
    started = start_span(
        SPAN_API_CALL,
        {
            "channelkit.platform": platform,
            "channelkit.operation": operation,
            "channelkit.status": status,
        },
        kind="client",
        start_time_ns=end - max(0, int(seconds * 1e9)),
    )
    if status.isdigit():
        failed = int(status) >= 400
        outcome = "ok" if not failed else "refused"
    else:
        failed, outcome = True, status
    end_span(
        started,
        {"channelkit.outcome": outcome},
        error=f"HTTP {status}" if failed and status.isdigit() else status if failed else None,
        end_time_ns=end,
    )


def log_ids() -> tuple[str, str] | None:
    """``(trace_id, span_id)`` in hex of the span current on this thread, or None (no
    span, or tracing off)."""
    otel = _otel
    if otel is None or otel is _UNRESOLVED:
        return None
    try:
        context = otel.trace.get_current_span().get_span_context()
        if not context.is_valid:
            return None
        return f"{context.trace_id:032x}", f"{context.span_id:016x}"
    except Exception:
        return None
