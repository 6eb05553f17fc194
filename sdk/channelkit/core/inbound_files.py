"""A person's attachments, downloaded for their run (inbound half of issue 25).

The core does this once for every platform, on the run's worker (never before the
ACK): `InboundFiles.receive()` opens the run's `Workspace`, asks the platform how to
download each `Attachment` (`ChannelBase.attachment_source()`, which answers with an
`AttachmentSource`: an authenticated URL and the hosts a redirect may go to) and
streams it there with `channelkit.attachments.download` under the channel's
`DownloadLimits`. A file that is too large, refused or failed becomes an
`AttachmentProblem`: the person is told once (`problem_notice()`), the agent gets a
note (`agent_note()`), and the run still starts. A download that fails in a way a retry
may mend (a 429, a 5xx, a timeout, a reset connection) is tried again after
`RETRY_DELAYS` (the platform asked again for its download each time, since a signed
link may have expired), unless the run was stopped meanwhile. The workspace is closed by the run
when it ends, whatever the outcome.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from channelkit.attachments.fetch import (
    MB,
    ChunkTransform,
    DownloadLimits,
    MessageBudget,
    download,
)
from channelkit.attachments.model import Attachment, ReceivedFile
from channelkit.attachments.names import sanitize_name
from channelkit.attachments.workspace import Workspace, Workspaces
from channelkit.core.catalog import Messages
from channelkit.core.text import MSG_ATTACHMENT_NOT_RECEIVED, MSG_ATTACHMENT_TOO_LARGE
from channelkit.errors import (
    AttachmentError,
    AttachmentFailed,
    AttachmentTooLarge,
    ConfigurationError,
)

if TYPE_CHECKING:  # requests loads with the first download
    import requests

__all__ = [
    "RETRY_DELAYS",
    "AttachmentProblem",
    "AttachmentSource",
    "InboundFiles",
    "ReceivedAttachments",
    "agent_note",
    "file_lines",
    "problem_notice",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AttachmentSource:
    """How to download one attachment, as the platform answers it.

    `url` is fetched with a GET carrying `headers` (credentials go to that host only);
    a redirect is followed only to one of `allowed_redirect_hosts` (the platform's own
    file hosts). `name` replaces the announced name when the platform learns a better
    one while resolving the reference (None: keep it). `session` is the
    `requests.Session` to use (None: the download's own). `transform` makes the
    `ChunkTransform` the body passes through before it is counted and written (a CDN's
    decryption; None: the body is the file).
    """

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    allowed_redirect_hosts: tuple[str, ...] = ()
    name: str | None = None
    session: requests.Session | None = None
    transform: Callable[[], ChunkTransform] | None = None


@dataclass(frozen=True)
class AttachmentProblem:
    """An attachment the run goes without, and why (`error` names the file)."""

    attachment: Attachment
    error: AttachmentError


@dataclass(frozen=True)
class ReceivedAttachments:
    """What `InboundFiles.receive()` got: the `files` on disk in `workspace` (None when
    none could be opened), in the order sent, and the `problems`."""

    workspace: Workspace | None
    files: tuple[ReceivedFile, ...]
    problems: tuple[AttachmentProblem, ...]

    def close(self) -> None:
        """Remove the workspace and every file in it (idempotent)."""
        if self.workspace is not None:
            self.workspace.close()


#: Seconds waited before the second and the third attempt of a download that failed in
#: a way a retry may mend (429, 5xx, timeout, reset): three attempts in all.
RETRY_DELAYS: tuple[float, ...] = (0.5, 2.0)


def pause(seconds: float, cancelled: Callable[[], bool]) -> None:
    """Wait up to `seconds` on the run's worker, returning early once `cancelled()`."""
    deadline = time.monotonic() + seconds
    idle = threading.Event()
    while not cancelled():
        left = deadline - time.monotonic()
        if left <= 0:
            return
        idle.wait(min(left, 0.05))


class InboundFiles:
    """Downloads one run's attachments into its workspace (see the module docstring).

    `source` is the platform's `attachment_source(attachment)`; `workspaces` owns the
    per-run directories; `limits` bounds every file and the message as a whole;
    `retry_delays` are the waits before each further attempt of a retryable failure
    (`RETRY_DELAYS`; empty: one attempt); `wait(seconds, cancelled)` waits them
    (`pause`, on the run's worker, cut short by a Stop).
    """

    def __init__(
        self,
        source: Callable[[Attachment], AttachmentSource],
        workspaces: Workspaces,
        limits: DownloadLimits,
        *,
        retry_delays: Sequence[float] = RETRY_DELAYS,
        wait: Callable[[float, Callable[[], bool]], None] = pause,
    ) -> None:
        self._source = source
        self.workspaces = workspaces
        self.limits = limits
        self._delays = tuple(float(d) for d in retry_delays)
        if any(not d >= 0 for d in self._delays):
            raise ConfigurationError("must be seconds >= 0", "retry_delays")
        self._wait = wait

    def receive(
        self,
        run_id: str,
        attachments: Sequence[Attachment],
        cancelled: Callable[[], bool] = lambda: False,
    ) -> ReceivedAttachments:
        """Download `attachments` for the run `run_id`, one after another, stopping
        before the next one once `cancelled()` is true. Never raises for one file:
        its failure is a problem of the result. The caller closes the result."""
        try:
            workspace = self.workspaces.open(run_id)
        except AttachmentError as exc:
            logger.warning("run %s: no workspace for its attachments: %s", run_id, exc)
            problems = tuple(AttachmentProblem(a, exc) for a in attachments)
            return ReceivedAttachments(None, (), problems)
        import requests

        files: list[ReceivedFile] = []
        problems_found: list[AttachmentProblem] = []
        budget = MessageBudget(self.limits.per_message)
        try:
            with requests.Session() as own_session:
                for attachment in attachments:
                    if cancelled():
                        break
                    try:
                        files.append(
                            self._retried(attachment, workspace, own_session, budget, cancelled)
                        )
                    except AttachmentError as exc:
                        logger.info("run %s: attachment not received: %s", run_id, exc)
                        problems_found.append(AttachmentProblem(attachment, exc))
        except BaseException:
            workspace.close()
            raise
        return ReceivedAttachments(workspace, tuple(files), tuple(problems_found))

    def _retried(
        self,
        attachment: Attachment,
        workspace: Workspace,
        own_session: requests.Session,
        budget: MessageBudget,
        cancelled: Callable[[], bool],
    ) -> ReceivedFile:
        """`_one()`, tried again after each of the retry delays while it fails in a way
        a retry may mend and the run goes on; the last failure is raised."""
        delays = iter(self._delays)
        while True:
            try:
                return self._one(attachment, workspace, own_session, budget)
            except AttachmentFailed as exc:
                delay = next(delays, None)
                if delay is None or not exc.retryable or cancelled():
                    raise
                logger.info("attachment download failed, retrying in %.1fs: %s", delay, exc)
                self._wait(delay, cancelled)
                if cancelled():
                    raise

    def _one(
        self,
        attachment: Attachment,
        workspace: Workspace,
        own_session: requests.Session,
        budget: MessageBudget,
    ) -> ReceivedFile:
        name = attachment.name
        if attachment.size is not None and attachment.size > self.limits.per_file:
            # refused on the platform's word before asking for it; a smaller declaration
            # is never trusted (the download counts the bytes)
            raise AttachmentTooLarge(
                name=sanitize_name(name), limit=self.limits.per_file, size=attachment.size
            )
        try:
            source = self._source(attachment)
        except AttachmentError:
            raise
        except Exception as exc:  # the platform's lookup (e.g. getFile) failed
            raise AttachmentFailed(
                name=sanitize_name(name),
                reason=f"the platform did not give its download ({type(exc).__name__}: "
                f"{str(exc)[:200]})",
            ) from exc
        return download(
            source.session or own_session,
            source.url,
            workspace.path,
            name=source.name or name,
            headers=source.headers,
            allowed_redirect_hosts=source.allowed_redirect_hosts,
            limits=self.limits,
            budget=budget,
            transform=source.transform,
        )


def human_size(count: int) -> str:
    """`count` bytes for people: ``20 MB``, ``512 KB``, ``900 bytes``."""
    if count >= MB:
        return f"{count / MB:.3g} MB"
    if count >= 1024:
        return f"{count / 1024:.3g} KB"
    return f"{count} bytes"


def problem_notice(problems: Sequence[AttachmentProblem], texts: Messages) -> str:
    """The one message telling the person which files were not received (a line each,
    naming the file and, when it was too large, the limit)."""
    lines = []
    for problem in problems:
        error = problem.error
        if isinstance(error, AttachmentTooLarge):
            line = MSG_ATTACHMENT_TOO_LARGE.format(name=error.name, limit=human_size(error.limit))
        else:
            line = MSG_ATTACHMENT_NOT_RECEIVED.format(name=error.name)
        lines.append(texts.text(line))
    return "\n".join(lines)


def agent_note(problems: Sequence[AttachmentProblem]) -> str:
    """The lines added to the agent's prompt for the files it will not get."""
    lines = []
    for problem in problems:
        error = problem.error
        if isinstance(error, AttachmentTooLarge):
            why = f"it is larger than the limit of {human_size(error.limit)}"
        else:
            why = str(getattr(error, "reason", "") or type(error).__name__)
        lines.append(f"[The person also sent {error.name!r}, which was not received: {why}]")
    return "\n".join(lines)


def file_lines(files: Sequence[ReceivedFile]) -> str:
    """One line per received file naming its local path, for bridges that take text only
    (`AcpBridge` builds prompt content blocks instead, with the same line for a file the
    agent cannot take as a block)."""
    return "\n".join(
        f"[Attachment {f.name!r} ({f.content_type}, {f.size} bytes) saved at {f.path}]"
        for f in files
    )
