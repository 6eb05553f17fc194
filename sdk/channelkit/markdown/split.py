"""Splitting a document into parts that each render within a limit.

Splitting works on the intermediate form, never on rendered text: a part is a run of
whole blocks, and a block longer than the limit is split into smaller blocks of the
same kind (a paragraph at word breaks, a code block at line breaks with its fence
reopened, a list between items, a table between rows with its header repeated). So
no part ever ends inside a tag, an entity or a code fence, and a cut inside a word
(only for a word longer than the limit) falls on a grapheme-cluster boundary.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from channelkit.markdown.nodes import (
    Block,
    Bold,
    Code,
    CodeBlock,
    Document,
    Heading,
    Inline,
    Italic,
    LineBreak,
    Link,
    ListBlock,
    Paragraph,
    Quote,
    Strike,
    Table,
    Text,
)
from channelkit.markdown.render import Renderer
from channelkit.markdown.text import safe_cut

__all__ = ["MIN_LIMIT", "split_document", "split_rendered"]

#: The smallest limit a document can be split to.
MIN_LIMIT = 64
_SEPARATOR = 2  # "\n\n" between blocks
_WORDS = re.compile(r"\S+\s*|\s+")
_PLAIN = Renderer()


def split_document(document: Document, renderer: Renderer, limit: int) -> list[Document]:
    """``document`` as parts whose rendering by ``renderer`` is at most ``limit``
    characters each, in order; ``[]`` for an empty document."""
    return [Document(tuple(b for b, _ in part)) for part in _parts(document, renderer, limit)]


def split_rendered(document: Document, renderer: Renderer, limit: int) -> list[str]:
    """The rendering of each part of `split_document()` (each block rendered once)."""
    return ["\n\n".join(text for _, text in part) for part in _parts(document, renderer, limit)]


def _parts(document: Document, renderer: Renderer, limit: int) -> list[list[tuple[Block, str]]]:
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < MIN_LIMIT:
        raise ValueError(f"limit: expected an int of at least {MIN_LIMIT}, got {limit!r}")
    parts: list[list[tuple[Block, str]]] = []
    current: list[tuple[Block, str]] = []
    size = 0
    for block in document.blocks:
        rendered = renderer.block(block)
        pieces = (
            [(block, rendered)]
            if len(rendered) <= limit
            else [(piece, renderer.block(piece)) for piece in _fit(renderer, block, limit)]
        )
        for piece, text in pieces:
            if current and size + _SEPARATOR + len(text) > limit:
                parts.append(current)
                current, size = [], 0
            size += len(text) + (_SEPARATOR if current else 0)
            current.append((piece, text))
    if current:
        parts.append(current)
    return parts


def _fit(renderer: Renderer, block: Block, limit: int) -> list[Block]:
    """``block`` as blocks that each render within ``limit``."""
    if len(renderer.block(block)) <= limit:
        return [block]
    if isinstance(block, Paragraph):
        return [Paragraph(p) for p in _split_inlines(renderer, block.inlines, limit, Paragraph)]
    if isinstance(block, Heading):
        level = block.level
        return [
            Heading(level, p)
            for p in _split_inlines(renderer, block.inlines, limit, lambda i: Heading(level, i))
        ]
    if isinstance(block, CodeBlock):
        return _split_code(renderer, block, limit)
    pieces: list[Block] = []
    if isinstance(block, ListBlock):
        for number, item in enumerate(block.items, start=block.start):
            whole = ListBlock(block.ordered, number, (item,))
            if len(renderer.block(whole)) <= limit:
                pieces.append(whole)
                continue
            for inner in item:
                for sub in _fit(renderer, inner, limit - 16):
                    pieces.append(ListBlock(block.ordered, number, ((sub,),)))
        pieces = _grouped_items(renderer, pieces, limit)
    elif isinstance(block, Quote):
        for inner in block.blocks:
            pieces.extend(Quote((sub,)) for sub in _fit(renderer, inner, limit - 16))
    elif isinstance(block, Table):
        pieces = _split_rows(renderer, block, limit)
    out: list[Block] = []
    for piece in pieces or [block]:
        if len(renderer.block(piece)) <= limit:
            out.append(piece)
        else:  # still too long (deep nesting): its plain text, split as a paragraph
            out.extend(_fit(renderer, _as_paragraph(piece), limit))
    return out


def _grouped_items(renderer: Renderer, pieces: list[Block], limit: int) -> list[Block]:
    """Consecutive one-item lists merged back while they fit (fewer, fuller parts). A
    list renders as its items' renderings joined by line breaks (each item numbered on
    its own), so the merged length is the sum: no list is rendered twice."""
    out: list[Block] = []
    sizes: list[int] = []
    for piece in pieces:
        size = len(renderer.block(piece))
        previous = out[-1] if out else None
        if (
            isinstance(previous, ListBlock)
            and isinstance(piece, ListBlock)
            and previous.ordered == piece.ordered
            and previous.start + len(previous.items) == piece.start
            and sizes[-1] + 1 + size <= limit
        ):
            out[-1] = ListBlock(previous.ordered, previous.start, previous.items + piece.items)
            sizes[-1] += 1 + size
            continue
        out.append(piece)
        sizes.append(size)
    return out


def _split_rows(renderer: Renderer, table: Table, limit: int) -> list[Block]:
    pieces: list[Block] = []
    rows: list[tuple[tuple[Inline, ...], ...]] = []
    for row in table.rows:
        candidate = Table(table.header, (*rows, row), table.align)
        if rows and len(renderer.block(candidate)) > limit:
            pieces.append(Table(table.header, tuple(rows), table.align))
            rows = [row]
        else:
            rows.append(row)
    if rows:
        pieces.append(Table(table.header, tuple(rows), table.align))
    return pieces


def _as_paragraph(block: Block) -> Paragraph:
    lines = _PLAIN.block(block).split("\n")
    inlines: list[Inline] = []
    for index, line in enumerate(lines):
        if index:
            inlines.append(LineBreak())
        if line:
            inlines.append(Text(line))
    return Paragraph(tuple(inlines))


# -- code blocks ----------------------------------------------------------------------


def _split_code(renderer: Renderer, block: CodeBlock, limit: int) -> list[Block]:
    """Code blocks of at most ``limit`` rendered characters, cut between lines (a line
    longer than a whole block is cut on a grapheme boundary); each reopens the fence."""

    def size(code: str) -> int:
        return len(renderer.block(CodeBlock(code, block.language)))

    overhead = size("")
    budget = limit - overhead
    lines: list[str] = []
    for line in block.code.split("\n"):
        while len(renderer.escape_code(line)) > budget:
            cut = _longest_prefix(line, lambda s: len(renderer.escape_code(s)) <= budget)
            lines.append(line[:cut])
            line = line[cut:]
        lines.append(line)
    out: list[Block] = []
    chunk: list[str] = []
    used = 0
    for line in lines:
        cost = len(renderer.escape_code(line)) + (1 if chunk else 0)
        if chunk and used + cost > budget:
            out.append(CodeBlock("\n".join(chunk), block.language))
            chunk, used = [], 0
            cost = len(renderer.escape_code(line))
        chunk.append(line)
        used += cost
    if chunk:
        out.append(CodeBlock("\n".join(chunk), block.language))
    return out


def _longest_prefix(text: str, fits: Callable[[str], bool]) -> int:
    """The longest grapheme-safe prefix length of ``text`` that ``fits`` (at least one
    cluster)."""
    low, high = 1, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if fits(text[: safe_cut(text, middle)]):
            low = middle
        else:
            high = middle - 1
    return safe_cut(text, low)


# -- paragraphs -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Atom:
    """A word (with its trailing space), a code word or a line break, with the styles
    around it, outermost first (``"b"``, ``"i"``, ``"s"`` or a link's href)."""

    kind: str  # "text" | "code" | "break"
    text: str
    styles: tuple[str, ...]


def _atoms(inlines: Sequence[Inline], styles: tuple[str, ...] = ()) -> list[_Atom]:
    out: list[_Atom] = []
    for node in inlines:
        if isinstance(node, Text):
            out.extend(_Atom("text", w, styles) for w in _WORDS.findall(node.text))
        elif isinstance(node, Code):
            out.extend(_Atom("code", w, styles) for w in _WORDS.findall(node.text))
        elif isinstance(node, LineBreak):
            out.append(_Atom("break", "\n", styles))
        elif isinstance(node, Bold):
            out.extend(_atoms(node.children, (*styles, "b")))
        elif isinstance(node, Italic):
            out.extend(_atoms(node.children, (*styles, "i")))
        elif isinstance(node, Strike):
            out.extend(_atoms(node.children, (*styles, "s")))
        else:
            out.extend(_atoms(node.children, (*styles, "a" + node.href)))
    return out


def _rebuild(atoms: Sequence[_Atom]) -> tuple[Inline, ...]:
    """Inlines from atoms: consecutive atoms of one kind and style merged."""
    out: list[Inline] = []
    index = 0
    while index < len(atoms):
        first = atoms[index]
        end = index + 1
        while end < len(atoms) and (atoms[end].kind, atoms[end].styles) == (
            first.kind,
            first.styles,
        ):
            end += 1
        text = "".join(a.text for a in atoms[index:end])
        node: Inline
        if first.kind == "break":
            node = LineBreak()
        elif first.kind == "code":
            node = Code(text)
        else:
            node = Text(text)
        nodes: tuple[Inline, ...] = (
            (node,) if first.kind != "break" else tuple(LineBreak() for _ in range(end - index))
        )
        for style in reversed(first.styles):
            if style == "b":
                nodes = (Bold(nodes),)
            elif style == "i":
                nodes = (Italic(nodes),)
            elif style == "s":
                nodes = (Strike(nodes),)
            else:
                nodes = (Link(style[1:], nodes),)
        out.extend(nodes)
        index = end
    return tuple(out)


def _trim(atoms: list[_Atom]) -> list[_Atom]:
    while atoms and (atoms[0].kind == "break" or not atoms[0].text.strip()):
        atoms = atoms[1:]
    while atoms and (atoms[-1].kind == "break" or not atoms[-1].text.strip()):
        atoms = atoms[:-1]
    return atoms


def _split_inlines(
    renderer: Renderer,
    inlines: Sequence[Inline],
    limit: int,
    wrap: Callable[[tuple[Inline, ...]], Block],
) -> list[tuple[Inline, ...]]:
    """``inlines`` as runs whose block (``wrap(run)``) renders within ``limit``."""

    def size(atoms: Sequence[_Atom]) -> int:
        return len(renderer.block(wrap(_rebuild(atoms))))

    budget = limit - size([]) - 8  # the wrapper, and a line-start escape or two
    atoms: list[_Atom] = []
    for atom in _atoms(inlines):
        atoms.extend(_cut_atom(atom, size, budget))
    runs: list[tuple[Inline, ...]] = []
    chunk: list[_Atom] = []
    used = 0
    for atom in atoms:
        cost = size([atom]) - size([])
        if chunk and used + cost > budget:
            # cut at the last line break when it leaves the part at least half full
            breaks = [i for i, a in enumerate(chunk) if a.kind == "break"]
            keep = breaks[-1] if breaks and breaks[-1] >= len(chunk) // 2 else len(chunk)
            runs.extend(_settle(chunk[:keep], size, limit))
            chunk = chunk[keep:]
            used = sum(size([a]) - size([]) for a in chunk)
        chunk.append(atom)
        used += cost
    if chunk:
        runs.extend(_settle(chunk, size, limit))
    return runs


def _cut_atom(atom: _Atom, size: Callable[[Sequence[_Atom]], int], budget: int) -> list[_Atom]:
    """``atom`` cut on grapheme boundaries into atoms that each fit ``budget``."""
    out: list[_Atom] = []
    text = atom.text

    def fits(piece: str) -> bool:
        return size([_Atom(atom.kind, piece, atom.styles)]) <= budget

    while len(text) > 1 and not fits(text):
        cut = _longest_prefix(text, fits)
        out.append(_Atom(atom.kind, text[:cut], atom.styles))
        text = text[cut:]
    out.append(_Atom(atom.kind, text, atom.styles))
    return out


def _settle(
    chunk: list[_Atom], size: Callable[[Sequence[_Atom]], int], limit: int
) -> list[tuple[Inline, ...]]:
    """The chunk's runs: normally one; split again from the end when merging and
    escaping made it longer than the estimate."""
    out: list[tuple[Inline, ...]] = []
    rest = _trim(chunk)
    while rest:
        end = len(rest)
        while end > 1 and size(_trim(rest[:end])) > limit:
            end -= 1
        head = _trim(rest[:end])
        if head:
            out.append(_rebuild(head))
        rest = _trim(rest[end:])
    return out
