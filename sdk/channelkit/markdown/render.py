"""One renderer per dialect over the intermediate form (`channelkit.markdown.nodes`).

Every renderer renders a block on its own: a rendered block is valid by itself (HTML
tags balanced, fences closed), so blocks joined by a blank line are valid too, and a
splitter may put any run of blocks in one message.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Literal

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
    ListBlock,
    Paragraph,
    Quote,
    Strike,
    Table,
    Text,
)
from channelkit.markdown.text import display_width

__all__ = ["TABLE_POLICIES", "Dialect", "Renderer", "TablePolicy", "plain_text", "renderer_for"]

#: How a table is shown: ``"auto"`` (the platform's native table where it has one, else
#: an aligned monospace block when it fits the width, else "column: value" lines),
#: ``"native"`` (as ``"auto"`` where the platform has no native table), ``"monospace"``
#: (always the aligned block) or ``"lines"`` (always "column: value" lines).
TablePolicy = Literal["auto", "native", "monospace", "lines"]
TABLE_POLICIES: tuple[TablePolicy, ...] = ("auto", "native", "monospace", "lines")


class Dialect(str, Enum):
    """The output dialects: what each platform's text field accepts."""

    #: Telegram ``parse_mode="HTML"``: only Telegram's tags, balanced, ``&<>`` escaped.
    TELEGRAM = "telegram"
    #: Slack mrkdwn: ``&<>`` escaped, links ``<url|text>``, never a mass mention.
    SLACK = "slack"
    #: Feishu/Lark card Markdown (native tables).
    FEISHU = "feishu"
    #: DingTalk Markdown subset (no strikethrough, no tables).
    DINGTALK = "dingtalk"
    #: Discord Markdown (headings 1-3, no tables).
    DISCORD = "discord"
    #: Plain text (Weixin and every fallback).
    PLAIN = "plain"


_RULE_LINE = "─" * 10
_LANGUAGE = re.compile(r"[^\w+#.-]")


class Renderer:
    """Base renderer: plain text. Subclasses override the pieces their dialect formats."""

    #: True where the dialect has a native table.
    native_tables = False
    #: Deepest heading level written as a heading (deeper ones are bold lines).
    max_heading = 0
    #: Columns an aligned monospace table may take by default.
    default_table_width = 60
    #: List bullets by nesting depth (the last repeats).
    bullets: tuple[str, ...] = ("•", "◦", "▪")
    #: True where a heading is a bold line (bold inside it is not marked again).
    bold_headings = True

    def __init__(self, table: TablePolicy = "auto", table_width: int | None = None) -> None:
        if table not in TABLE_POLICIES:
            raise ValueError(f"table: expected one of {', '.join(TABLE_POLICIES)}, got {table!r}")
        if table_width is not None and (not isinstance(table_width, int) or table_width < 8):
            raise ValueError(f"table_width: expected an int of at least 8, got {table_width!r}")
        self.table = table
        self.table_width = table_width if table_width is not None else self.default_table_width
        self._bold = 0  # depth of bold being rendered (bold inside bold is not marked)
        self._quotes = 0  # depth of quotes being rendered

    # -- text pieces -------------------------------------------------------------------
    def escape(self, text: str) -> str:
        """``text`` as literal text of this dialect."""
        return text

    def escape_code(self, code: str) -> str:
        """``code`` as the content of a code block."""
        return code

    def bold(self, inner: str) -> str:
        return inner

    def italic(self, inner: str) -> str:
        return inner

    def strike(self, inner: str) -> str:
        return inner

    def code(self, text: str) -> str:
        return text

    def link(self, href: str, children: tuple[Inline, ...]) -> str:
        label = plain_text(children)
        inner = self.inlines(children)
        return inner if label.strip() in ("", href) else f"{inner} ({href})"

    def heading(self, level: int, inner: str) -> str:
        return inner

    def code_block(self, code: str, language: str) -> str:
        return code

    def quote(self, inner: str) -> str:
        return "\n".join("> " + line if line else ">" for line in inner.split("\n"))

    def rule(self) -> str:
        return _RULE_LINE

    def monospace(self, lines: Sequence[str]) -> str:
        """An aligned table's lines as a monospace block."""
        return "\n".join(lines)

    def native_table(self, table: Table) -> str:
        raise NotImplementedError

    def bullet(self, depth: int) -> str:
        return self.bullets[min(depth, len(self.bullets) - 1)]

    # -- structure ---------------------------------------------------------------------
    def document(self, document: Document) -> str:
        """The whole document: its blocks separated by a blank line."""
        return "\n\n".join(self.block(block) for block in document.blocks)

    def block(self, block: Block, depth: int = 0) -> str:
        """One block, valid on its own."""
        if isinstance(block, Paragraph):
            return self.inlines(block.inlines)
        if isinstance(block, Heading):
            bold = self.bold_headings or block.level > self.max_heading
            self._bold += bold
            try:
                return self.heading(block.level, self.inlines(block.inlines))
            finally:
                self._bold -= bold
        if isinstance(block, CodeBlock):
            return self.code_block(block.code, _LANGUAGE.sub("", block.language))
        if isinstance(block, ListBlock):
            return self.list_block(block, depth)
        if isinstance(block, Quote):
            return self.quote("\n\n".join(self.block(b, depth) for b in block.blocks))
        if isinstance(block, Table):
            return self.table_block(block)
        return self.rule()

    def list_block(self, block: ListBlock, depth: int) -> str:
        out: list[str] = []
        for number, item in enumerate(block.items, start=block.start):
            marker = f"{number}." if block.ordered else self.bullet(depth)
            body = "\n".join(self.block(b, depth + 1) for b in item)
            lines = body.split("\n")
            pad = " " * (len(marker) + 1)
            rest = [pad + line if line else line for line in lines[1:]]
            out.append("\n".join([f"{marker} {lines[0]}".rstrip(), *rest]))
        return "\n".join(out)

    def table_block(self, table: Table) -> str:
        policy = self.table
        if policy in ("auto", "native") and self.native_tables:
            return self.native_table(table)
        if policy != "lines":
            lines = aligned_table(table)
            if policy == "monospace" or max(map(display_width, lines)) <= self.table_width:
                return self.monospace(lines)
        return self.lines_table(table)

    def lines_table(self, table: Table) -> str:
        """One "column: value" line per cell, rows separated by a blank line."""
        rows: list[str] = []
        for row in table.rows:
            lines = []
            for index, cell in enumerate(row):
                name = table.header[index] if index < len(table.header) else ()
                label = self.bold(self.inlines(name)) if plain_text(name).strip() else ""
                value = self.inlines(cell)
                lines.append(f"{label}: {value}" if label else value)
            rows.append("\n".join(lines))
        return "\n\n".join(rows) if rows else " | ".join(self.inlines(c) for c in table.header)

    def inlines(self, inlines: Sequence[Inline]) -> str:
        parts: list[str] = []
        marked: set[int] = set()  # indexes of the parts wrapped in emphasis markers
        for node in inlines:
            if isinstance(node, Text):
                parts.append(self.escape(node.text))
            elif isinstance(node, Code):
                parts.append(self.code(node.text))
            elif isinstance(node, LineBreak):
                parts.append("\n")
            elif isinstance(node, Bold):
                if self._bold:
                    parts.append(self.inlines(node.children))
                    continue
                self._bold += 1
                try:
                    marked.add(len(parts))
                    parts.append(_hug(self.inlines(node.children), self.bold))
                finally:
                    self._bold -= 1
            elif isinstance(node, Italic):
                marked.add(len(parts))
                parts.append(_hug(self.inlines(node.children), self.italic))
            elif isinstance(node, Strike):
                marked.add(len(parts))
                parts.append(_hug(self.inlines(node.children), self.strike))
            else:
                parts.append(self.link(node.href, node.children))
        return self.join(parts, marked)

    def join(self, parts: Sequence[str], marked: set[int]) -> str:
        """The inline ``parts`` as one string; ``marked`` are the indexes of the parts
        wrapped in emphasis markers (a dialect whose markers need a word boundary
        separates them from the letters around them)."""
        return "".join(parts)


def _hug(inner: str, wrap: Callable[[str], str]) -> str:
    """``wrap(inner)`` with ``inner``'s outer whitespace moved outside the markers."""
    core = inner.strip()
    if not core:
        return inner
    start = len(inner) - len(inner.lstrip())
    return inner[:start] + wrap(core) + inner[start + len(core) :]


def plain_text(inlines: Sequence[Inline]) -> str:
    """The text of ``inlines`` without any formatting."""
    out: list[str] = []
    for node in inlines:
        if isinstance(node, Text | Code):
            out.append(node.text)
        elif isinstance(node, LineBreak):
            out.append("\n")
        else:
            out.append(plain_text(node.children))
    return "".join(out)


def aligned_table(table: Table) -> list[str]:
    """The table as aligned monospace lines: header, a rule, the rows."""
    columns = len(table.header)
    grid = [[" ".join(plain_text(c).split()) for c in table.header]]
    grid += [[" ".join(plain_text(c).split()) for c in row] for row in table.rows]
    widths = [max(display_width(row[i]) for row in grid) for i in range(columns)]

    def line(row: list[str]) -> str:
        cells = []
        for i, cell in enumerate(row):
            gap = widths[i] - display_width(cell)
            side = table.align[i] if i < len(table.align) else ""
            if side == "right":
                cells.append(" " * gap + cell)
            elif side == "center":
                cells.append(" " * (gap // 2) + cell + " " * (gap - gap // 2))
            else:
                cells.append(cell + " " * gap)
        return " | ".join(cells).rstrip()

    rule = "-+-".join("-" * w for w in widths)
    return [line(grid[0]), rule, *(line(row) for row in grid[1:])]


class TelegramRenderer(Renderer):
    """Telegram HTML: ``b``, ``i``, ``s``, ``code``, ``pre``, ``a``, ``blockquote``."""

    default_table_width = 40

    def escape(self, text: str) -> str:
        return html.escape(text, quote=False)

    def escape_code(self, code: str) -> str:
        return html.escape(code, quote=False)

    def bold(self, inner: str) -> str:
        return f"<b>{inner}</b>"

    def italic(self, inner: str) -> str:
        return f"<i>{inner}</i>"

    def strike(self, inner: str) -> str:
        return f"<s>{inner}</s>"

    def code(self, text: str) -> str:
        return f"<code>{html.escape(text, quote=False)}</code>"

    def link(self, href: str, children: tuple[Inline, ...]) -> str:
        inner = self.inlines(children) or self.escape(href)
        return f'<a href="{html.escape(href, quote=True)}">{inner}</a>'

    def heading(self, level: int, inner: str) -> str:
        return f"<b>{inner}</b>"

    def code_block(self, code: str, language: str) -> str:
        body = html.escape(code, quote=False)
        if language:
            return f'<pre><code class="language-{language}">{body}</code></pre>'
        return f"<pre>{body}</pre>"

    def block(self, block: Block, depth: int = 0) -> str:
        if not isinstance(block, Quote):
            return super().block(block, depth)
        self._quotes += 1
        try:
            inner = "\n\n".join(self.block(b, depth) for b in block.blocks)
        finally:
            self._quotes -= 1
        if self._quotes:  # Telegram quotes do not nest: an inner quote is "> " lines
            return "\n".join("&gt; " + line if line else "&gt;" for line in inner.split("\n"))
        return f"<blockquote>{inner}</blockquote>"

    def monospace(self, lines: Sequence[str]) -> str:
        return "<pre>" + html.escape("\n".join(lines), quote=False) + "</pre>"


#: U+200B ZERO WIDTH SPACE: a word boundary that shows nothing.
ZWSP = "\u200b"


def _touches(char: str) -> bool:
    """Whether ``char`` next to a Slack marker keeps it from formatting (a letter or
    digit of any script, or any other non-ASCII character such as CJK punctuation)."""
    return char.isalnum() or (not char.isascii() and not char.isspace())


def _slack_href(href: str) -> str:
    for char, code in (("|", "%7C"), ("<", "%3C"), (">", "%3E"), (" ", "%20")):
        href = href.replace(char, code)
    return href.replace("&", "&amp;")


class SlackRenderer(Renderer):
    """Slack mrkdwn: ``*bold*``, ``_italic_``, ``~strike~``, ``<url|text>``; ``&<>``
    escaped everywhere, so no ``<!here>``-style mass mention can appear."""

    def escape(self, text: str) -> str:
        # literal triple backticks in text would open a code block in Slack: a
        # zero-width space keeps them apart (Slack has no backslash escape)
        escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        return escaped.replace("```", "``\u200b`")

    def escape_code(self, code: str) -> str:
        return self.escape(code)

    def join(self, parts: Sequence[str], marked: set[int]) -> str:
        # Slack formats ``*x*`` only at a word boundary: markers that touch a letter
        # (``到*测试环境*，``, ``foo*bar*``) would show as asterisks. A zero-width space
        # between them is a boundary that shows nothing.
        out = list(parts)
        for i in marked:
            part = out[i]
            if not part or part[0].isspace() or part[-1].isspace():
                continue  # whitespace moved outside the markers is boundary enough
            if i > 0 and out[i - 1] and _touches(out[i - 1][-1]):
                out[i] = ZWSP + out[i]
            if i + 1 < len(out) and out[i + 1] and _touches(out[i + 1][0]):
                out[i] = out[i] + ZWSP
        return "".join(out)

    def bold(self, inner: str) -> str:
        return f"*{inner}*"

    def italic(self, inner: str) -> str:
        return f"_{inner}_"

    def strike(self, inner: str) -> str:
        return f"~{inner}~"

    def code(self, text: str) -> str:
        if "`" in text or not text.strip():
            return self.escape(text)
        return f"`{self.escape(text)}`"

    def link(self, href: str, children: tuple[Inline, ...]) -> str:
        label = " ".join(plain_text(children).split())
        if not label or label == href:
            return f"<{_slack_href(href)}>"
        return f"<{_slack_href(href)}|{self.escape(label)}>"

    def heading(self, level: int, inner: str) -> str:
        return f"*{inner}*"

    def block(self, block: Block, depth: int = 0) -> str:
        if not isinstance(block, Quote):
            return super().block(block, depth)
        self._quotes += 1
        try:
            inner = "\n\n".join(self.block(b, depth) for b in block.blocks)
        finally:
            self._quotes -= 1
        # Slack quotes neither nest nor open inside a list item: there "> " is text
        mark = "&gt; " if self._quotes or depth else "> "
        return "\n".join(mark + line if line else mark.rstrip() for line in inner.split("\n"))

    def code_block(self, code: str, language: str) -> str:
        return f"```\n{self.escape_code(code)}\n```"

    def monospace(self, lines: Sequence[str]) -> str:
        return self.code_block("\n".join(lines), "")


# "_" between two letters or digits never emphasizes (snake_case stays as written)
_MD_SPECIAL = re.compile(r"([\\`*~]|(?<![^\W_])_|_(?![^\W_])|\](?=\())")
_MD_LINE_START = re.compile(r"(^|\n)([ \t]*)(>|(?:#+|[+-]|\d+[.)])(?=\s|$))", re.MULTILINE)


def _escape_line_start(match: re.Match[str]) -> str:
    """A block marker at a line start, backslash-escaped (``2.`` -> ``2\\.``)."""
    marker = match.group(3)
    escaped = marker[:-1] + "\\" + marker[-1] if marker[0].isdigit() else "\\" + marker
    return match.group(1) + match.group(2) + escaped


class MarkdownRenderer(Renderer):
    """CommonMark-style Markdown (the base of the Feishu, DingTalk and Discord dialects)."""

    bullets = ("-",)
    bold_headings = False
    max_heading = 6
    #: Whether ``~~strike~~`` is understood.
    strikethrough = True
    #: Characters written as HTML entities (``&`` first).
    entities: tuple[str, ...] = ("&", "<", ">")

    def escape(self, text: str) -> str:
        for char in self.entities:
            text = text.replace(char, html.escape(char, quote=False))
        text = _MD_SPECIAL.sub(r"\\\1", text)
        return _MD_LINE_START.sub(_escape_line_start, text)

    def bold(self, inner: str) -> str:
        return f"**{inner}**"

    def italic(self, inner: str) -> str:
        return f"*{inner}*"

    def strike(self, inner: str) -> str:
        return f"~~{inner}~~" if self.strikethrough else inner

    def code(self, text: str) -> str:
        longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
        ticks = "`" * (longest + 1)
        pad = " " if text.startswith("`") or text.endswith("`") else ""
        return f"{ticks}{pad}{text}{pad}{ticks}"

    def link(self, href: str, children: tuple[Inline, ...]) -> str:
        target = href.replace(" ", "%20").replace("(", "%28").replace(")", "%29")
        inner = self.inlines(children) or self.escape(href)
        return f"[{inner}]({target})"

    def heading(self, level: int, inner: str) -> str:
        if level > self.max_heading:
            return f"**{inner}**"
        return "#" * level + " " + inner

    def code_block(self, code: str, language: str) -> str:
        longest = max((len(m) for m in re.findall(r"`{3,}", code)), default=2)
        fence = "`" * (longest + 1)
        return f"{fence}{language}\n{code}\n{fence}"

    def rule(self) -> str:
        return "---"

    def monospace(self, lines: Sequence[str]) -> str:
        return self.code_block("\n".join(lines), "")

    def native_table(self, table: Table) -> str:
        def row(cells: Sequence[Cell]) -> str:
            inner = (self.inlines(c).replace("\n", " ").replace("|", "\\|") for c in cells)
            return "| " + " | ".join(inner) + " |"

        marks = {"left": ":--", "right": "--:", "center": ":-:", "": "---"}
        rule = "| " + " | ".join(marks[a] for a in table.align) + " |"
        return "\n".join([row(table.header), rule, *(row(r) for r in table.rows)])


_FEISHU_SPECIAL = re.compile(r"[\\`*~\[\]|#&<>]|(?<![^\W_])_|_(?![^\W_])")
_FEISHU_LINE_START = re.compile(r"(^|\n)([ \t]*)([+-](?=\s|$)|\d+(?=[.)](?:\s|$)))", re.MULTILINE)


class FeishuRenderer(MarkdownRenderer):
    """Feishu/Lark card Markdown: GFM tables are native; literal Markdown characters
    are numeric character references (``*`` -> ``&#42;``)."""

    native_tables = True

    def escape(self, text: str) -> str:
        text = _FEISHU_SPECIAL.sub(lambda m: f"&#{ord(m.group(0))};", text)
        return _FEISHU_LINE_START.sub(
            lambda m: m.group(1) + m.group(2) + "".join(f"&#{ord(c)};" for c in m.group(3)),
            text,
        )


class DingTalkRenderer(MarkdownRenderer):
    """DingTalk's Markdown subset: headings, bold, italic, links, lists, quotes, code;
    no strikethrough (its text stays), no tables (the table policy decides)."""

    strikethrough = False
    default_table_width = 40


class DiscordRenderer(MarkdownRenderer):
    """Discord Markdown: headings 1-3 (deeper ones bold), no tables."""

    max_heading = 3
    entities = ()

    def escape(self, text: str) -> str:
        return super().escape(text).replace("<", "\\<")


_RENDERERS: dict[Dialect, type[Renderer]] = {
    Dialect.TELEGRAM: TelegramRenderer,
    Dialect.SLACK: SlackRenderer,
    Dialect.FEISHU: FeishuRenderer,
    Dialect.DINGTALK: DingTalkRenderer,
    Dialect.DISCORD: DiscordRenderer,
    Dialect.PLAIN: Renderer,
}


def renderer_for(
    dialect: Dialect | str, *, table: TablePolicy = "auto", table_width: int | None = None
) -> Renderer:
    """The renderer of ``dialect`` with the given table policy."""
    try:
        kind = _RENDERERS[Dialect(dialect)]
    except ValueError:
        names = ", ".join(d.value for d in Dialect)
        raise ValueError(f"dialect: expected one of {names}, got {dialect!r}") from None
    return kind(table, table_width)
