"""Core and runtime tests drive timers with the fake clock; none sleeps to wait for one."""

from __future__ import annotations

from pathlib import Path


def test_core_tests_never_sleep_to_wait_for_timers():
    """Acceptance: timers are driven by the FakeClock, never by real sleeps."""
    root = Path(__file__).resolve().parents[1]
    files = [
        *sorted((root / "core").glob("test_*.py")),
        *sorted((root / "runtime").glob("test_*.py")),
        root / "agents" / "test_function_agent.py",
    ]
    offenders = [
        f"{path.name}:{number}"
        for path in files
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "sleep(" in line and "state poll" not in line and 'sleep(" in line' not in line
    ]
    assert offenders == []
