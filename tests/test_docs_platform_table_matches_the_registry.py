"""The platform table of docs/platforms/index.md lists exactly the registered platforms,
in registry order, with their name, kind, ingress modes (default first), capabilities and
page; the capability legend and the documentation navigation agree with the registry."""

from __future__ import annotations

import re
from pathlib import Path

from channelkit.platforms import CAPABILITIES, PLATFORMS

ROOT = Path(__file__).resolve().parents[1]
INDEX = ROOT / "docs" / "platforms" / "index.md"
CODE = re.compile(r"`([^`]+)`")
LINK = re.compile(r"^\[([^\]]+)\]\(([^)]+)\)$")


def _table(text: str, header: str) -> list[list[str]]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def test_the_platform_table_lists_every_registered_platform() -> None:
    rows = _table(INDEX.read_text(encoding="utf-8"), "| platform |")
    assert [CODE.findall(row[1]) for row in rows] == [[name] for name in PLATFORMS]
    for row in rows:
        (name,) = CODE.findall(row[1])
        spec = PLATFORMS[name]
        link = LINK.match(row[0])
        assert link is not None, row
        assert link.group(1) == spec.display_name
        assert f"platforms/{link.group(2)}" == spec.docs
        assert (ROOT / "docs" / spec.docs).is_file()
        assert row[2] == spec.kind
        assert tuple(CODE.findall(row[3])) == spec.ingress, (name, row[3])
        listed = [c.strip() for c in row[4].split(",") if c.strip() not in ("", "—")]
        assert set(listed) == spec.capabilities, name
        assert listed == [c for c in CAPABILITIES if c in spec.capabilities], name


def test_the_capability_legend_is_the_registry_vocabulary() -> None:
    rows = _table(INDEX.read_text(encoding="utf-8"), "| capability |")
    assert [row[0] for row in rows] == list(CAPABILITIES)


def test_the_navigation_has_a_page_for_every_registered_platform() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for spec in PLATFORMS.values():
        assert f": {spec.docs}\n" in nav, spec.docs
    assert ": platforms/index.md\n" in nav


def test_the_configuration_reference_documents_every_chat_platform() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    row = next(line for line in page.splitlines() if line.startswith("| `platform` |"))
    chat = [name for name, spec in PLATFORMS.items() if spec.is_chat]
    assert sorted(CODE.findall(row.split("|")[2])) == sorted(f'"{n}"' for n in chat)
    for name in chat:
        assert f'(`platform: "{name}"`)\n' in page, name
        schema = PLATFORMS[name].credentials_schema
        assert schema is not None
        section = page.split(f'(`platform: "{name}"`)', 1)[1].split("\n### ", 1)[0]
        section = section.split("\n## ", 1)[0]
        for key in schema["properties"]:
            assert f"`{key}`" in section, (name, key)
