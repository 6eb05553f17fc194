"""The two shapes of an attachment: announced by a platform, and received on disk."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

__all__ = ["Attachment", "AttachmentKind", "ReceivedFile"]


class AttachmentKind(str, enum.Enum):
    """What a platform says an attachment is. Open: `parse` maps an unknown kind to
    `FILE`, so a platform's new media type still arrives as a file."""

    IMAGE = "image"
    FILE = "file"
    AUDIO = "audio"
    VIDEO = "video"

    @classmethod
    def parse(cls, value: str) -> AttachmentKind:
        """The kind named by `value` (case-insensitive); `FILE` for anything else."""
        try:
            return cls(value.strip().lower())
        except ValueError:
            return cls.FILE


@dataclass(frozen=True)
class Attachment:
    """An attachment as the platform announced it, before anything is downloaded.

    `content_type` and `size` are the platform's declarations (never trusted: the
    download sniffs the type and counts the bytes); `duration` is a voice or video
    message's length in seconds; `reference` is the platform's own opaque handle
    (a Telegram `file_id`, a DingTalk download code, a Slack `url_private`) that only
    that platform's adapter interprets.
    """

    kind: AttachmentKind
    name: str
    reference: str
    content_type: str | None = None
    size: int | None = None
    duration: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.kind, AttachmentKind):
            raise TypeError(f"kind: expected an AttachmentKind, got {self.kind!r}")
        if self.size is not None and self.size < 0:
            raise ValueError(f"size: must be >= 0 (got {self.size})")
        if self.duration is not None and self.duration < 0:
            raise ValueError(f"duration: must be >= 0 (got {self.duration})")


@dataclass(frozen=True)
class ReceivedFile:
    """A downloaded attachment in a run's workspace.

    `name` is the sanitized name the person sent (the file in `path` may carry a unique
    suffix); `content_type` was sniffed from the file's first bytes; `size` is the number of
    bytes written and `sha256` their hex digest, both counted while streaming.
    """

    path: Path
    name: str
    content_type: str
    size: int
    sha256: str

    def open(self) -> BinaryIO:
        """Open the file for reading in binary mode (the caller closes it)."""
        return self.path.open("rb")
