"""One Markdown pipeline for every platform.

The agent's Markdown is parsed once (markdown-it-py: CommonMark, GFM tables and
strikethrough) into a small typed form (`Document`), which one renderer per dialect
turns into what the platform's text field accepts:

```python
from channelkit.markdown import Dialect, render

parts = render(answer, Dialect.TELEGRAM, limit=4096)        # Telegram HTML parts
preview = render(text_so_far, "slack", preview=True)[-1:]   # a live preview
```

- `render()` is the whole pipeline: parse, split within ``limit`` at block
  boundaries (never inside a code fence, a tag, an entity or a grapheme cluster;
  each part valid on its own), render each part.
- ``preview=True`` closes what a text cut mid-stream leaves open (a code fence,
  ``**bold``, a code span), so a person never sees raw markers.
- ``table`` chooses how tables show (see `TablePolicy`): the platform's native table
  where it has one (Feishu), else an aligned monospace block when it fits
  ``table_width`` columns, else one "column: value" line per cell.
- `parse()`, `split()` and `render_document()` are the steps, for a caller that
  renders one split in two dialects (Telegram HTML with its plain-text fallback).
"""

from __future__ import annotations

from channelkit.markdown.nodes import Document
from channelkit.markdown.parse import close_open_markdown, looks_plain, parse
from channelkit.markdown.render import TABLE_POLICIES, Dialect, TablePolicy, renderer_for
from channelkit.markdown.split import MIN_LIMIT, split_document, split_rendered
from channelkit.markdown.text import display_width, is_boundary, safe_cut

__all__ = [
    "MIN_LIMIT",
    "TABLE_POLICIES",
    "Dialect",
    "Document",
    "TablePolicy",
    "close_open_markdown",
    "display_width",
    "is_boundary",
    "looks_plain",
    "parse",
    "render",
    "render_document",
    "safe_cut",
    "split",
]


def render(
    text: str,
    dialect: Dialect | str,
    *,
    table: TablePolicy = "auto",
    table_width: int | None = None,
    limit: int | None = None,
    preview: bool = False,
) -> list[str]:
    """The agent's Markdown ``text`` rendered for ``dialect``, as message parts.

    - ``dialect``: a `Dialect` or its value (``"telegram"``, ``"slack"``,
      ``"feishu"``, ``"dingtalk"``, ``"discord"``, ``"plain"``).
    - ``table``: the table policy (`TablePolicy`); ``table_width``: the columns an
      aligned monospace table may take (default per dialect: 40 on Telegram and
      DingTalk, 60 elsewhere).
    - ``limit``: the most characters one part may have (at least `MIN_LIMIT`); None:
      one part, however long.
    - ``preview``: ``text`` is a stream cut anywhere; open constructs are closed.

    Returns the parts in order, ``[]`` when ``text`` has nothing to show. Raises
    ValueError naming the bad argument.
    """
    renderer = renderer_for(dialect, table=table, table_width=table_width)
    document = parse(text, preview=preview)
    if not document.blocks:
        return []
    if limit is None:
        return [renderer.document(document)]
    return split_rendered(document, renderer, limit)


def split(
    document: Document,
    dialect: Dialect | str,
    limit: int,
    *,
    table: TablePolicy = "auto",
    table_width: int | None = None,
) -> list[Document]:
    """``document`` as parts that each render for ``dialect`` within ``limit``
    characters (see `render()`); ``[]`` for an empty document."""
    renderer = renderer_for(dialect, table=table, table_width=table_width)
    return split_document(document, renderer, limit)


def render_document(
    document: Document,
    dialect: Dialect | str,
    *,
    table: TablePolicy = "auto",
    table_width: int | None = None,
) -> str:
    """One parsed ``document`` (or a part from `split()`) rendered for ``dialect``."""
    return renderer_for(dialect, table=table, table_width=table_width).document(document)
