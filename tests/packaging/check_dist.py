"""Build the sdist and the wheel, fail on packaging warnings, and check what each contains.

Run by ``tox -e package`` (not collected by pytest)::

    python tests/packaging/check_dist.py OUT_DIR

* the build (``python -m build``: the sdist, then the wheel from the sdist) prints no
  setuptools or wheel warning;
* the sdist holds everything needed to rebuild and test: the package, ``openapi/``,
  ``codegen/``, ``tests/``, ``docs/``, ``benchmarks/``, the tool configs and LICENSE, and no
  byte code or local state;
* the wheel holds everything needed to run: the modules, ``py.typed``, the presentation
  schema and the playground page, the LICENSE in its metadata, and no tests.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SDIST_REQUIRED = [
    "LICENSE",
    "README.md",
    "CHANGELOG.md",
    "CONTRIBUTING.md",
    "SECURITY.md",
    "setup.py",
    "pyproject.toml",
    "tox.ini",
    "toxfile.py",
    "pytest.ini",
    "mypy.ini",
    "ruff.toml",
    "mkdocs.yml",
    "MANIFEST.in",
    ".ci/run",
    "openapi/dingtalk.json",
    "codegen/__main__.py",
    "tests/conftest.py",
    "tests/web/test_quickstarts.py",
    "tests/packaging/smoke_wheel.py",
    "docs/index.md",
    "docs/reference/index.md",
    "benchmarks/README.md",
    "sdk/channelkit/__init__.py",
    "sdk/channelkit/py.typed",
    "sdk/channelkit/playground/static/index.html",
]
WHEEL_REQUIRED = [
    "channelkit/__init__.py",
    "channelkit/py.typed",
    "channelkit/cli.py",
    "channelkit/presentation/schema.json",
    "channelkit/playground/static/index.html",
    "channelkit/playground/static/playground.js",
    "channelkit/playground/static/playground.css",
]
STRAY = re.compile(r"(__pycache__|\.py[cod]$|\.ci/logs/|\.hypothesis/|\.tox/|\.DS_Store)")
WARNING = re.compile(r"(warning|deprecat)", re.I)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: check_dist.py OUT_DIR", file=sys.stderr)
        return 2
    out = Path(argv[0])
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    result = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        env=env,
    )
    log = result.stdout + result.stderr
    if result.returncode != 0:
        print(log)
        print("check_dist: the build failed", file=sys.stderr)
        return 1
    warnings = [line for line in log.splitlines() if WARNING.search(line)]
    problems: list[str] = [f"build warning: {line.strip()}" for line in warnings]

    (sdist,) = out.glob("channelkit-*.tar.gz")
    (wheel,) = out.glob("channelkit-*.whl")
    with tarfile.open(sdist) as tar:
        prefix = tar.getnames()[0].split("/", 1)[0]
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    problems += [f"sdist lacks {name}" for name in SDIST_REQUIRED if name not in names]
    problems += [f"sdist holds stray {name}" for name in sorted(names) if STRAY.search(name)]
    with zipfile.ZipFile(wheel) as zf:
        wheel_names = set(zf.namelist())
    problems += [f"wheel lacks {name}" for name in WHEEL_REQUIRED if name not in wheel_names]
    problems += [
        f"wheel holds {name}"
        for name in sorted(wheel_names)
        if STRAY.search(name) or name.startswith(("tests/", "docs/", "codegen/"))
    ]
    if not any(n.endswith((".dist-info/licenses/LICENSE", "/LICENSE")) for n in wheel_names):
        problems.append("wheel metadata lacks LICENSE")
    for problem in problems:
        print(f"check_dist: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(
        f"check_dist: {prefix}.tar.gz ({len(names)} files) and "
        f"{wheel.name} ({len(wheel_names)} files) ok"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
