"""Golden render matrix: one representative presentation, seven platforms + text.

Regenerate with ``python tests/presentation/golden_cases.py``.
"""

from __future__ import annotations

import pytest

from .golden_cases import GOLDEN_DIR, build_outputs, serialize

OUTPUTS = build_outputs()


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_matches_golden_file_byte_for_byte(name: str) -> None:
    path = GOLDEN_DIR / f"{name}.json"
    assert path.exists(), f"missing {path}; run python tests/presentation/golden_cases.py"
    assert serialize(OUTPUTS[name]) == path.read_bytes(), (
        f"{name} rendering changed; if intended, regenerate with "
        "python tests/presentation/golden_cases.py and review the diff"
    )


def test_all_seven_platforms_and_text_covered() -> None:
    assert sorted(OUTPUTS) == [
        "discord",
        "feishu",
        "line",
        "mattermost",
        "msteams",
        "slack",
        "telegram",
        "text",
    ]


def test_text_golden_matches_reference_shape() -> None:
    assert OUTPUTS["text"]["text"] == (
        "Deploy approval\n\nCanary is ready to promote.\n\nBuild 1234, staging passed.\n\n"
        "- Approve\n- Decline\n- Runbook: https://runbooks.example.test/deploy\n\n"
        "Environment:\n- Canary\n- Production"
    )
