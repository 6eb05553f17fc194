"""Thirty representative agent answers render, on every platform, exactly as checked in
(``tests/markdown/golden``; regenerate with ``python tests/markdown/golden_vectors.py``)."""

from __future__ import annotations

import pytest

from tests.markdown.golden_vectors import GOLDEN, cases, rendered


def test_there_are_thirty_cases_with_a_file_per_dialect() -> None:
    assert len(cases()) == 30
    for case in cases():
        assert sorted(p.name for p in (GOLDEN / case).iterdir()) == sorted(
            ["input.md", *rendered(case)]
        ), case


@pytest.mark.parametrize("case", cases())
def test_case_renders_as_checked_in(case: str) -> None:
    for name, text in rendered(case).items():
        expected = (GOLDEN / case / name).read_text(encoding="utf-8")
        assert text == expected, f"{case}/{name} differs (regenerate and review the diff)"


def test_mid_stream_cases_show_no_raw_markers() -> None:
    for case in (c for c in cases() if "stream" in c):
        telegram = rendered(case)["telegram.txt"]
        assert "**" not in telegram and "```" not in telegram, case
