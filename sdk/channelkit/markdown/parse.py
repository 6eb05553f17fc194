"""Markdown text -> `Document`, through markdown-it-py (CommonMark with GFM tables and
strikethrough; raw HTML is text). `close_open_markdown()` closes what a text cut
mid-stream leaves open, for previews."""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, cast

from cachetools import LRUCache

from channelkit.markdown.nodes import (
    Block,
    Bold,
    Cell,
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
    Rule,
    Strike,
    Table,
    Text,
)

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

__all__ = ["close_open_markdown", "looks_plain", "parse"]

_parser: MarkdownIt | None = None
_parser_lock = threading.Lock()


def _markdown_it() -> MarkdownIt:
    """The shared parser, built on first use (importing markdown-it-py costs tens of
    milliseconds; a process that never renders Markdown never pays it)."""
    global _parser
    with _parser_lock:
        if _parser is None:
            from markdown_it import MarkdownIt

            md = MarkdownIt("commonmark", {"html": False})
            _parser = md.enable(["table", "strikethrough"])
        return _parser


_SAFE_SCHEMES = ("http://", "https://", "mailto:")
_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_TRAILING_DELIMITERS = re.compile(r"[*_~`]+$")
# anything that may be Markdown or need escaping in some dialect
_MAYBE_MARKUP = re.compile(
    r"[*_~`#>|\[\]<&\\=]|^[ \t]*(?:[-+]|\d+[.)])(?:[ \t]|$)|^(?: {4}| {0,3}\t)|^[ \t]*-{2,}",
    re.MULTILINE,
)


def looks_plain(text: str) -> bool:
    """True when ``text`` certainly has no Markdown and nothing any dialect escapes
    (no ``*_~`#>|[]<&\\=``, no list marker, rule or indented code at a line start):
    every dialect would show it as written, so a caller may skip rendering."""
    return _MAYBE_MARKUP.search(text) is None


#: A preview's settled head shorter than this is parsed again each time (cheap enough).
MIN_CACHED_HEAD = 1_024
#: Settled heads of previews whose blocks are kept (the newest).
MAX_CACHED_HEADS = 64
_heads: LRUCache[str, tuple[Block, ...]] = LRUCache(maxsize=MAX_CACHED_HEADS)
_heads_lock = threading.Lock()
_OPENS_INDEPENDENT = re.compile(r"[^\s\-+*>\d]|\d+[^\d.)]|\d+$")


def _settled_head(text: str) -> int:
    """Where the last independent section of ``text`` starts (0: none): after a blank
    line outside a code fence, followed by a line that cannot continue what came before
    (not indented, not a list item or quote). The blocks before it never change as the
    text grows, so a preview parses them once."""
    fence: str | None = None
    blank = False
    offset = head = 0
    for line in text.split("\n"):
        match = _FENCE_LINE.match(line)
        if fence is None:
            if blank and line and _OPENS_INDEPENDENT.match(line):
                head = offset
            if match and not (match.group(1)[0] == "`" and "`" in match.group(2)):
                fence = match.group(1)
        elif match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
            if not match.group(2).strip():
                fence = None
        blank = fence is None and not line.strip()
        offset += len(line) + 1
    return head


def _head_blocks(head: str) -> tuple[Block, ...]:
    """The blocks of a settled head: from the cache, else the longest cached head it
    starts with (a settled boundary stays settled as the text grows) plus the parsed
    rest."""
    with _heads_lock:
        blocks = _heads.get(head)
        if blocks is not None:
            return blocks
        known = max((k for k in _heads if head.startswith(k)), key=len, default="")
        start = _heads[known] if known else ()
    rest = _blocks(_markdown_it().parse(head[len(known) :].replace("\x00", "\ufffd")), 0, None)
    blocks = start + tuple(rest[0])
    with _heads_lock:
        _heads[head] = blocks
    return blocks


def parse(text: str, *, preview: bool = False) -> Document:
    """Parse the agent's Markdown ``text`` once into the intermediate `Document`.

    ``preview=True`` reads ``text`` as a stream cut anywhere: an open code fence, an
    open ``**``, ``*``, ``_``, ``~~`` or code span, and a link whose target is still
    being written are closed first (`close_open_markdown()`), so a preview shows
    formatting instead of raw markers. A long stream's settled head (the blocks before
    its last blank line that nothing later can change) is parsed once and kept (the
    newest `MAX_CACHED_HEADS`), so each preview parses only the growing tail.
    """
    if not isinstance(text, str):
        raise TypeError(f"text: expected str, got {type(text).__name__}")
    if preview:
        cut = _settled_head(text)
        if cut >= MIN_CACHED_HEAD:  # a long stream: its settled head is parsed once
            tail = parse(close_open_markdown(text[cut:]))
            return Document(_head_blocks(text[:cut]) + tail.blocks)
        text = close_open_markdown(text)
    tokens = _markdown_it().parse(text.replace("\x00", "\ufffd"))
    blocks, _ = _blocks(tokens, 0, None)
    return Document(tuple(blocks))


# -- preview closing ------------------------------------------------------------------


def close_open_markdown(text: str) -> str:
    """``text`` with the constructs a mid-stream cut left open closed.

    An open code fence gets its closing fence. Outside a fence, the last paragraph's
    open ``**``/``__``/``*``/``_``/``~~`` and code spans get their closers (innermost
    first), a link target being written gets its ``)``, and a trailing run of
    delimiters that opens nothing yet (``"see **"``) is dropped.
    """
    lines = text.split("\n")
    fence: str | None = None
    start = 0  # first line of the last paragraph
    for index, line in enumerate(lines):
        match = _FENCE_LINE.match(line)
        if fence is None:
            if match and not (match.group(1)[0] == "`" and "`" in match.group(2)):
                fence = match.group(1)
            elif not line.strip():
                start = index + 1
        elif (
            match
            and match.group(1)[0] == fence[0]
            and len(match.group(1)) >= len(fence)
            and not match.group(2).strip()
        ):
            fence = None
            start = index + 1
    if fence is not None:
        return text + ("" if text.endswith("\n") else "\n") + fence
    head = "\n".join(lines[:start])
    tail = "\n".join(lines[start:]).rstrip()
    tail = _TRAILING_DELIMITERS.sub("", tail).rstrip()
    closers = _open_inline(tail)
    return (head + "\n" if start else "") + tail + closers


def _open_inline(text: str) -> str:
    """The closers of ``text``'s open inline constructs, innermost first."""
    stack: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if stack and stack[-1].startswith("`"):
            if char == "`":
                run = _run(text, i)
                if run == len(stack[-1]):
                    stack.pop()
                i += run
            else:
                i += 1
            continue
        if stack and stack[-1] == "](":
            if char == ")" or char.isspace():  # a space: not a link target after all
                stack.pop()
            i += 1
            continue
        if char == "`":
            run = _run(text, i)
            stack.append("`" * run)
            i += run
            continue
        if char == "[":
            stack.append("[")
        elif char == "]":
            if "[" in stack:
                while stack[-1] != "[":
                    stack.pop()
                stack.pop()
                if text.startswith("](", i):
                    stack.append("](")
                    i += 2
                    continue
        elif char in "*_~":
            run = _run(text, i)
            before = text[i - 1] if i else " "
            after = text[i + run] if i + run < n else " "
            can_close = not before.isspace()
            can_open = not after.isspace()
            if char == "_":
                can_open = can_open and not before.isalnum()
                can_close = can_close and not after.isalnum()
            left = run
            if char == "~":
                left = run if run == 2 else 0
            while can_close and left and stack:
                top = stack[-1]
                if top == char * 2 and left >= 2:
                    stack.pop()
                    left -= 2
                elif top == char and char != "~":
                    stack.pop()
                    left -= 1
                else:
                    break
            if can_open and left:
                if left % 2:
                    stack.append(char)
                if left >= 2:
                    stack.append(char * 2)
            i += run
            continue
        i += 1
    closers = []
    for opened in reversed(stack):
        if opened == "[":
            continue
        closers.append(")" if opened == "](" else opened)
    return "".join(closers)


def _run(text: str, index: int) -> int:
    end = index
    while end < len(text) and text[end] == text[index]:
        end += 1
    return end - index


# -- tokens -> blocks -----------------------------------------------------------------


def _blocks(tokens: Sequence[Token], i: int, close: str | None) -> tuple[list[Block], int]:
    """Blocks from ``tokens[i:]`` up to the token of type ``close`` (consumed)."""
    blocks: list[Block] = []
    n = len(tokens)
    while i < n:
        token = tokens[i]
        kind = token.type
        if kind == close:
            return blocks, i + 1
        if kind == "heading_open":
            level = int(token.tag[1:]) if token.tag[1:].isdigit() else 1
            blocks.append(Heading(level, _inlines(tokens[i + 1].children or [])))
            i += 3
        elif kind == "paragraph_open":
            inlines = _inlines(tokens[i + 1].children or [])
            if inlines:
                blocks.append(Paragraph(inlines))
            i += 3
        elif kind in ("fence", "code_block"):
            info = token.info.strip().split()
            blocks.append(CodeBlock(token.content.rstrip("\n"), info[0] if info else ""))
            i += 1
        elif kind in ("bullet_list_open", "ordered_list_open"):
            ordered = kind == "ordered_list_open"
            start = int(token.attrGet("start") or 1) if ordered else 1
            end_kind = kind.replace("_open", "_close")
            items: list[tuple[Block, ...]] = []
            i += 1
            while tokens[i].type != end_kind:
                item, i = _blocks(tokens, i + 1, "list_item_close")
                items.append(tuple(item))
            blocks.append(ListBlock(ordered, start, tuple(items)))
            i += 1
        elif kind == "blockquote_open":
            inner, i = _blocks(tokens, i + 1, "blockquote_close")
            blocks.append(Quote(tuple(inner)))
        elif kind == "table_open":
            table, i = _table(tokens, i + 1)
            blocks.append(table)
        elif kind == "hr":
            blocks.append(Rule())
            i += 1
        elif kind == "html_block":
            blocks.append(Paragraph((Text(token.content.rstrip("\n")),)))
            i += 1
        else:
            i += 1
    return blocks, i


def _table(tokens: Sequence[Token], i: int) -> tuple[Table, int]:
    header: list[Cell] = []
    rows: list[tuple[Cell, ...]] = []
    align: list[Literal["left", "right", "center", ""]] = []
    row: list[Cell] = []
    in_head = False
    while tokens[i].type != "table_close":
        token = tokens[i]
        if token.type == "thead_open":
            in_head = True
        elif token.type == "thead_close":
            in_head = False
        elif token.type == "tr_open":
            row = []
        elif token.type == "tr_close":
            if in_head:
                header = row
            else:
                rows.append(tuple(row))
        elif token.type in ("th_open", "td_open"):
            if in_head:
                style = str(token.attrGet("style") or "")
                side = style.rpartition(":")[2]
                align.append(
                    cast(Literal["left", "right", "center", ""], side)
                    if side in ("left", "right", "center")
                    else ""
                )
            row.append(_inlines(tokens[i + 1].children or []))
            i += 2
        i += 1
    width = len(header)
    body = tuple(tuple(r[:width]) + ((),) * (width - len(r)) for r in rows)
    return Table(tuple(header), body, tuple(align)), i + 1


def _inlines(tokens: Sequence[Token]) -> tuple[Inline, ...]:
    out, _ = _inline_run(tokens, 0, None)
    return tuple(out)


def _inline_run(tokens: Sequence[Token], i: int, close: str | None) -> tuple[list[Inline], int]:
    out: list[Inline] = []
    n = len(tokens)
    while i < n:
        token = tokens[i]
        kind = token.type
        if kind == close:
            return out, i + 1
        if kind == "text":
            if out and isinstance(out[-1], Text):
                out[-1] = Text(out[-1].text + token.content)
            else:
                out.append(Text(token.content))
        elif kind == "code_inline":
            out.append(Code(token.content))
        elif kind in ("softbreak", "hardbreak"):
            out.append(LineBreak())
        elif kind == "strong_open":
            inner, i = _inline_run(tokens, i + 1, "strong_close")
            out.append(Bold(tuple(inner)))
            continue
        elif kind == "em_open":
            inner, i = _inline_run(tokens, i + 1, "em_close")
            out.append(Italic(tuple(inner)))
            continue
        elif kind == "s_open":
            inner, i = _inline_run(tokens, i + 1, "s_close")
            out.append(Strike(tuple(inner)))
            continue
        elif kind == "link_open":
            href = str(token.attrGet("href") or "")
            inner, i = _inline_run(tokens, i + 1, "link_close")
            if href.lower().startswith(_SAFE_SCHEMES):
                out.append(Link(href, tuple(inner)))
            else:
                out.extend(inner)
            continue
        elif kind == "image":
            href = str(token.attrGet("src") or "")
            alt = token.content or href
            if href.lower().startswith(_SAFE_SCHEMES):
                out.append(Link(href, (Text(alt),)))
            else:
                out.append(Text(alt))
        elif kind in ("html_inline",):
            out.append(Text(token.content))
        i += 1
    return out, i
