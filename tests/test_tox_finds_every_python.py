"""tox finds every installed Python 3.10-3.13, pyenv's included, with nothing to set, says
which ran and which were skipped (and why), and fails when fewer than two ran.

The logic lives in the project's tox plugin, `toxfile.py`; the last two tests run the real
tox over a small project that uses it (they skip where tox is not installed)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load_toxfile() -> ModuleType:
    spec = importlib.util.spec_from_file_location("channelkit_toxfile", ROOT / "toxfile.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


toxfile = _load_toxfile()


def _fake_interpreter(root: Path, version: str, name: str | None = None) -> Path:
    major, minor = version.split(".")[:2]
    exe = root / "versions" / version / "bin" / (name or f"python{major}.{minor}")
    exe.parent.mkdir(parents=True, exist_ok=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    return exe


def test_the_newest_patch_of_each_python3_minor_is_found_newest_minor_first(
    tmp_path: Path,
) -> None:
    root = tmp_path / "pyenv"
    _fake_interpreter(root, "3.10.2")
    newest_310 = _fake_interpreter(root, "3.10.13")
    py312 = _fake_interpreter(root, "3.12.1")
    py313 = _fake_interpreter(root, "3.13.0", name="python3")  # only bin/python3
    _fake_interpreter(root, "2.7.18")  # not Python 3
    _fake_interpreter(root, "3.13.0t")  # free-threaded build: not a plain release
    _fake_interpreter(root, "pypy3.10-7.3.17")  # another implementation
    (root / "versions" / "3.11.7" / "bin").mkdir(parents=True)  # no interpreter inside
    (root / "versions" / "my-venv").mkdir()  # a pyenv-virtualenv

    assert toxfile.pyenv_interpreters(root) == [py313, py312, newest_310]


def test_without_pyenv_no_interpreter_is_added(tmp_path: Path) -> None:
    assert toxfile.pyenv_interpreters(None) == []
    assert toxfile.pyenv_interpreters(tmp_path / "missing") == []
    empty = {"PATH": str(tmp_path), "HOME": str(tmp_path)}
    assert toxfile.pyenv_root(empty) is None


@pytest.mark.skipif(os.name == "nt", reason="a POSIX shell script stands in for pyenv")
def test_the_pyenv_root_comes_from_pyenv_root_then_pyenv_then_home(tmp_path: Path) -> None:
    from_env, from_command, home = tmp_path / "env", tmp_path / "command", tmp_path / "home"
    for directory in (from_env, from_command, home / ".pyenv"):
        directory.mkdir(parents=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pyenv = bin_dir / "pyenv"
    pyenv.write_text(f'#!/bin/sh\n[ "$1" = root ] && echo "{from_command}"\n')
    pyenv.chmod(0o755)

    environ = {"PATH": str(bin_dir), "HOME": str(home), "PYENV_ROOT": str(from_env)}
    assert toxfile.pyenv_root(environ) == from_env
    del environ["PYENV_ROOT"]
    assert toxfile.pyenv_root(environ) == from_command
    environ["PATH"] = str(tmp_path / "nothing-here")
    assert toxfile.pyenv_root(environ) == home / ".pyenv"


def test_pyenv_interpreters_join_the_discovery_list_after_the_given_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "pyenv"
    py310 = _fake_interpreter(root, "3.10.13")
    py313 = _fake_interpreter(root, "3.13.0")
    monkeypatch.setenv("PYENV_ROOT", str(root))
    options = SimpleNamespace(discover=["/opt/python3.12/bin/python3.12", str(py310)])
    state = SimpleNamespace(conf=SimpleNamespace(options=options))

    toxfile.tox_add_core_config(core_conf=None, state=state)
    toxfile.tox_add_core_config(core_conf=None, state=state)  # idempotent

    assert options.discover == ["/opt/python3.12/bin/python3.12", str(py310), str(py313)]


def _result(name: str, ran: bool, detail: str, exit_code: int = 0) -> object:
    return toxfile.EnvResult(name, ran=ran, detail=detail, exit_code=exit_code)


def test_the_report_names_what_ran_and_why_the_rest_was_skipped() -> None:
    passed, line = toxfile.report(
        [
            _result("py311", True, "3.11.7 at /p/3.11/bin/python3.11"),
            _result("py310", False, "could not find python interpreter with spec(s): py310"),
            _result("py312", True, "3.12.1 at /p/3.12/bin/python3.12", exit_code=1),
        ]
    )
    assert passed
    assert line == (
        "Python test environments: 2 ran: py311 (3.11.7 at /p/3.11/bin/python3.11), "
        "py312 (3.12.1 at /p/3.12/bin/python3.12, exit code 1); 1 skipped: "
        "py310 (could not find python interpreter with spec(s): py310)"
    )
    assert "\n" not in line


def test_fewer_than_two_pythons_fail_the_report() -> None:
    passed, line = toxfile.report(
        [
            _result("py311", True, "3.11.7 at /p/bin/python3.11"),
            _result("py313", False, "could not find python interpreter with spec(s): py313"),
        ]
    )
    assert not passed
    assert "1 ran: py311 (3.11.7 at /p/bin/python3.11)" in line
    assert "py313 (could not find python interpreter with spec(s): py313)" in line
    assert "Fewer than 2 Python versions ran the tests" in line
    assert toxfile.report([])[0] is False


def test_the_recorded_results_keep_each_envs_first_outcome_in_version_order() -> None:
    results = toxfile.Results()
    results.record(toxfile.EnvResult("py313", ran=True, detail="3.13.0"))
    results.record(toxfile.EnvResult("py39", ran=True, detail="3.9.18"))
    results.record(toxfile.EnvResult("py313", ran=False, detail="teardown after the run"))
    assert [(r.name, r.ran) for r in results.snapshot()] == [("py39", True), ("py313", True)]
    assert toxfile.python_test_env("py310")
    assert not toxfile.python_test_env("pythons")
    assert not toxfile.python_test_env("lint")


def test_suites_run_at_once_share_six_workers_at_least_two_each() -> None:
    assert toxfile.parallel_test_workers(0) is None  # one after another: tox.ini's default
    assert toxfile.parallel_test_workers(None) == 2  # -p all, four Pythons
    assert toxfile.parallel_test_workers(4) == 2
    assert toxfile.parallel_test_workers(3) == 2
    assert toxfile.parallel_test_workers(2) == 3  # -p auto on two cores
    assert toxfile.parallel_test_workers(1) == 6
    assert toxfile.parallel_test_workers(16) == 2  # more slots than Pythons
    assert toxfile.parallel_test_workers(None, pythons=2) == 3


def test_under_tox_p_the_workers_variable_is_set_unless_it_already_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYENV_ROOT", "/nonexistent")
    monkeypatch.setenv("PATH", os.environ.get("PATH", ""))  # restored after the test
    monkeypatch.setenv("UV_PYTHON_DOWNLOADS", "never")

    def configure(parallel: object) -> str | None:
        options = SimpleNamespace(discover=[], parallel=parallel)
        toxfile.tox_add_core_config(
            core_conf=None, state=SimpleNamespace(conf=SimpleNamespace(options=options))
        )
        return os.environ.get(toxfile.WORKERS_VARIABLE)

    for name in (toxfile.WORKERS_VARIABLE, toxfile.AGENT_WORKERS_VARIABLE):
        monkeypatch.setenv(name, "")  # restored after the test, set or not
        monkeypatch.delenv(name)
    assert configure(0) is None  # `tox` without -p: tox.ini's six
    assert os.environ.get(toxfile.AGENT_WORKERS_VARIABLE) is None
    assert configure(None) == "2"  # `tox -p all`
    assert os.environ[toxfile.AGENT_WORKERS_VARIABLE] == "3"  # the real agent's suite
    monkeypatch.delenv(toxfile.AGENT_WORKERS_VARIABLE)
    monkeypatch.setenv(toxfile.WORKERS_VARIABLE, "5")
    assert configure(None) == "5"  # the person's own number wins, for every suite
    assert os.environ.get(toxfile.AGENT_WORKERS_VARIABLE) is None


def test_pyenvs_interpreter_directories_go_on_path_after_what_is_there_for_uv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tox-uv's runner asks uv for `cpython3.X`, which uv looks for on PATH only: pyenv's
    interpreters go there, after the shims (which keep the versions pyenv selected), and
    uv is told not to download a Python the machine does not have."""
    root = tmp_path / "pyenv"
    py310 = _fake_interpreter(root, "3.10.13")
    py313 = _fake_interpreter(root, "3.13.0")
    shims = str(root / "shims")
    monkeypatch.setenv("PYENV_ROOT", str(root))
    monkeypatch.setenv("PATH", os.pathsep.join([shims, str(py310.parent)]))
    monkeypatch.setenv("UV_PYTHON_DOWNLOADS", "")
    monkeypatch.delenv("UV_PYTHON_DOWNLOADS")
    options = SimpleNamespace(discover=[], parallel=0)
    state = SimpleNamespace(conf=SimpleNamespace(options=options))

    toxfile.tox_add_core_config(core_conf=None, state=state)

    parts = os.environ["PATH"].split(os.pathsep)
    assert parts == [shims, str(py310.parent), str(py313.parent)]  # each directory once
    assert options.discover == [str(py313), str(py310)]
    assert os.environ["UV_PYTHON_DOWNLOADS"] == "never"
    monkeypatch.setenv("UV_PYTHON_DOWNLOADS", "automatic")  # the person's own choice wins
    toxfile.tox_add_core_config(core_conf=None, state=state)
    assert os.environ["UV_PYTHON_DOWNLOADS"] == "automatic"
    assert os.environ["PATH"].split(os.pathsep) == parts


def test_the_report_names_the_interpreter_an_environment_was_made_from(tmp_path: Path) -> None:
    """tox-uv knows only the version it asked for; the environment's pyvenv.cfg (uv's and
    virtualenv's shapes) names the interpreter, as the report shows it."""
    uv_env, virtualenv_env = tmp_path / "uv", tmp_path / "virtualenv"
    uv_env.mkdir()
    virtualenv_env.mkdir()
    (uv_env / "pyvenv.cfg").write_text(
        "home = /opt/pyenv/versions/3.12.1/bin\nimplementation = CPython\n"
        "uv = 0.13.9\nversion_info = 3.12.1\n"
    )
    (virtualenv_env / "pyvenv.cfg").write_text(
        "home = /usr/bin\nimplementation = CPython\nversion_info = 3.10.13.final.0\n"
        "virtualenv = 21.1.0\n"
    )
    assert toxfile.venv_interpreter(uv_env) == "3.12.1 at /opt/pyenv/versions/3.12.1/bin/python3.12"
    assert toxfile.venv_interpreter(virtualenv_env) == "3.10.13 at /usr/bin/python3.10"
    assert toxfile.venv_interpreter(tmp_path / "missing") is None
    (uv_env / "pyvenv.cfg").write_text("implementation = CPython\n")
    assert toxfile.venv_interpreter(uv_env) is None


def test_the_projects_tox_ini_reports_last_after_every_python_env() -> None:
    text = (ROOT / "tox.ini").read_text(encoding="utf-8")
    env_list = re.search(r"^env_list\s*=\s*(.+)$", text, flags=re.M)
    assert env_list is not None
    envs = [e.strip() for e in env_list.group(1).split(",")]
    assert envs[-1] == toxfile.REPORT_ENV
    pythons = [e for e in envs if toxfile.python_test_env(e)]
    section = re.search(r"^\[testenv:pythons\]\n(.*?)(?=^\[|\Z)", text, flags=re.M | re.S)
    assert section is not None
    depends = re.search(r"^depends\s*=\s*(.+)$", section.group(1), flags=re.M)
    assert depends is not None
    assert [e.strip() for e in depends.group(1).split(",")] == pythons
    assert re.search(r"^commands\s*=\s*$", section.group(1), flags=re.M)


# --- the real tox over a small project using the plugin ------------------------------------


def _small_tox_ini(testenv: str) -> str:
    """A project of the four Python envs and `pythons`, whose ``[testenv]`` is ``testenv``."""
    return (
        "[tox]\n"
        "env_list = py310, py311, py312, py313, pythons\n"
        "skip_missing_interpreters = true\n\n"
        f"[testenv]\n{testenv}\n\n"
        "[testenv:pythons]\n"
        "depends = py310, py311, py312, py313\n"
        "commands =\n"
    )


SMALL_TOX_INI = _small_tox_ini(
    "skip_install = true\n"
    "commands = python -c \"import sys; print('running', sys.version_info[:2])\""
)


#: tox's own runner (virtualenv) and tox-uv's (uv finds the interpreters on PATH):
#: the README's command installs tox-uv; plain tox must keep working.
RUNNERS = [
    "virtualenv",
    pytest.param(
        "uv-venv-runner",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("tox_uv") is None, reason="tox-uv is not installed"
        ),
    ),
]


def _run_tox(
    tmp_path: Path,
    pyenv_root: Path,
    *args: str,
    runner: str = "virtualenv",
    tox_ini: str = SMALL_TOX_INI,
) -> subprocess.CompletedProcess[str]:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "toxfile.py", project / "toxfile.py")
    (project / "tox.ini").write_text(tox_ini)
    empty_bin = tmp_path / "bin"  # no python3.X on PATH: only discovery finds them
    empty_bin.mkdir(exist_ok=True)
    env = {
        "PATH": str(empty_bin),
        "HOME": str(tmp_path / "home"),
        "PYENV_ROOT": str(pyenv_root),
        "VIRTUALENV_OVERRIDE_APP_DATA": str(tmp_path / "virtualenv-app-data"),
        "VIRTUALENV_NO_SEED": "1",  # nothing is installed: no pip in the environments
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tox",
            "--runner",
            runner,
            "--workdir",
            str(tmp_path / "work"),
            *args,
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _wanted_interpreters() -> list[Path]:
    found = toxfile.pyenv_interpreters(toxfile.pyenv_root())
    return [exe for exe in found if re.search(r"python3\.1[0-3]$", exe.name)]


@pytest.mark.slow
@pytest.mark.parametrize("runner", RUNNERS)
def test_tox_runs_every_pyenv_python_with_nothing_set(tmp_path: Path, runner: str) -> None:
    pytest.importorskip("tox")
    wanted = _wanted_interpreters()
    if len(wanted) < 2:
        pytest.skip("needs two of Python 3.10-3.13 installed by pyenv")
    result = _run_tox(tmp_path, toxfile.pyenv_root(), runner=runner)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    line = next(x for x in out.splitlines() if "Python test environments:" in x)
    assert line.startswith("pythons: Python test environments: ")
    for exe in wanted:
        version = exe.name.removeprefix("python")
        env_name = "py" + version.replace(".", "")
        assert re.search(rf"{env_name} \({version}\.\d+ at [^)]*\)", line), line
        assert re.search(rf"^  {env_name}: OK", out, flags=re.M), out


@pytest.mark.slow
@pytest.mark.parametrize("runner", RUNNERS)
def test_tox_fails_and_says_why_when_fewer_than_two_pythons_ran(
    tmp_path: Path, runner: str
) -> None:
    pytest.importorskip("tox")
    own = f"py{sys.version_info[0]}{sys.version_info[1]}"
    if own not in {"py310", "py311", "py312", "py313"}:
        pytest.skip("the interpreter running tox must be one of 3.10-3.13")
    empty_root = tmp_path / "no-pythons-here"
    (empty_root / "versions").mkdir(parents=True)
    # only the interpreter running tox, on PATH (uv looks there; virtualenv also knows it
    # as the one running)
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / f"python{version}").symlink_to(sys.executable)
    result = _run_tox(tmp_path, empty_root, runner=runner)
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    line = next(x for x in out.splitlines() if "Python test environments:" in x)
    assert f"1 ran: {own} (" in line, line
    for name in {"py310", "py311", "py312", "py313"} - {own}:
        if runner == "virtualenv":
            assert f"{name} (could not find python interpreter with spec(s): {name})" in line
        else:
            assert f"{name} (uv found no Python {name[2]}.{name[3:]} on PATH" in line, line
    assert "Fewer than 2 Python versions ran the tests" in line
    assert re.search(r"^  pythons: FAIL", out, flags=re.M), out


PARALLEL_TOX_INI = _small_tox_ini(
    "skip_install = true\n"
    "pass_env = CHANNELKIT_*\n"
    "parallel_show_output = true\n"
    "commands = python -c \"import os; print('workers', os.environ['CHANNELKIT_TEST_WORKERS'])\""
)


@pytest.mark.slow
@pytest.mark.parametrize("runner", RUNNERS)
def test_tox_p_all_shows_each_envs_output_and_gives_each_suite_two_workers(
    tmp_path: Path, runner: str
) -> None:
    """The README's `tox -p all`: every Python at once, each suite with two workers, and
    the `pythons` line still shown (a parallel run hides a passing env's output unless the
    env sets parallel_show_output)."""
    pytest.importorskip("tox")
    wanted = _wanted_interpreters()
    if len(wanted) < 2:
        pytest.skip("needs two of Python 3.10-3.13 installed by pyenv")
    result = _run_tox(
        tmp_path, toxfile.pyenv_root(), "-p", "all", runner=runner, tox_ini=PARALLEL_TOX_INI
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    line = next(x for x in out.splitlines() if "Python test environments:" in x)
    assert f"{len(wanted)} ran: " in line, line
    assert out.count("workers 2") == len(wanted), out
