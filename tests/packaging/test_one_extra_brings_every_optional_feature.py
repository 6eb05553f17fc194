"""`pip install 'channelkit[all]'` brings every optional feature the README offers.

A person who runs the README's install line and then tries `channelkit serve`, the Feishu
long connection, the Redis store, Flask or Django must not meet the missing packages one
error at a time: the `all` extra holds the requirements of every other runtime extra.
"""

from __future__ import annotations

import os
import re
import sys
import types
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[2]
DEVELOPMENT_EXTRAS = {"test", "dev", "all"}


def _setup_kwargs() -> dict[str, Any]:
    captured: dict[str, Any] = {}
    source = (ROOT / "setup.py").read_text(encoding="utf-8")
    here = os.getcwd()
    os.chdir(ROOT)  # setup.py reads README.md relative to the project root
    try:
        # a stand-in setuptools that records setup()'s arguments (the test envs of
        # Python 3.12+ have no setuptools, and nothing is built here)
        stand_in = types.ModuleType("setuptools")
        stand_in.setup = captured.update  # type: ignore[attr-defined]
        stand_in.find_packages = lambda **kwargs: []  # type: ignore[attr-defined]
        with mock.patch.dict(sys.modules, {"setuptools": stand_in}):
            exec(compile(source, str(ROOT / "setup.py"), "exec"), {"__name__": "__main__"})
    finally:
        os.chdir(here)
    return captured


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0].lower()


def test_the_all_extra_holds_every_runtime_extra() -> None:
    extras: dict[str, list[str]] = _setup_kwargs()["extras_require"]
    everything = {_name(r) for r in extras["all"]}
    for extra, requirements in extras.items():
        if extra in DEVELOPMENT_EXTRAS:
            continue
        missing = {_name(r) for r in requirements} - everything
        assert not missing, f"extra {extra!r} needs {sorted(missing)}, which 'all' lacks"
    assert {"waitress", "protobuf", "redis", "flask", "django"} <= everything


def test_the_readme_install_line_takes_the_all_extra() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first = re.findall(r"```sh\n(.*?)```", readme, flags=re.S)[0].strip().splitlines()[0]
    assert "pip install -e '.[all]'" in first, first
