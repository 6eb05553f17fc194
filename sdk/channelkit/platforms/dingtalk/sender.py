"""DingTalk presentation delivery: `DingtalkSender` on the generated ``DingtalkClient``.

Pairs `channelkit.platforms.dingtalk.renderer` with ``channelkit.clients.dingtalk``
and satisfies `PresentationSender`::

    from channelkit.clients.dingtalk import DingtalkClient
    from channelkit.platforms.dingtalk.sender import DingtalkSender
    from channelkit.presentation.outbound import deliver, register_sender

    register_sender(DingtalkSender(DingtalkClient(...), robot_code="ding..."))

The target is a group ``openConversationId`` (``cid...``: ``groupMessages/send``) or a
user id (``user:<userId>`` or any other id: ``oToMessages/batchSend`` to that user); a
``route`` callable may decide instead (``DingtalkChannel`` passes the routes it learnt
from inbound messages). The message id is the send's ``processQueryKey``. Robot
messages cannot be pinned. Platform errors propagate as
`channelkit.errors.ApiError` subclasses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from channelkit.platforms.dingtalk import renderer
from channelkit.presentation.model import MessagePresentation
from channelkit.presentation.outbound import SenderBase, response_message_id

if TYPE_CHECKING:
    from channelkit.clients.dingtalk import DingtalkClient
    from channelkit.platforms.dingtalk.api import CardApi

__all__ = ["DingtalkSender", "Route", "default_route"]

#: ``target -> (is_group, id)``: a group's openConversationId or a user's id.
Route = Callable[[str], tuple[bool, str]]

USER_PREFIX = "user:"


def default_route(target: str) -> tuple[bool, str]:
    """``cid...`` is a group; ``user:<id>`` (or any other id) a user's 1:1 chat."""
    if target.startswith(USER_PREFIX):
        return False, target[len(USER_PREFIX) :]
    return target.startswith("cid"), target


class DingtalkSender(SenderBase):
    """Robot ``sampleMarkdown`` messages to groups and 1:1 chats (no pinning)."""

    platform = "dingtalk"
    presentation_capabilities = renderer.CAPABILITIES
    delivery_capabilities = renderer.DELIVERY_CAPABILITIES

    def __init__(
        self,
        client: DingtalkClient,
        robot_code: str,
        *,
        route: Route | None = None,
        timeout: tuple[float, float] | None = None,
    ) -> None:
        self.client = client
        self.robot_code = robot_code
        self._route = route or default_route
        self._timeout = timeout

    @classmethod
    def for_api(cls, api: CardApi, *, route: Route | None = None) -> DingtalkSender:
        """A sender sharing a `CardApi`'s client."""
        return cls(api.client, api.robot_code, route=route, timeout=api.timeout)

    def render(
        self, presentation: MessagePresentation, *, text: str | None = None
    ) -> list[dict[str, Any]]:
        """``sampleMarkdown`` bodies (``msgKey`` + ``msgParam``)."""
        return renderer.render(presentation, text=text)

    def send(self, target: str, message: dict[str, Any]) -> str | None:
        """Send one message; returns its ``processQueryKey``."""
        is_group, key = self._route(target)
        body = {"robotCode": self.robot_code, **message}
        response: Any
        if is_group:
            response = self.client.send_robot_group_message(
                body={**body, "openConversationId": key}, timeout=self._timeout
            )
        else:
            response = self.client.batch_send_robot_oto_messages(
                body={**body, "userIds": [key]}, timeout=self._timeout
            )
        return response_message_id(getattr(response, "process_query_key", None), "processQueryKey")
