"""tox plugin of this project (tox 4 loads `toxfile.py` from the project root by itself).

It does three things, with nothing for the person running tox to set:

1. **Finds every installed Python.** tox looks for `python3.X` on `PATH`. With pyenv, `PATH`
   holds pyenv's shims, which run only the versions pyenv has selected (`pyenv global`,
   `PYENV_VERSION`), so the other installed versions looked missing and their environments were
   skipped. The plugin adds pyenv's interpreters (`$PYENV_ROOT`, else `pyenv root`, else
   `~/.pyenv`: the newest patch release of each `3.X` under `versions/`) to tox's `--discover`
   list, after any given on the command line, and their directories to the end of `PATH`,
   where `uv` looks when the `tox-uv` plugin creates the environments (uv is also told
   never to download a Python: only installed ones run). Without pyenv it adds nothing.
2. **Says which Pythons ran.** The `pythons` environment, last in `env_list`, logs one line
   naming the Python test environments (`py310`, `py311`, ...) that ran, with their interpreter,
   and those skipped, with the reason; it fails when fewer than two ran.
3. **Shares the cores when the environments run in parallel.** Each Python's suite runs in
   `CHANNELKIT_TEST_WORKERS` pytest workers, six by default (tox.ini), which keeps two cores
   busy when the suites run one after another. Under `tox -p` (`tox -p all` runs every
   environment at once) the plugin sets the variable, when it is unset, to
   `parallel_test_workers()`: six workers shared by the suites that run at once, at least two
   each; the suite that also runs the real-agent tests (py311) gets one more
   (`CHANNELKIT_AGENT_TEST_WORKERS`), as one of its workers mostly waits on the agent.

The helpers below import nothing from tox (only `pluggy`, which pytest also depends on), so
`tests/test_tox_finds_every_python.py` checks them without tox installed.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from tox.config.sets import ConfigSet
    from tox.session.state import State
    from tox.tox_env.api import ToxEnv

#: The same marker as `tox.plugin.impl` (a pluggy hook implementation of project "tox").
impl = pluggy.HookimplMarker("tox")

#: The environment that reports which Python test environments ran.
REPORT_ENV = "pythons"
#: The variable tox.ini reads for the number of pytest workers of one Python's suite.
WORKERS_VARIABLE = "CHANNELKIT_TEST_WORKERS"
#: The variable tox.ini reads first for the suite that also runs the real-agent tests
#: (py311): those keep one worker waiting on the agent for about two minutes.
AGENT_WORKERS_VARIABLE = "CHANNELKIT_AGENT_TEST_WORKERS"
#: Workers of one suite running alone (tox.ini's default), shared by suites run at once.
SERIAL_WORKERS = 6
#: The fewest workers a suite gets when suites run at once.
MINIMUM_WORKERS = 2
#: The Python test environments of the project (py310 ... py313).
PYTHON_TEST_ENVS = 4
#: How many Python test environments must run for the report environment to pass.
MINIMUM_PYTHONS = 2

_LOGGER = logging.getLogger(__name__)
_PYTHON_TEST_ENV = re.compile(r"py(\d)(\d+)")
_RELEASE = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_PYENV_ROOT_TIMEOUT_S = 10.0


def pyenv_root(environ: Mapping[str, str] | None = None) -> Path | None:
    """The pyenv root directory: `$PYENV_ROOT`, else `pyenv root`, else `~/.pyenv`.

    Returns `None` when none of them is an existing directory.
    """
    env = os.environ if environ is None else environ
    candidates: list[Path] = []
    if env.get("PYENV_ROOT"):
        candidates.append(Path(env["PYENV_ROOT"]))
    pyenv = shutil.which("pyenv", path=env.get("PATH"))
    if pyenv is not None:
        try:
            out = subprocess.run(
                [pyenv, "root"],
                capture_output=True,
                text=True,
                timeout=_PYENV_ROOT_TIMEOUT_S,
                env=dict(env),
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            out = None
        if out is not None and out.returncode == 0 and out.stdout.strip():
            candidates.append(Path(out.stdout.strip()))
    home = env.get("HOME") or env.get("USERPROFILE")
    if home:
        candidates.append(Path(home) / ".pyenv")
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return None


def pyenv_interpreters(root: Path | None) -> list[Path]:
    """The interpreters pyenv installed under `root/versions`, newest minor version first.

    Only CPython 3 releases named `3.X.Y` count (not virtualenvs, free-threaded or other
    implementations); of each `3.X` the newest patch release with an executable interpreter.
    """
    if root is None:
        return []
    versions = root / "versions"
    if not versions.is_dir():
        return []
    newest: dict[tuple[int, int], tuple[int, Path]] = {}
    for entry in versions.iterdir():
        match = _RELEASE.fullmatch(entry.name)
        if match is None or match.group(1) != "3":
            continue
        major, minor, patch = (int(part) for part in match.groups())
        exe = _interpreter_in(entry, major, minor)
        if exe is None:
            continue
        known = newest.get((major, minor))
        if known is None or patch > known[0]:
            newest[(major, minor)] = (patch, exe)
    return [newest[key][1] for key in sorted(newest, reverse=True)]


def _interpreter_in(version_dir: Path, major: int, minor: int) -> Path | None:
    for relative in (f"bin/python{major}.{minor}", f"bin/python{major}", "python.exe"):
        exe = version_dir / relative
        if exe.is_file() and os.access(exe, os.X_OK):
            return exe
    return None


def python_test_env(name: str) -> bool:
    """Whether `name` is a Python test environment (`py310`, `py311`, ...)."""
    return _PYTHON_TEST_ENV.fullmatch(name) is not None


def parallel_test_workers(parallel: int | None, pythons: int = PYTHON_TEST_ENVS) -> int | None:
    """Pytest workers per Python suite when tox runs ``parallel`` environments at once.

    ``parallel`` is tox's parsed ``--parallel``: ``None`` for ``all``, a number of
    environments otherwise, ``0`` when they run one after another (then ``None``: tox.ini's
    default applies). The `SERIAL_WORKERS` are shared by the suites that can run at once,
    at least `MINIMUM_WORKERS` each: ``-p all`` with four Pythons gives 2, ``-p 2`` gives 3.
    """
    if parallel == 0:
        return None
    at_once = pythons if parallel is None else max(1, min(parallel, pythons))
    return max(MINIMUM_WORKERS, SERIAL_WORKERS // at_once)


def path_with(path: str, interpreters: Iterable[Path]) -> str:
    """``path`` (a `PATH` value) with the directories of ``interpreters`` appended, each
    once and only when not already there."""
    parts = [part for part in path.split(os.pathsep) if part]
    for exe in interpreters:
        directory = str(exe.parent)
        if directory not in parts:
            parts.append(directory)
    return os.pathsep.join(parts)


def venv_interpreter(env_dir: Path) -> str | None:
    """``"3.X.Y at /path/to/python3.X"`` of the base interpreter of the virtual environment
    in ``env_dir``, read from its ``pyvenv.cfg`` (None when it says neither)."""
    try:
        text = (env_dir / "pyvenv.cfg").read_text(encoding="utf-8")
    except OSError:
        return None
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip().lower()] = value.strip()
    version = values.get("version_info") or values.get("version")
    home = values.get("home")
    if not version or not home:
        return None
    release = ".".join(version.split(".")[:3])
    major_minor = ".".join(release.split(".")[:2])
    return f"{release} at {Path(home) / f'python{major_minor}'}"


@dataclass(frozen=True)
class EnvResult:
    """What became of one Python test environment."""

    name: str
    ran: bool
    #: The interpreter's version and path when it ran; why not, when it did not.
    detail: str
    exit_code: int = 0


class Results:
    """The Python test environments' results of one tox run (locked: `tox p` runs threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._results: dict[str, EnvResult] = {}

    def record(self, result: EnvResult) -> None:
        """Keep the first result of an environment (its teardown comes after its run)."""
        with self._lock:
            self._results.setdefault(result.name, result)

    def known(self, name: str) -> bool:
        """Whether the environment has a result."""
        with self._lock:
            return name in self._results

    def snapshot(self) -> list[EnvResult]:
        """The results so far, ordered by environment name."""
        with self._lock:
            return [self._results[name] for name in sorted(self._results, key=_env_order)]


def _env_order(name: str) -> tuple[int, int, str]:
    match = _PYTHON_TEST_ENV.fullmatch(name)
    if match is None:
        return (0, 0, name)
    return (int(match.group(1)), int(match.group(2)), name)


def report(results: Iterable[EnvResult], minimum: int = MINIMUM_PYTHONS) -> tuple[bool, str]:
    """The one-line report of which Pythons ran and which were skipped, and whether it passes.

    It passes when at least `minimum` Python test environments ran their commands (whatever
    their outcome: a failing suite fails its own environment).
    """
    results = list(results)
    ran = [r for r in results if r.ran]
    skipped = [r for r in results if not r.ran]

    def describe(r: EnvResult) -> str:
        failed = f", exit code {r.exit_code}" if r.ran and r.exit_code else ""
        return f"{r.name} ({r.detail}{failed})"

    line = (
        f"Python test environments: {len(ran)} ran: "
        + (", ".join(describe(r) for r in ran) or "none")
        + f"; {len(skipped)} skipped: "
        + (", ".join(describe(r) for r in skipped) or "none")
    )
    if len(ran) < minimum:
        return False, (
            f"{line}. Fewer than {minimum} Python versions ran the tests: install them "
            "(pyenv install 3.X, or python3.X on PATH)"
        )
    return True, line


RESULTS = Results()


@impl
def tox_add_core_config(core_conf: ConfigSet, state: State) -> None:
    """Add pyenv's interpreters to the interpreters tox tries first, and under ``tox -p``
    give each Python's suite its share of the workers (unless the variable is set)."""
    del core_conf
    options: Any = state.conf.options
    parallel = getattr(options, "parallel", 0)
    if WORKERS_VARIABLE not in os.environ and (parallel is None or isinstance(parallel, int)):
        workers = parallel_test_workers(parallel)
        if workers is not None:
            # read by tox.ini's {env:CHANNELKIT_TEST_WORKERS:6} when the commands load
            os.environ[WORKERS_VARIABLE] = str(workers)
            os.environ.setdefault(AGENT_WORKERS_VARIABLE, str(workers + 1))
    found = pyenv_interpreters(pyenv_root())
    # tox-uv's runner asks `uv` for `cpython3.X`, and uv looks on PATH, not in --discover:
    # the interpreters' own directories go after everything already there (pyenv's shims
    # keep answering for the versions pyenv selected), and uv never downloads a Python.
    os.environ["PATH"] = path_with(os.environ.get("PATH", ""), found)
    os.environ.setdefault("UV_PYTHON_DOWNLOADS", "never")
    discover = getattr(options, "discover", None)
    if not isinstance(discover, list):
        return
    for exe in found:
        if str(exe) not in discover:
            discover.append(str(exe))


@impl
def tox_after_run_commands(tox_env: ToxEnv, exit_code: int, outcomes: list[Any]) -> None:
    """Record that a Python test environment ran, on which interpreter."""
    del outcomes
    name = tox_env.name
    if not python_test_env(name):
        return
    detail = "interpreter unknown"
    base = getattr(tox_env, "base_python", None)
    executable = base.extra.get("executable") if base is not None else None
    if base is not None and executable:
        version = ".".join(str(part) for part in tuple(base.version_info)[:3])
        detail = f"{version} at {executable}"
    else:
        # tox-uv's runner knows only the version it asked uv for: the environment's
        # pyvenv.cfg names the interpreter uv chose
        env_dir = getattr(tox_env, "env_dir", None)
        detail = (venv_interpreter(Path(env_dir)) if env_dir else None) or detail
    RESULTS.record(EnvResult(name, ran=True, detail=detail, exit_code=exit_code))


@impl
def tox_env_teardown(tox_env: ToxEnv) -> None:
    """Record why a Python test environment that did not run its commands was left out."""
    name = tox_env.name
    if not python_test_env(name) or RESULTS.known(name):
        return
    reason = "stopped before its commands (see its log above)"
    try:
        base = getattr(tox_env, "base_python", None)
    except Exception as exc:  # tox's Skip or NoInterpreter: the interpreter is missing
        reason = str(exc) or type(exc).__name__
    else:
        # tox-uv's runner knows the version only; uv, asked for it, found no interpreter
        # when no environment was made
        env_dir = getattr(tox_env, "env_dir", None)
        if (
            base is not None
            and not base.extra.get("executable")
            and env_dir is not None
            and venv_interpreter(Path(env_dir)) is None
        ):
            version = ".".join(str(part) for part in tuple(base.version_info)[:2])
            reason = f"uv found no Python {version} on PATH (pyenv's versions included)"
    RESULTS.record(EnvResult(name, ran=False, detail=reason))


@impl
def tox_before_run_commands(tox_env: ToxEnv) -> None:
    """In the report environment: log which Pythons ran, and fail when fewer than two did."""
    if tox_env.name != REPORT_ENV:
        return
    from tox.tox_env.errors import Fail

    passed, line = report(RESULTS.snapshot())
    if not passed:
        raise Fail(line)
    _LOGGER.warning("%s", line)
