"""A person's files as ACP prompt content blocks, chosen from what the agent advertises.

The agent says in its ``initialize`` result which content beyond text and resource links
its ``session/prompt`` accepts (``agentCapabilities.promptCapabilities``: ``image``,
``audio``, ``embeddedContext``). `prompt_blocks()` turns the person's text and the
run's downloaded files (`ReceivedFile`, type sniffed from the bytes) into the prompt:

- an image (PNG, JPEG, GIF, WebP), when the agent advertises ``image``:
  ``{"type": "image", "mimeType", "data", "uri"}``;
- audio (Ogg, MP3), when it advertises ``audio``: ``{"type": "audio", "mimeType", "data"}``;
- UTF-8 text up to `ContentLimits.embedded_text_bytes`, when it advertises
  ``embeddedContext``: ``{"type": "resource", "resource": {"uri", "mimeType", "text"}}``;
- anything else, or a file over a bound: ``{"type": "resource_link", "uri", "name",
  "mimeType", "size"}`` (every agent takes these) plus a text line naming the local path;
- an image or audio file the agent does not take: the text line naming its local path.

``data`` is base64 and ``uri`` a ``file://`` URI of the file in the run's workspace.
What is inlined is bounded (`ContentLimits`): one file's bytes, and all inlined
bytes of one prompt together; a file over either bound goes as a resource link. A file
is read at most up to the bound that applies to it, so a file larger than announced is
never read whole.

A resource link always comes with the text line: some agents resolve a ``file://`` link
only inside their own workspace and drop it otherwise (Qwen Code 0.24 does), and the
line keeps such a file from vanishing without a word.

The other direction: `agent_file()` reads an ``image`` block or a ``file://``
``resource_link`` the agent streams in an ``agent_message_chunk`` as a file for the
chat (bounded, confined to the bridge's ``files_root``).
"""

from __future__ import annotations

import base64
import binascii
import logging
import mimetypes
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from channelkit.attachments.model import ReceivedFile
from channelkit.attachments.outbound import OutboundSource, outbound_source
from channelkit.errors import AttachmentRefused, AttachmentTooLarge, ConfigurationError

__all__ = [
    "DEFAULT_EMBEDDED_TEXT_BYTES",
    "DEFAULT_INLINE_BYTES",
    "DEFAULT_INLINE_TOTAL_BYTES",
    "ContentLimits",
    "PromptCapabilities",
    "agent_file",
    "file_line",
    "prompt_blocks",
]

logger = logging.getLogger(__name__)

_MIB = 1024 * 1024

#: One image or audio file inlined as base64 (the file's own size): 5 MiB.
DEFAULT_INLINE_BYTES = 5 * _MIB
#: Every file inlined into one prompt together (images, audio, embedded text): 10 MiB.
DEFAULT_INLINE_TOTAL_BYTES = 10 * _MIB
#: One text file embedded as an ACP ``resource`` block: 64 KiB.
DEFAULT_EMBEDDED_TEXT_BYTES = 64 * 1024

_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_AUDIO_TYPES = frozenset({"audio/ogg", "audio/mpeg"})


@dataclass(frozen=True)
class PromptCapabilities:
    """What the agent's ``session/prompt`` accepts beyond text and resource links
    (ACP ``PromptCapabilities``; each false unless the agent says ``true``)."""

    image: bool = False
    audio: bool = False
    embedded_context: bool = False

    @classmethod
    def from_initialize(cls, result: Mapping[str, Any]) -> PromptCapabilities:
        """Read ``agentCapabilities.promptCapabilities`` from an ``initialize`` result;
        anything missing or not a JSON ``true`` counts as not advertised."""
        agent = result.get("agentCapabilities")
        prompt = agent.get("promptCapabilities") if isinstance(agent, Mapping) else None
        if not isinstance(prompt, Mapping):
            return cls()
        return cls(
            image=prompt.get("image") is True,
            audio=prompt.get("audio") is True,
            embedded_context=prompt.get("embeddedContext") is True,
        )


@dataclass(frozen=True)
class ContentLimits:
    """Bounds on what a prompt carries inline (bytes of the files, before base64).

    `inline_bytes`: one image or audio file sent as an ``image``/``audio`` block;
    `inline_total_bytes`: all files inlined into one prompt together;
    `embedded_text_bytes`: one text file embedded as a ``resource`` block. A file over
    a bound goes as a ``resource_link`` instead. 0 turns that kind of inlining off.
    """

    inline_bytes: int = DEFAULT_INLINE_BYTES
    inline_total_bytes: int = DEFAULT_INLINE_TOTAL_BYTES
    embedded_text_bytes: int = DEFAULT_EMBEDDED_TEXT_BYTES

    def __post_init__(self) -> None:
        for name in ("inline_bytes", "inline_total_bytes", "embedded_text_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(f"must be an int >= 0 (got {value!r})", name)


def file_line(received: ReceivedFile) -> str:
    """The text line naming a file's local path (for agents that cannot take it as a
    content block, and beside every resource link)."""
    return (
        f"[Attachment {received.name!r} ({received.content_type}, {received.size} bytes) "
        f"saved at {received.path}]"
    )


def prompt_blocks(
    text: str,
    files: Sequence[ReceivedFile],
    capabilities: PromptCapabilities,
    limits: ContentLimits,
) -> list[dict[str, Any]]:
    """The ``session/prompt`` content for `text` and the person's `files` (in the order
    sent); see the module docstring for the choice. The first block is the text (the
    person's, then the lines naming files), left out only when there is no text at all."""
    budget = limits.inline_total_bytes
    media: list[dict[str, Any]] = []
    lines: list[str] = []
    for received in files:
        block, used = _block(received, capabilities, limits, budget)
        budget -= used
        if block is None or block["type"] == "resource_link":
            lines.append(file_line(received))
        if block is not None:
            media.append(block)
    body = "\n".join(lines)
    if text and body:
        body = f"{text}\n\n{body}"
    elif text:
        body = text
    blocks: list[dict[str, Any]] = [{"type": "text", "text": body}] if body else []
    return blocks + media


def _block(
    received: ReceivedFile, caps: PromptCapabilities, limits: ContentLimits, budget: int
) -> tuple[dict[str, Any] | None, int]:
    """One file's block (None: the text line alone) and the inline bytes it used."""
    content_type = received.content_type
    bare_type = content_type.split(";", 1)[0].strip().lower()
    uri = _file_uri(received.path)
    if bare_type in _IMAGE_TYPES or bare_type in _AUDIO_TYPES:
        kind = "image" if bare_type in _IMAGE_TYPES else "audio"
        if not (caps.image if kind == "image" else caps.audio):
            return None, 0  # the agent takes no such block: the path line
        bound = min(limits.inline_bytes, budget)
        data = _read_bounded(received, bound)
        if data is None:
            logger.info(
                "attachment %r (%d bytes) is over the inline bound of %d bytes: linked",
                received.name,
                received.size,
                bound,
            )
            return _link(received, uri), 0
        block: dict[str, Any] = {
            "type": kind,
            "mimeType": bare_type,
            "data": base64.b64encode(data).decode("ascii"),
        }
        if kind == "image":
            block["uri"] = uri
        return block, len(data)
    if caps.embedded_context and bare_type.startswith("text/"):
        bound = min(limits.embedded_text_bytes, budget)
        data = _read_bounded(received, bound)
        if data is not None:
            try:
                embedded = data.decode("utf-8")
            except UnicodeDecodeError:  # the sniffer saw only the first bytes
                embedded = None
            if embedded is not None:
                resource = {"uri": uri, "mimeType": bare_type, "text": embedded}
                return {"type": "resource", "resource": resource}, len(data)
    return _link(received, uri), 0


def _link(received: ReceivedFile, uri: str) -> dict[str, Any]:
    return {
        "type": "resource_link",
        "uri": uri,
        "name": received.name,
        "mimeType": received.content_type,
        "size": received.size,
    }


def _file_uri(path: Path) -> str:
    return Path(os.path.abspath(path)).as_uri()


def _read_bounded(received: ReceivedFile, bound: int) -> bytes | None:
    """The file's bytes when it holds at most `bound` of them (never reading more than
    one byte past it); None when it is larger or cannot be read."""
    if bound <= 0 or received.size > bound:
        return None
    try:
        with received.open() as stream:
            data = stream.read(bound + 1)
    except OSError as exc:
        logger.warning("attachment %r could not be read: %s", received.name, exc)
        return None
    return data if len(data) <= bound else None


def agent_file(
    content: Mapping[str, Any], root: str | os.PathLike[str], max_size: int
) -> tuple[OutboundSource, bool] | None:
    """The file an agent's ``agent_message_chunk`` content sends to the chat, and whether
    to show it as an image; None when the content is no file (text, a link that is not
    ``file://``).

    An ``image`` block's base64 ``data`` is decoded (its length checked against
    `max_size` first, so nothing larger is decoded) and named after its ``uri`` or its
    ``mimeType``; it is shown as an image when its bytes are one. A ``resource_link`` to
    a ``file://`` URI is sent as a file, confined to `root` (refused before it is opened
    when outside it, not a regular file or over `max_size`). Raises `AttachmentRefused`
    or `AttachmentTooLarge` naming the file.
    """
    kind = content.get("type")
    if kind == "image":
        data = content.get("data")
        name = _image_name(content)
        if not isinstance(data, str) or not data:
            logger.warning("acp agent sent an image block without data; skipped")
            return None  # malformed: nothing to send
        if len(data) > 4 * ((max_size + 2) // 3) + 4:  # larger than max_size once decoded
            raise AttachmentTooLarge(name=name, limit=max_size, size=len(data) * 3 // 4)
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise AttachmentRefused(name=name, reason="its data is not base64") from None
        source = outbound_source(raw, root, name=name, max_size=max_size)
        return source, source.content_type().startswith("image/")
    if kind == "resource_link":
        uri = content.get("uri")
        if not isinstance(uri, str) or not uri.lower().startswith("file:"):
            return None  # not a local file: the agent's own text says what it is
        given = content.get("name")
        path = unquote(urlsplit(uri).path)
        shown = given if isinstance(given, str) and given else None
        return outbound_source(path, root, name=shown, max_size=max_size), False
    return None


def _image_name(content: Mapping[str, Any]) -> str:
    uri = content.get("uri")
    if isinstance(uri, str) and uri:
        base = unquote(urlsplit(uri).path).rstrip("/").rsplit("/", 1)[-1]
        if base:
            return base
    mime = content.get("mimeType")
    extension = mimetypes.guess_extension(mime) if isinstance(mime, str) else None
    return "image" + (extension or "")
