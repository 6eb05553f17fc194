"""The playground page, shipped as package data under ``channelkit/playground/static``."""

from __future__ import annotations

from importlib import resources

__all__ = ["read_static"]

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "application/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


def read_static(name: str) -> tuple[bytes, str] | None:
    """``(bytes, content type)`` of a static file, or None (unknown or unsafe name)."""
    if not name or "/" in name or "\\" in name or name.startswith("."):
        return None
    suffix = name[name.rfind(".") :] if "." in name else ""
    content_type = _TYPES.get(suffix)
    if content_type is None:
        return None
    resource = resources.files("channelkit.playground").joinpath("static").joinpath(name)
    if not resource.is_file():
        return None
    return resource.read_bytes(), content_type
