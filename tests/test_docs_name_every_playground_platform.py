"""The README and the playground page name every platform `channelkit playground
--platform` accepts, and the page names each ingress mode of a platform that offers a
choice: a platform added to the registry cannot be left out of the first pages a person
reads (Discord once was)."""

from __future__ import annotations

import re
from pathlib import Path

from channelkit.cli import build_parser, playground_platforms
from channelkit.platforms import PLATFORMS

ROOT = Path(__file__).resolve().parents[1]
CODE = re.compile(r"`([^`]+)`")


def _default_platform() -> str:
    args = build_parser().parse_args(["playground"])
    return str(args.platform)


def _short_name(display_name: str) -> str:
    """The name the pages use: "Feishu / Lark" -> Feishu, "Weixin (WeChat iLink)" ->
    Weixin, "Microsoft Teams" -> Teams."""
    return display_name.split(" / ")[0].split(" (")[0].removeprefix("Microsoft ")


def _option_row(option: str) -> str:
    """The row of docs/playground.md's option table for ``option`` (e.g. ``--platform``)."""
    page = (ROOT / "docs" / "playground.md").read_text(encoding="utf-8")
    rows = [line for line in page.splitlines() if line.startswith(f"| `{option} ")]
    assert len(rows) == 1, f"docs/playground.md: one row for {option}, found {rows}"
    return rows[0]


def test_the_readme_offers_every_platform_the_playground_emulates() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    default = _default_platform()
    assert f"a local {PLATFORMS[default].display_name} emulator" in readme
    offered = set(re.findall(r"`--platform (\w+)`", readme))
    assert offered == set(playground_platforms()) - {default}


def test_the_readme_sorts_the_platforms_by_what_they_do() -> None:
    """Chat platforms "follow the same shape" as DingTalk; the presentation-only ones "get
    semantic message presentation"; each platform in the sentence of its kind."""
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    chat, _, rest = readme.partition(" adapters follow the same shape;")
    presentation = rest.partition(" get semantic message presentation")[0]
    chat = chat.rpartition(".")[2]
    example = PLATFORMS[_default_platform()].display_name  # the README's own example
    for spec in PLATFORMS.values():
        name = _short_name(spec.display_name)
        if spec.kind == "chat" and name != example:
            assert name in chat and name not in presentation, (name, chat, presentation)
        elif spec.kind != "chat":
            assert name in presentation and name not in chat, (name, chat, presentation)


def test_the_playground_page_lists_every_platform_and_ingress_mode() -> None:
    platform_row = _option_row("--platform")
    cells = [cell.strip() for cell in platform_row.strip().strip("|").split("|")]
    assert cells[1] == f"`{_default_platform()}`"
    assert CODE.findall(cells[2]) == playground_platforms()

    ingress_row = _option_row("--ingress")
    for name in playground_platforms():
        spec = PLATFORMS[name]
        if len(spec.ingress) < 2:
            continue
        shown = _short_name(spec.display_name)
        said = re.search(re.escape(shown) + r" ([^;|]+)", ingress_row)
        assert said is not None, f"--ingress row: no {shown}"
        assert CODE.findall(said.group(1)) == list(spec.ingress), (name, said.group(1))
        assert "(default" in said.group(1).split("`")[2], f"{name}: its default first"


def test_each_chat_platform_page_shows_how_to_try_it_on_the_playground() -> None:
    """A platform's own page (the registry's ``docs``) gives the one command that runs it
    against its emulator, and names its other ingress modes there."""
    for name in playground_platforms():
        spec = PLATFORMS[name]
        if spec.kind != "chat":
            continue
        assert spec.docs is not None, name
        page = (ROOT / "docs" / spec.docs).read_text(encoding="utf-8")
        command = f"channelkit playground --platform {name}"
        assert command in " ".join(page.split()), f"docs/{spec.docs}: no `{command}`"
        for mode in spec.ingress[1:]:
            assert f"--ingress {mode}" in " ".join(
                page.split()
            ), f"docs/{spec.docs}: the playground's --ingress {mode} is not named"
