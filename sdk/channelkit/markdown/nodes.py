"""The intermediate form every renderer reads: a Markdown document as typed blocks
and inlines (frozen dataclasses, no parser objects). `channelkit.markdown.parse()`
builds it once; each dialect renders it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "Block",
    "Bold",
    "Cell",
    "Code",
    "CodeBlock",
    "Document",
    "Heading",
    "Inline",
    "Italic",
    "LineBreak",
    "Link",
    "ListBlock",
    "Paragraph",
    "Quote",
    "Rule",
    "Strike",
    "Table",
    "Text",
]


@dataclass(frozen=True)
class Text:
    """Literal text (the renderer escapes it)."""

    text: str


@dataclass(frozen=True)
class Code:
    """Inline code: shown verbatim, never formatted."""

    text: str


@dataclass(frozen=True)
class LineBreak:
    """A line break inside a paragraph (chat platforms show the agent's line breaks)."""


@dataclass(frozen=True)
class Bold:
    """Strong emphasis."""

    children: tuple[Inline, ...]


@dataclass(frozen=True)
class Italic:
    """Emphasis."""

    children: tuple[Inline, ...]


@dataclass(frozen=True)
class Strike:
    """Strikethrough (``~~text~~``)."""

    children: tuple[Inline, ...]


@dataclass(frozen=True)
class Link:
    """A link to ``href`` (http, https or mailto only; others stay text)."""

    href: str
    children: tuple[Inline, ...]


Inline = Text | Code | LineBreak | Bold | Italic | Strike | Link
#: One table cell: its inlines.
Cell = tuple[Inline, ...]


@dataclass(frozen=True)
class Heading:
    """A heading of ``level`` 1-6."""

    level: int
    inlines: tuple[Inline, ...]


@dataclass(frozen=True)
class Paragraph:
    """A paragraph."""

    inlines: tuple[Inline, ...]


@dataclass(frozen=True)
class CodeBlock:
    """A fenced (or indented) code block; ``language`` is the fence's info word or ``""``."""

    code: str
    language: str = ""


@dataclass(frozen=True)
class ListBlock:
    """A bullet list, or an ordered list numbered from ``start``; each item is a
    sequence of blocks (nested lists are blocks of an item)."""

    ordered: bool
    start: int
    items: tuple[tuple[Block, ...], ...]


@dataclass(frozen=True)
class Quote:
    """A block quote."""

    blocks: tuple[Block, ...]


@dataclass(frozen=True)
class Table:
    """A GFM table: the header cells, the body rows and each column's alignment."""

    header: tuple[Cell, ...]
    rows: tuple[tuple[Cell, ...], ...]
    align: tuple[Literal["left", "right", "center", ""], ...]


@dataclass(frozen=True)
class Rule:
    """A thematic break (``---``)."""


Block = Heading | Paragraph | CodeBlock | ListBlock | Quote | Table | Rule


@dataclass(frozen=True)
class Document:
    """A parsed Markdown text: its blocks in order."""

    blocks: tuple[Block, ...]
