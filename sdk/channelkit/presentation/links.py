"""Which link-button URLs may become links: the one rule every renderer shares.

A link button's ``url`` comes from an agent, so it is untrusted. Only absolute
``https:`` and ``http:`` URLs with a host become links, plus the schemes a platform
documents for its own links (Telegram's ``tg:``), which a channel declares in
``ActionLimits.link_schemes``. Anything else (``javascript:``, ``data:``, ``file:``,
``mailto:``, a relative or protocol-relative URL, or a URL with whitespace or control
characters that browsers would silently strip) is never sent as a link: ``adapt`` drops
it with a logged warning and the button reads as its plain label (a button that also has
a value or command keeps those). Renderers check again with `is_safe_link()`, so a
presentation that skipped ``adapt`` is safe too.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

__all__ = ["WEB_SCHEMES", "is_safe_link", "link_scheme", "warn_unsafe_link"]

logger = logging.getLogger(__name__)

WEB_SCHEMES: tuple[str, ...] = ("https", "http")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
_UNSAFE_CHARACTER = re.compile(r"[\x00-\x20\x7f-\x9f\u2028\u2029]")


def link_scheme(url: str) -> str | None:
    """The URL's scheme, lowercased, or None for a relative URL."""
    match = _SCHEME.match(url)
    return match.group(1).lower() if match else None


def is_safe_link(url: str, schemes: Iterable[str] = WEB_SCHEMES) -> bool:
    """True when ``url`` may be sent as a link: its scheme is one of ``schemes``, it has
    no whitespace or control character, and an ``http(s)`` URL names a host."""
    if not url or _UNSAFE_CHARACTER.search(url):
        return False
    scheme = link_scheme(url)
    if scheme is None or scheme not in schemes:
        return False
    if scheme in WEB_SCHEMES:
        try:
            host = urlsplit(url).hostname
        except ValueError:  # e.g. an invalid IPv6 literal
            return False
        return bool(host) and url[len(scheme) + 1 : len(scheme) + 3] == "//"
    return True


def warn_unsafe_link(label: str, url: str) -> None:
    """Log that a link button's URL was not sent as a link (the URL itself is not
    logged: it may be long, or carry script)."""
    logger.warning(
        "Link button URL dropped: only http(s) and the platform's documented link "
        "schemes are sent as links",
        extra={"link": {"label": label, "scheme": link_scheme(url) or "(relative)"}},
    )
