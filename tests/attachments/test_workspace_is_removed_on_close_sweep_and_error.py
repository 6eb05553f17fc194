"""A run's attachment directory goes away when the run ends, on an exception, when the
owner closes, and by an age sweep on the injected clock."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from channelkit.attachments import Workspaces
from channelkit.errors import AttachmentRefused
from channelkit.runtime.clock import FakeClock


def _workspaces(tmp_path: Path, clock: FakeClock | None = None, **kwargs: int) -> Workspaces:
    return Workspaces(tmp_path / "root", clock=clock or FakeClock(), remove_at_exit=False, **kwargs)


def test_a_workspace_is_removed_on_close(tmp_path: Path) -> None:
    owner = _workspaces(tmp_path)
    workspace = owner.open("run-1")
    (workspace.path / "photo.png").write_bytes(b"x" * 100)
    assert workspace.path.is_dir() and workspace.path.parent == tmp_path / "root"
    assert oct(workspace.path.stat().st_mode & 0o777) == "0o700"
    workspace.close()
    workspace.close()  # idempotent
    assert not workspace.path.exists() and workspace.closed and owner.live == 0


def test_nothing_is_left_after_an_exception(tmp_path: Path) -> None:
    owner = _workspaces(tmp_path)
    with pytest.raises(RuntimeError, match="agent failed"):
        with owner.open("run-2") as workspace:
            (workspace.path / "doc.pdf").write_bytes(b"%PDF-")
            raise RuntimeError("agent failed")
    assert list((tmp_path / "root").iterdir()) == []


def test_closing_the_owner_removes_every_live_workspace(tmp_path: Path) -> None:
    owner = _workspaces(tmp_path)
    paths = [owner.open(f"run-{n}").path for n in range(3)]
    owner.close()
    assert [p.exists() for p in paths] == [False, False, False]
    with pytest.raises(AttachmentRefused, match="closed"):
        owner.open("late")


def test_the_sweep_removes_workspaces_older_than_the_max_age(tmp_path: Path) -> None:
    clock = FakeClock()
    owner = _workspaces(tmp_path, clock)
    old = owner.open("old")
    clock.advance(50)
    young = owner.open("young")
    assert owner.sweep(max_age=60) == 0
    clock.advance(20)  # old is 70 s old, young 20 s
    assert owner.sweep(max_age=60) == 1
    assert not old.path.exists() and young.path.exists() and owner.live == 1


def test_the_sweep_removes_a_dead_processes_leftovers_by_age_and_nothing_else(
    tmp_path: Path,
) -> None:
    clock = FakeClock(wall_start=1_700_000_000.0)
    owner = _workspaces(tmp_path, clock)
    root = tmp_path / "root"
    stale = root / "run-99999-crashed-abc"
    fresh = root / "run-99999-other-def"
    foreign = root / "keep-me"
    for folder in (stale, fresh, foreign):
        folder.mkdir(parents=True)
    os.utime(stale, (1_700_000_000.0 - 3600, 1_700_000_000.0 - 3600))
    os.utime(fresh, (1_700_000_000.0 - 10, 1_700_000_000.0 - 10))
    os.utime(foreign, (0, 0))
    assert owner.sweep(max_age=600) == 1
    assert (stale.exists(), fresh.exists(), foreign.exists()) == (False, True, True)


def test_live_workspaces_are_bounded(tmp_path: Path) -> None:
    owner = _workspaces(tmp_path, max_live=2)
    first = owner.open("a")
    owner.open("b")
    with pytest.raises(AttachmentRefused, match="max_live 2"):
        owner.open("c")
    first.close()
    owner.open("c")


def test_runs_opening_and_closing_from_many_threads_leave_nothing(tmp_path: Path) -> None:
    owner = _workspaces(tmp_path, max_live=1000)
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            for i in range(20):
                with owner.open(f"t{n}-{i}") as workspace:
                    (workspace.path / "f").write_bytes(b"x")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == [] and owner.live == 0
    assert list((tmp_path / "root").iterdir()) == []


def test_the_process_exit_removes_live_workspaces(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = tmp_path / "root"
    code = (
        "import sys; from channelkit.attachments import Workspaces\n"
        f"w = Workspaces({str(root)!r}).open('run')\n"
        "(w.path / 'f').write_bytes(b'x'); print(w.path)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).parent == root
    assert list(root.iterdir()) == []
