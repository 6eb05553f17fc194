"""Attachments: files, images and voice in and out, independent of any platform.

- `model`: the `Attachment` a platform announces and the `ReceivedFile` on disk;
- `fetch`: stream one download into a directory, capped, without redirects off the
  platform's own hosts, its type sniffed from its bytes;
- `workspace`: the per-run temporary directory, removed when the run ends, at process
  stop, or by an age sweep;
- `outbound`: confine a path an agent wants to send to an allowed root (or wrap its
  bytes) into an `OutboundSource` a platform uploads;
- `names` and `sniff`: the file-name sanitizer and the content-type sniffer they share.
"""

from __future__ import annotations

from channelkit.attachments.fetch import ChunkTransform, DownloadLimits, MessageBudget, download
from channelkit.attachments.model import Attachment, AttachmentKind, ReceivedFile
from channelkit.attachments.names import sanitize_name, unique_path
from channelkit.attachments.outbound import (
    OutboundBytes,
    OutboundFile,
    OutboundSource,
    confine,
    outbound_source,
)
from channelkit.attachments.sniff import sniff_content_type
from channelkit.attachments.workspace import Workspace, Workspaces

__all__ = [
    "Attachment",
    "AttachmentKind",
    "ChunkTransform",
    "DownloadLimits",
    "MessageBudget",
    "OutboundBytes",
    "OutboundFile",
    "OutboundSource",
    "ReceivedFile",
    "Workspace",
    "Workspaces",
    "confine",
    "download",
    "outbound_source",
    "sanitize_name",
    "sniff_content_type",
    "unique_path",
]
