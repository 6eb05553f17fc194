"""MkDocs hook: the build fails on a raw Sphinx role in a rendered page.

Docstrings are Markdown (code spans in backticks); a Sphinx role such as
``:class:`Name``` is not rendered by the site and would show as raw text, so a page that
still contains one stops the build and names the page and the role.
"""

from __future__ import annotations

import re
from typing import Any

from mkdocs.exceptions import PluginError

# A role reaches the page as ``:class:<code>Name</code>`` (Markdown turned its backticks
# into a code span), or with its backticks when it sat inside other markup.
ROLE = re.compile(
    r":(?:class|meth|func|mod|attr|data|exc|obj|const|py:\w+):(?:<code>[^<]*</code>|`[^`]*`)"
)


def on_page_content(html: str, page: Any, **kwargs: Any) -> str:
    found = sorted(set(ROLE.findall(html)))
    if found:
        raise PluginError(
            f"{page.file.src_uri}: raw Sphinx role(s) in the rendered page: "
            + ", ".join(found[:10])
            + (" ..." if len(found) > 10 else "")
            + " (docstrings are Markdown: write `Name` instead)"
        )
    return html
