"""Per-run temporary directories for received attachments, always removed: when the run
ends, when the process stops, or by an age sweep."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from channelkit.errors import AttachmentRefused, ConfigurationError
from channelkit.runtime.clock import Clock, SystemClock

__all__ = ["DEFAULT_MAX_LIVE", "DEFAULT_ROOT_NAME", "Workspace", "Workspaces"]

DEFAULT_ROOT_NAME = "channelkit-attachments"
"""The folder under the system temporary directory used when no root is given."""
DEFAULT_MAX_LIVE = 1000
"""The most workspaces one `Workspaces` keeps open at once."""

_PREFIX = "run-"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class Workspace:
    """One run's temporary directory (`path`, mode 0700), removed by `close()`.

    Use it as a context manager so the directory goes on success and on an exception
    alike. `close()` is idempotent and thread-safe.
    """

    def __init__(
        self, run_id: str, path: Path, created: float, release: Callable[[Workspace], None]
    ) -> None:
        self.run_id = run_id
        self.path = path
        self.created = created
        self._release = release

    @property
    def closed(self) -> bool:
        """True once the directory was removed."""
        return not self.path.exists()

    def close(self) -> None:
        """Remove the directory and everything in it."""
        self._release(self)

    def __enter__(self) -> Workspace:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Workspace(run_id={self.run_id!r}, path={str(self.path)!r})"


class Workspaces:
    """The owner of every run's `Workspace` under one root directory.

    `root` defaults to the system temporary directory + `channelkit-attachments`; it is
    created (mode 0700) on first use. At most `max_live` workspaces are open at once
    (`open()` refuses the next with `AttachmentRefused`). Every live workspace is removed
    by `close()` and, unless `remove_at_exit=False`, when the interpreter exits.
    `sweep(max_age)` removes directories older than `max_age` seconds: this owner's live
    ones by the injected `clock`, and leftovers of other or crashed processes under the
    root by their modification time. Thread-safe.
    """

    def __init__(
        self,
        root: Path | str | None = None,
        *,
        clock: Clock | None = None,
        max_live: int = DEFAULT_MAX_LIVE,
        remove_at_exit: bool = True,
    ) -> None:
        if max_live <= 0:
            raise ConfigurationError(f"must be > 0 (got {max_live})", "max_live")
        self.root = (
            Path(root) if root is not None else Path(tempfile.gettempdir()) / DEFAULT_ROOT_NAME
        )
        self.max_live = max_live
        self._clock: Clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._live: dict[Path, Workspace] = {}
        self._closed = False
        self._at_exit = remove_at_exit
        if remove_at_exit:
            atexit.register(self.close)

    def open(self, run_id: str) -> Workspace:
        """Create a new, empty directory for the run `run_id` and return its workspace."""
        with self._lock:
            if self._closed:
                raise AttachmentRefused(name=f"workspace for run {run_id}", reason="closed")
            if len(self._live) >= self.max_live:
                raise AttachmentRefused(
                    name=f"workspace for run {run_id}",
                    reason=f"too many live workspaces (max_live {self.max_live})",
                )
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            slug = _UNSAFE.sub("-", run_id)[:40].strip("-.") or "run"
            path = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-{slug}-", dir=self.root))
            workspace = Workspace(run_id, path, self._clock.now(), self._release)
            self._live[path] = workspace
            return workspace

    @property
    def live(self) -> int:
        """How many workspaces are open."""
        with self._lock:
            return len(self._live)

    def sweep(self, max_age: float) -> int:
        """Remove every workspace directory older than `max_age` seconds; return how many.

        Live workspaces of this owner count from their `open()` on the clock; other
        `run-*` directories under the root (another process's, a crashed process's) from
        their modification time against the clock's wall time. Anything else under the
        root is left alone.
        """
        if max_age < 0:
            raise ConfigurationError(f"must be >= 0 (got {max_age})", "max_age")
        now, wall = self._clock.now(), self._clock.time()
        with self._lock:
            expired = [w for w in self._live.values() if now - w.created > max_age]
            for workspace in expired:
                del self._live[workspace.path]
            live = set(self._live)
        removed = 0
        for workspace in expired:
            removed += _remove(workspace.path)
        try:
            entries = list(os.scandir(self.root))
        except FileNotFoundError:
            return removed
        for entry in entries:
            path = Path(entry.path)
            if not entry.name.startswith(_PREFIX) or path in live:
                continue
            try:
                if not entry.is_dir(follow_symlinks=False):
                    continue
                if wall - entry.stat(follow_symlinks=False).st_mtime > max_age:
                    removed += _remove(path)
            except FileNotFoundError:
                continue
        return removed

    def close(self) -> None:
        """Remove every live workspace; `open()` refuses afterwards. Idempotent."""
        with self._lock:
            self._closed = True
            live = list(self._live.values())
            self._live.clear()
        for workspace in live:
            _remove(workspace.path)
        if self._at_exit:
            self._at_exit = False
            atexit.unregister(self.close)

    def __enter__(self) -> Workspaces:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _release(self, workspace: Workspace) -> None:
        with self._lock:
            self._live.pop(workspace.path, None)
        _remove(workspace.path)


def _remove(path: Path) -> int:
    """Remove a directory tree; 1 if it existed, 0 if it was gone already."""
    if not path.exists():
        return 0
    shutil.rmtree(path, ignore_errors=True)
    return 0 if path.exists() else 1
