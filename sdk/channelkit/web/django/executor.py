"""A worker pool that releases Django DB connections around every task."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from channelkit.runtime import WorkerPool

__all__ = ["DjangoDBExecutor", "django_executor"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


def _close_old_connections() -> None:
    try:
        from django.db import close_old_connections
    except ImportError:  # pragma: no cover - django missing
        return
    try:
        close_old_connections()
    except Exception:  # never let connection hygiene break a task
        logger.warning("django close_old_connections failed", exc_info=True)


class DjangoDBExecutor(WorkerPool):
    """A `WorkerPool` whose every task runs between two calls of
    ``django.db.close_old_connections()``: before (drop connections that went stale while
    the thread idled) and after (release what the task opened), as slack bolt's Django
    adapter does. Agent runs, card projections and timer callbacks all run through it.

    Pass it as ``executor=`` to a channel; a pool you pass is yours to ``shutdown()``.
    """

    def __init__(
        self,
        max_workers: int = 16,
        *,
        name: str = "channelkit-django",
        close: Callable[[], None] = _close_old_connections,
    ) -> None:
        super().__init__(max_workers, name=name)
        self._close = close

    def _wrap(self, fn: Callable[..., T]) -> Callable[..., T]:
        close = self._close

        @functools.wraps(fn)
        def task(*args: Any) -> T:
            close()
            try:
                return fn(*args)
            finally:
                close()

        return task

    def submit(self, fn: Callable[..., T], /, *args: Any) -> Future[T]:
        """Run ``fn(*args)`` on a worker with connection hygiene around it."""
        return super().submit(self._wrap(fn), *args)

    def post(self, fn: Callable[..., Any], /, *args: Any) -> None:
        """Fire-and-forget form of `submit()`."""
        super().post(self._wrap(fn), *args)


def django_executor(max_workers: int = 16) -> DjangoDBExecutor:
    """A `DjangoDBExecutor`; pass it as ``executor=`` when building a channel."""
    return DjangoDBExecutor(max_workers)
