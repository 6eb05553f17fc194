"""The repository's promises to a newcomer: two README commands, CI running the second,
every tox env CI needs, and documents that stand on their own."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.S)
    return [line.strip() for block in blocks for line in block.strip().splitlines()]


def test_readme_has_exactly_two_setup_commands() -> None:
    commands = _readme_commands()
    assert len(commands) == 2, commands
    assert "pip install" in commands[0] and "channelkit" in commands[0]
    assert "pip install" in commands[1] and "tox" in commands[1]


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    test_command = _readme_commands()[1]
    assert test_command in ci


def test_pyproject_holds_only_the_build_system_table() -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    tables = re.findall(r"^\[([^\]]+)\]", text, flags=re.M)
    assert tables == ["build-system"]


def test_tox_declares_every_required_env() -> None:
    text = (ROOT / "tox.ini").read_text(encoding="utf-8")
    env_list = re.search(r"^env_list\s*=\s*(.+)$", text, flags=re.M)
    assert env_list is not None
    envs = {e.strip() for e in env_list.group(1).split(",")}
    required = {
        "py310",
        "py311",
        "py312",
        "py313",
        "lint",
        "type",
        "codegen-check",
        "docs",
        "package",
    }
    assert required <= envs
    sections = set(re.findall(r"^\[testenv:([^\]]+)\]", text, flags=re.M))
    assert required - {"py310", "py311", "py312", "py313"} <= sections


# A citation of a design document kept outside the repository: "seed 000", "seeds 003/004",
# "seed-001", "seeds/...". A random seed ("seed=0", "random.seed(7)") is not one.
EXTERNAL_DOCUMENT = re.compile(r"\bseeds?[ _-]?0\d\d\b|\bseeds?/|\bseed documents?\b", re.I)
TEXT_SUFFIXES = {".md", ".py", ".pyi", ".txt", ".html", ".js", ".css", ".json", ".toml"}


def _documents() -> list[Path]:
    top = [ROOT / name for name in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md", "SECURITY.md")]
    docs = sorted((ROOT / "docs").rglob("*.md"))
    sdk = sorted(p for p in (ROOT / "sdk" / "channelkit").rglob("*") if p.suffix in TEXT_SUFFIXES)
    tests_markdown = sorted((ROOT / "tests").rglob("*.md"))
    return [p for p in (*top, *docs, *sdk, *tests_markdown) if p.is_file()]


def test_external_document_pattern_tells_citations_from_random_seeds() -> None:
    for cited in ("seed 000", 'Seed 001 "DingTalk"', "seeds 003/004", "seed-002", "seeds/000"):
        assert EXTERNAL_DOCUMENT.search(cited), cited
    for fine in ("random.seed(0)", "seed=0", "for seed in range(200)", "PYTHONHASHSEED = 0"):
        assert not EXTERNAL_DOCUMENT.search(fine), fine


def test_no_document_cites_external_design_documents() -> None:
    documents = _documents()
    assert ROOT / "docs" / "core.md" in documents
    assert ROOT / "tests" / "core" / "ACCEPTANCE.md" in documents
    citing = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in documents
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if EXTERNAL_DOCUMENT.search(line)
    ]
    assert citing == [], "state the behaviour instead of citing:\n" + "\n".join(citing)


def test_readme_links_are_absolute() -> None:
    # README.md is also the package's PyPI page, where a relative link leads nowhere.
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    targets += re.findall(r"^\[[^\]]+\]:\s*(\S+)", text, flags=re.M)
    targets += re.findall(r"""(?:href|src)=["']([^"']+)["']""", text)
    assert targets, "README.md links somewhere"
    relative = [t for t in targets if not t.startswith("https://")]
    assert relative == [], f"README.md links must be absolute https:// URLs: {relative}"


def test_readme_states_the_packaged_version() -> None:
    setup = (ROOT / "setup.py").read_text(encoding="utf-8")
    packaged = re.search(r"""\bversion\s*=\s*["']([^"']+)["']""", setup)
    assert packaged is not None
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    stated = re.findall(r"\bVersion (\d+\.\d+\.\d+\S*)", readme)
    assert stated == [packaged.group(1)], (stated, packaged.group(1))
    import channelkit

    assert channelkit.__version__ == packaged.group(1)


def test_changelog_follows_keep_a_changelog() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, flags=re.M)
    assert headings[0] == "[Unreleased]", headings
    setup = (ROOT / "setup.py").read_text(encoding="utf-8")
    packaged = re.search(r"""\bversion\s*=\s*["']([^"']+)["']""", setup)
    assert packaged is not None
    released = [re.fullmatch(r"\[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})", h) for h in headings[1:]]
    assert released and all(released), f"a release heading is '## [x.y.z] - YYYY-MM-DD': {headings}"
    versions = [m.group(1) for m in released if m]
    assert packaged.group(1) in versions
    dates = [m.group(2) for m in released if m]
    assert dates == sorted(dates, reverse=True), "newest release first"
    for name in ("Unreleased", *versions):
        assert re.search(rf"^\[{re.escape(name)}\]: https://", text, flags=re.M), name
    kinds = set(re.findall(r"^### (.+)$", text, flags=re.M))
    assert kinds <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, kinds
