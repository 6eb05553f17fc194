"""Slack presentation delivery: `SlackSender` on the generated ``SlackClient``.

Pairs `channelkit.platforms.slack.renderer` with ``channelkit.clients.slack`` and
satisfies `PresentationSender`::

    from channelkit.clients.slack import SlackClient
    from channelkit.platforms.slack.sender import SlackSender
    from channelkit.presentation.outbound import deliver, register_sender

    register_sender(SlackSender(SlackClient(...)))

The target is a Slack channel id; a message's id is its ``ts``. ``SlackChannel`` uses it
for ``send_presentation``, ``Turn.present`` and its pins (with ``thread_ts`` set to the
conversation's thread). Platform errors propagate as
`channelkit.errors.ApiError` subclasses, except the two answers that mean the
wanted state already holds: ``already_pinned`` from ``pins.add`` and ``no_pin`` /
``not_pinned`` from ``pins.remove``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from channelkit.errors import ApiError
from channelkit.http.model import UNSET
from channelkit.platforms.slack import renderer
from channelkit.presentation.model import MessagePresentation
from channelkit.presentation.outbound import SenderBase, response_message_id

if TYPE_CHECKING:
    from channelkit.clients.slack import SlackClient

__all__ = ["SlackSender"]

#: ``pins.add`` answers that leave the message pinned.
PINNED_ALREADY = frozenset({"already_pinned"})
#: ``pins.remove`` answers that leave the message unpinned.
UNPINNED_ALREADY = frozenset({"no_pin", "not_pinned"})


class SlackSender(SenderBase):
    """``chat.postMessage`` + ``pins.add`` / ``pins.remove`` / ``pins.list`` (``notify``
    has no Slack equivalent: Slack itself posts a "pinned a message" line)."""

    platform = "slack"
    presentation_capabilities = renderer.CAPABILITIES
    delivery_capabilities = replace(renderer.DELIVERY_CAPABILITIES, unpin=True, list_pins=True)

    def __init__(self, client: SlackClient, *, thread_ts: str | None = None) -> None:
        self.client = client
        self.thread_ts = thread_ts

    def render(
        self,
        presentation: MessagePresentation,
        *,
        text: str | None = None,
        allow_mass_mentions: bool = False,
    ) -> list[dict[str, Any]]:
        """Block Kit message bodies."""
        return renderer.render(presentation, text=text, allow_mass_mentions=allow_mass_mentions)

    def send(self, target: str, message: dict[str, Any]) -> str | None:
        """Post one message (in ``thread_ts`` when set); returns its ``ts``."""
        body = {"channel": target, **message}
        if self.thread_ts is not None:
            body["thread_ts"] = self.thread_ts
        response = self.client.chat_post_message(body=body)
        return response_message_id(response.ts, "ts")

    def pin(self, target: str, message_id: str, *, notify: bool) -> None:
        """``pins.add`` for the message ``ts`` (already pinned counts as done)."""
        try:
            self.client.pins_add(body={"channel": target, "timestamp": message_id})
        except ApiError as exc:
            if exc.code not in PINNED_ALREADY:
                raise

    def unpin(self, target: str, message_id: str) -> None:
        """``pins.remove`` for the message ``ts`` (not pinned counts as done)."""
        try:
            self.client.pins_remove(body={"channel": target, "timestamp": message_id})
        except ApiError as exc:
            if exc.code not in UNPINNED_ALREADY:
                raise

    def pins(self, target: str) -> list[str]:
        """The ``ts`` of every message pinned in the channel (``pins.list``, in Slack's
        order: the latest pin first); pinned files are left out."""
        response = self.client.pins_list(body={"channel": target})
        items = [] if response.items is UNSET else response.items
        out: list[str] = []
        for item in items:
            message = item.message
            if item.type not in (UNSET, "message") or message is UNSET:
                continue
            ts = message.ts
            if isinstance(ts, str) and ts:
                out.append(ts)
        return out
