"""Shapes of the core contexts the presenter reads (matched structurally)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from channelkit.platforms.dingtalk.card_api import CardTarget

__all__ = [
    "CallbackResult",
    "InputRequestLike",
    "OwnerLike",
    "QuestionLike",
    "SegmentLike",
    "TargetLike",
]


class OwnerLike(Protocol):
    @property
    def id(self) -> str: ...


class TargetLike(Protocol):
    @property
    def chat_id(self) -> str: ...

    @property
    def sender_id(self) -> str: ...

    @property
    def is_group(self) -> bool: ...


class SegmentLike(Protocol):
    @property
    def session_id(self) -> str: ...

    @property
    def run_id(self) -> str: ...

    @property
    def segment_id(self) -> str: ...

    @property
    def owner(self) -> OwnerLike: ...

    @property
    def target(self) -> TargetLike: ...


class QuestionLike(Protocol):
    @property
    def answer_key(self) -> str: ...

    @property
    def header(self) -> str: ...

    @property
    def question(self) -> str: ...

    @property
    def options(self) -> Sequence[Any]: ...

    @property
    def multi_select(self) -> bool: ...


class InputRequestLike(Protocol):
    @property
    def request_id(self) -> str: ...

    @property
    def session_id(self) -> str: ...

    @property
    def run_id(self) -> str: ...

    @property
    def owner(self) -> OwnerLike: ...

    @property
    def target(self) -> TargetLike: ...

    @property
    def questions(self) -> Sequence[QuestionLike]: ...

    @property
    def submit_option_id(self) -> str: ...

    def on_settled(self, listener: Callable[[str], Any]) -> Callable[[], Any]: ...

    def respond(self, response: Mapping[str, Any]) -> bool: ...


@dataclass(frozen=True)
class CallbackResult:
    """What a card callback amounts to, decided synchronously before the ACK.

    ``accepted`` carries ``execute`` (run on the pool after the ACK); ``forbidden`` carries
    the ``target`` to notify once; ``ignored`` does nothing.
    """

    kind: Literal["accepted", "forbidden", "ignored"]
    actor_id: str | None = None
    target: CardTarget | None = None
    execute: Callable[[], None] | None = None

    @classmethod
    def ignored(cls, actor_id: str | None = None) -> CallbackResult:
        return cls("ignored", actor_id)


def option_label(option: Any) -> str:
    """The label of a question option (an object with ``label`` or a (label, desc) pair)."""
    label = getattr(option, "label", None)
    if isinstance(label, str):
        return label
    if isinstance(option, Mapping) and isinstance(option.get("label"), str):
        return str(option["label"])
    if isinstance(option, tuple | list) and option and isinstance(option[0], str):
        return option[0]
    return str(option)
