"""Configuration of the Slack agent channel.

`SlackConfig` holds the Slack-only settings: the bot token, the signing secret of
the Events API, the optional app-level token (Socket Mode), the ingress, the streaming
and question options. It is validated on construction; every error is a
`ConfigurationError` naming the offending field. Secrets never
appear in ``repr``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from channelkit.errors import ConfigurationError
from channelkit.platforms.common.config import (
    check_http_url,
    check_non_empty,
    check_positive_seconds,
    register_secrets,
    secret_repr,
)

__all__ = ["DEFAULT_API_BASE_URL", "INGRESS_MODES", "STREAMING_MODES", "SlackConfig"]

#: Production Web API base URL (``https://slack.com/api/<method>``).
DEFAULT_API_BASE_URL = "https://slack.com/api"
#: How events reach the channel: the Events API over HTTP, or Socket Mode.
INGRESS_MODES = ("events", "socket")
#: How a live output segment is shown: ``chat.startStream`` streams (falling back to
#: post-and-update when streaming is refused), post-and-update only, or nothing until
#: the segment ends.
STREAMING_MODES = ("stream", "update", "off")


def _check_token(value: object, prefix: str, path: str) -> None:
    if not isinstance(value, str) or not value.startswith(prefix) or len(value) < len(prefix) + 4:
        raise ConfigurationError(f"must be a Slack token starting with {prefix!r}", path=path)


@dataclass(frozen=True)
class SlackConfig:
    """Slack agent channel settings.

    ``bot_token``: the bot user OAuth token (``xoxb-...``).
    ``signing_secret``: the app's signing secret; every Events API and interactivity
    request must carry a valid ``X-Slack-Signature`` made with it (required with
    ``ingress="events"``).
    ``app_token``: the app-level token (``xapp-...``), required with ``ingress="socket"``.
    ``ingress``: ``"events"`` (default: mount `SlackChannel.ingress_routes()`) or
    ``"socket"`` (Socket Mode).
    ``channel_name``: the channel name used in sessions and lifecycle events.
    ``api_base_url``: Web API base URL (tests point it at 127.0.0.1).
    ``streaming``: ``"stream"`` (default), ``"update"`` or ``"off"``
    (`STREAMING_MODES`).
    ``stream_interval_s``: minimum seconds between two streaming calls of a segment
    (0.5 s by default; the channel never goes below 0.6 s, the Tier 4 budget of
    ``chat.appendStream``: 100 calls a minute).
    ``update_interval_s``: minimum seconds between two ``chat.update`` calls of a
    segment in the post-and-update fallback (1 s by default).
    ``native_questions``: present structured questions as Block Kit forms.
    ``question_timeout_s``: lifetime of a form before it expires.
    ``request_timeout_s``: read timeout of every Web API call.
    ``assistant_status``: show ``assistant.threads.setStatus`` while a run works in an
    assistant thread.
    ``run_journal``: a file recording the people's runs in progress when no state store
    is shared: after a crash (``kill -9``) the restarted process tells each person whose
    run was cut off that it was interrupted (`channelkit.platforms.common.run_journal`;
    with ``state.redis`` the store records them). ``None`` (default): without a store
    nothing is recorded, and such a person is not told.
    """

    bot_token: str = field(repr=False)
    signing_secret: str | None = field(default=None, repr=False)
    app_token: str | None = field(default=None, repr=False)
    ingress: str = "events"
    channel_name: str = "slack"
    api_base_url: str = DEFAULT_API_BASE_URL
    streaming: str = "stream"
    stream_interval_s: float = 0.5
    update_interval_s: float = 1.0
    native_questions: bool = True
    question_timeout_s: float = 270.0
    request_timeout_s: float = 10.0
    assistant_status: bool = True
    run_journal: str | None = None

    def __post_init__(self) -> None:
        register_secrets(self.bot_token, self.signing_secret, self.app_token)
        _check_token(self.bot_token, "xoxb-", "slack.bot_token")
        if self.ingress not in INGRESS_MODES:
            raise ConfigurationError(
                f"must be one of {', '.join(repr(m) for m in INGRESS_MODES)}",
                path="slack.ingress",
            )
        if self.signing_secret is not None and (
            not isinstance(self.signing_secret, str) or not self.signing_secret.strip()
        ):
            raise ConfigurationError("must be a non-empty string", path="slack.signing_secret")
        if self.ingress == "events" and self.signing_secret is None:
            raise ConfigurationError(
                'is required with ingress "events"', path="slack.signing_secret"
            )
        if self.app_token is not None:
            _check_token(self.app_token, "xapp-", "slack.app_token")
        elif self.ingress == "socket":
            raise ConfigurationError('is required with ingress "socket"', path="slack.app_token")
        if self.streaming not in STREAMING_MODES:
            raise ConfigurationError(
                f"must be one of {', '.join(repr(m) for m in STREAMING_MODES)}",
                path="slack.streaming",
            )
        check_non_empty(self.channel_name, "slack.channel_name")
        if self.run_journal is not None:
            check_non_empty(self.run_journal, "slack.run_journal")
        check_http_url(self.api_base_url, "slack.api_base_url")
        check_positive_seconds(self.stream_interval_s, "slack.stream_interval_s", maximum=60.0)
        check_positive_seconds(self.update_interval_s, "slack.update_interval_s", maximum=60.0)
        check_positive_seconds(self.question_timeout_s, "slack.question_timeout_s")
        check_positive_seconds(self.request_timeout_s, "slack.request_timeout_s")
        for name in ("native_questions", "assistant_status"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigurationError("must be a boolean", path=f"slack.{name}")

    def __repr__(self) -> str:
        """The settings with every secret shown as ``***`` (or left out)."""
        return secret_repr(self, ("bot_token", "signing_secret", "app_token"))

    __str__ = __repr__
