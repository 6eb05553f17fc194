"""The golden Markdown vectors: representative agent answers (``golden/<case>/input.md``)
and their rendering for every dialect (``golden/<case>/<dialect>.txt``), checked in and
reviewed by eye.

A case whose name contains ``stream`` is a text cut mid-stream: it is rendered as a
preview (``preview=True``). Regenerate every rendering after a deliberate change with

    python tests/markdown/golden_vectors.py

and review the diff.
"""

from __future__ import annotations

import sys
from pathlib import Path

from channelkit.markdown import Dialect, render

GOLDEN = Path(__file__).resolve().parent / "golden"


def cases() -> list[str]:
    """The case names, in order."""
    return sorted(p.name for p in GOLDEN.iterdir() if (p / "input.md").is_file())


def rendered(case: str) -> dict[str, str]:
    """``{file name: rendering}`` of one case, one file per dialect."""
    text = (GOLDEN / case / "input.md").read_text(encoding="utf-8")
    preview = "stream" in case
    return {
        f"{dialect.value}.txt": "\n".join(render(text, dialect, preview=preview)) + "\n"
        for dialect in Dialect
    }


def regenerate() -> int:
    """Write every case's renderings; returns how many files changed."""
    changed = 0
    for case in cases():
        for name, text in rendered(case).items():
            path = GOLDEN / case / name
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")
                changed += 1
    return changed


if __name__ == "__main__":
    sys.stdout.write(f"{regenerate()} golden files written\n")
