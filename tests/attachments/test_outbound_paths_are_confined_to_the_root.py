"""A file an agent sends must lie inside the allowed root; anything else is refused
before it is opened."""

from __future__ import annotations

import builtins
import hashlib
import io
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from channelkit.attachments import confine
from channelkit.errors import AttachmentRefused, AttachmentTooLarge


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "out").mkdir()
    (folder / "out" / "chart.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"p" * 1000)
    (tmp_path / "secret.txt").write_text("do not send")
    return folder


@pytest.fixture
def no_open(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every way to open a file fails the test (and is recorded)."""
    opened: list[str] = []

    def refuse(*args: object, **kwargs: object) -> None:
        opened.append(str(args[0]) if args else "?")
        raise AssertionError(f"opened {args[0] if args else '?'}")

    for target, attribute in ((builtins, "open"), (io, "open"), (os, "open"), (Path, "open")):
        monkeypatch.setattr(target, attribute, refuse)
    yield opened


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        ("../secret.txt", "'..'"),
        ("out/../../secret.txt", "'..'"),
        ("out/..", "'..'"),
    ],
)
def test_a_dotdot_path_is_refused_without_opening_it(
    root: Path, no_open: list[str], given: str, reason: str
) -> None:
    with pytest.raises(AttachmentRefused, match=reason):
        confine(given, root)
    assert no_open == []


def test_an_absolute_path_outside_the_root_is_refused_without_opening_it(
    root: Path, no_open: list[str]
) -> None:
    with pytest.raises(AttachmentRefused, match="outside the allowed root") as caught:
        confine(root.parent / "secret.txt", root)
    assert caught.value.name == "secret.txt"
    with pytest.raises(AttachmentRefused, match="outside"):
        confine("/etc/passwd", root)
    assert no_open == []


def test_a_symlink_escaping_the_root_is_refused_without_opening_it(
    root: Path, no_open: list[str]
) -> None:
    (root / "out" / "innocent.txt").symlink_to(root.parent / "secret.txt")
    (root / "linkdir").symlink_to(root.parent)
    with pytest.raises(AttachmentRefused, match="outside"):
        confine("out/innocent.txt", root)
    with pytest.raises(AttachmentRefused, match="outside"):
        confine("linkdir/secret.txt", root)
    assert no_open == []


def test_a_directory_a_missing_file_and_an_oversized_file_are_refused_unread(
    root: Path, no_open: list[str]
) -> None:
    with pytest.raises(AttachmentRefused, match="not a regular file"):
        confine("out", root)
    with pytest.raises(AttachmentRefused, match="cannot be read"):
        confine("out/missing.png", root)
    with pytest.raises(AttachmentTooLarge) as caught:
        confine("out/chart.png", root, max_size=100)
    assert (caught.value.limit, caught.value.size) == (100, 1008)
    assert no_open == []


def test_a_file_inside_the_root_is_accepted_and_read(root: Path) -> None:
    data = (root / "out" / "chart.png").read_bytes()
    by_relative = confine("out/chart.png", root, name="../Q3 chart.png")
    by_absolute = confine(root / "out" / "chart.png", root)
    assert by_relative.path == by_absolute.path == (root / "out" / "chart.png").resolve()
    assert by_relative.name == "Q3 chart.png" and by_absolute.name == "chart.png"
    assert by_relative.size == len(data)
    assert by_relative.read_bytes() == data
    assert b"".join(by_relative.chunks(100)) == data
    assert by_relative.content_type() == "image/png"
    with by_absolute.open() as fh:
        assert hashlib.sha256(fh.read()).digest() == hashlib.sha256(data).digest()


def test_a_symlink_inside_the_root_is_followed(root: Path) -> None:
    (root / "latest.png").symlink_to(root / "out" / "chart.png")
    checked = confine("latest.png", root)
    assert checked.path == (root / "out" / "chart.png").resolve()


def test_a_file_swapped_after_the_check_is_refused_on_read(root: Path, tmp_path: Path) -> None:
    checked = confine("out/chart.png", root)
    (root / "out" / "chart.png").unlink()
    (root / "out" / "chart.png").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(AttachmentRefused):
        checked.read_bytes()


def test_the_open_guard_sees_a_read(root: Path, no_open: list[str]) -> None:
    checked = confine("out/chart.png", root)  # accepted: checked by stat alone
    with pytest.raises(AssertionError, match="opened"):
        checked.read_bytes()
    assert no_open == [str(checked.path)]
