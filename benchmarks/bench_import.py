"""Import-cost benchmark: what a web process pays to load channelkit, next to Flask.

Each statement is timed in a fresh interpreter (``perf_counter`` around the import, so
interpreter start-up is excluded), ``--runs`` times; the best run is reported with the
median, plus which heavy libraries the statement loaded. Bytecode is cached for the run
(in a temporary ``PYTHONPYCACHEPREFIX``, even when ``PYTHONDONTWRITEBYTECODE`` is set) and
warmed by one untimed import first, so no statement pays for compiling. Runs are
interleaved, so background load hits every statement alike. The figures compared are:

* ``import flask``                                         (the yardstick)
* ``import channelkit.platforms.dingtalk, channelkit.web``  (a DingTalk bot's web process)
* ``import channelkit``                                     (the front door)

Run: python benchmarks/bench_import.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

STATEMENTS = (
    "import flask",
    "import channelkit.platforms.dingtalk, channelkit.web",
    "import channelkit",
)
HEAVY = ("requests", "urllib3", "jsonschema", "dataclasses_json", "marshmallow")

_PROBE = """
import json, sys, time
start = time.perf_counter()
{statement}
elapsed = time.perf_counter() - start
heavy = sorted({{m.split(".")[0] for m in sys.modules}} & set({heavy!r}))
print(json.dumps({{"ms": elapsed * 1000, "heavy": heavy}}))
"""


def measure(statement: str, env: dict[str, str] | None = None) -> dict[str, object]:
    """Import ``statement`` in a fresh interpreter: elapsed ms and heavy modules loaded."""
    code = _PROBE.format(statement=statement, heavy=HEAVY)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    ).stdout
    result: dict[str, object] = json.loads(out.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="fresh interpreters per statement")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-import-") as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        run(args.runs, env)


def run(runs: int, env: dict[str, str]) -> None:
    """Measure every statement ``runs`` times and print the figures."""
    statements = []
    for statement in STATEMENTS:
        try:
            measure(statement, env)  # warm the .pyc files
        except subprocess.CalledProcessError:
            print(f"{statement:55s}  not importable here (missing optional extra?)")
            continue
        statements.append(statement)
    times: dict[str, list[float]] = {s: [] for s in statements}
    heavy: dict[str, object] = {}
    for _ in range(runs):
        for statement in statements:
            result = measure(statement, env)
            times[statement].append(float(str(result["ms"])))
            heavy[statement] = result["heavy"]
    best = {s: min(t) for s, t in times.items()}
    for statement in statements:
        loaded = heavy[statement]
        print(
            f"{statement:55s}  best {best[statement]:7.1f} ms"
            f"  median {statistics.median(times[statement]):7.1f} ms"
            f"  heavy modules: {', '.join(loaded) if isinstance(loaded, list) and loaded else '-'}"
        )
    flask = best.get(STATEMENTS[0])
    platform = best.get(STATEMENTS[1])
    if flask and platform:
        print(f"dingtalk + web / flask (best): {platform / flask:.2f}x")


if __name__ == "__main__":
    main()
