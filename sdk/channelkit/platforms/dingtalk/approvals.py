"""DingTalk approval cards: an ordinary tool permission on the question card template.

DingTalk cards come from fixed templates, so there is no free-form button row. A tool
permission whose agent offers :data:`MIN_OPTIONS` to :data:`MAX_OPTIONS` options (the
question template's choice bounds) is shown as a question card with ONE single-choice
question: its title is the tool call's title, its text the explanation, and its choices
are the agent's options in its order (labelled with the option's name; the option's
kind is added when two names are the same). The template's custom "Other" choice and
its text input are left out of the card. Any other permission keeps the text prompt
(``/approve``, ``/approve-always``, ``/deny``), which also keeps working while the card
is shown.

The card is a :class:`~channelkit.platforms.dingtalk.questions.QuestionCardController`
card on the presenter's own registry, so callbacks reach it through the presenter's usual
routing and it is owner-only, one-shot, tombstoned and expires exactly like a question
card (``EXPIRY_MARGIN`` before core's deadline; the request is then answered cancelled).
The adapter wraps the permission in :class:`PermissionAsQuestion`, which translates the
card's answer: Submit selects the chosen option's id through the request's one-shot
responder; the card's Cancel selects the agent's reject option (``reject_once`` first),
or answers cancelled when there is none. Buttons and commands race on that responder,
so exactly one wins; when another surface won, the card shows the winner (``✅ Allow``,
``❌ Reject``, ``✖️ Cancelled``) in place.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from channelkit.core.approvals import PermissionRequestContext, describe_outcome
from channelkit.core.types import UserInputPresentationResult
from channelkit.platforms.dingtalk.api import CardTarget
from channelkit.platforms.dingtalk.questions import QuestionCardController

if TYPE_CHECKING:
    from channelkit.platforms.dingtalk.adapter import DingtalkChannel
    from channelkit.platforms.dingtalk.output import DingtalkPresenter

__all__ = [
    "ANSWER_KEY",
    "MAX_OPTIONS",
    "MIN_OPTIONS",
    "PermissionAsQuestion",
    "PermissionRequestContext",
    "present_approval_card",
]

logger = logging.getLogger(__name__)

#: The question template's choice bounds.
MIN_OPTIONS = 2
MAX_OPTIONS = 4
#: The one question's answer key (the form field name).
ANSWER_KEY = "0"
_OTHER_SUFFIX = "_other"
#: Approval cards whose outcome is remembered for their in-place end state.
MAX_LIVE_APPROVALS = 1_000


@dataclass(frozen=True)
class _Choice:
    label: str
    option_id: str


@dataclass(frozen=True)
class _Question:
    answer_key: str
    header: str
    question: str
    options: tuple[_Choice, ...]
    multi_select: bool = False


def option_labels(ctx: PermissionRequestContext) -> list[str]:
    """One distinct label per agent option: its name (``name (kind)`` on a clash)."""
    names = [(o.name or o.option_id).strip()[:60] or o.option_id for o in ctx.options]
    labels = []
    for index, (name, option) in enumerate(zip(names, ctx.options, strict=True)):
        label = name if names.count(name) == 1 else f"{name} ({option.kind or index + 1})"
        labels.append(label if label not in labels else f"{label} #{index + 1}")
    return labels


class PermissionAsQuestion:
    """A :class:`PermissionRequestContext` seen by the question card controller as a
    one-question input request (see the module docstring)."""

    def __init__(self, ctx: PermissionRequestContext, registry: Any) -> None:
        self.ctx = ctx
        self._registry = registry
        choices = tuple(
            _Choice(label, option.option_id)
            for label, option in zip(option_labels(ctx), ctx.options, strict=True)
        )
        header = ctx.title
        self.questions = (_Question(ANSWER_KEY, header, ctx.explanation or header, choices),)
        self.submit_option_id = "permission"

    @property
    def request_id(self) -> str:
        return self.ctx.request_id

    @property
    def session_id(self) -> str:
        return self.ctx.session_id

    @property
    def run_id(self) -> str:
        return self.ctx.run_id

    @property
    def owner(self) -> Any:
        return self.ctx.owner

    @property
    def target(self) -> Any:
        return self.ctx.target

    @property
    def expires_at(self) -> float:
        return self.ctx.expires_at

    def on_settled(self, listener: Callable[[str], Any]) -> Callable[[], Any]:
        return self.ctx.on_settled(lambda reason: listener(str(reason)))

    def reject_option_id(self) -> str | None:
        for prefix in ("reject_once", "reject"):
            for option in self.ctx.options:
                if str(option.kind or "").startswith(prefix):
                    return option.option_id
        return None

    def respond(self, response: Mapping[str, Any]) -> bool:
        """The card's answer as the agent's option (one-shot)."""
        outcome = response.get("outcome") or {}
        if outcome.get("outcome") == "selected":
            chosen = (response.get("answers") or {}).get(ANSWER_KEY)
            for choice in self.questions[0].options:
                if choice.label == chosen:
                    return self.ctx.select(choice.option_id)
            return self.ctx.respond({"outcome": {"outcome": "cancelled"}})
        record = self._registry.get(self.request_id)
        if record is not None and record.state.state == "claimed":
            # the card's own Cancel (expiry ends the card before it cancels)
            reject = self.reject_option_id()
            if reject is not None:
                return self.ctx.select(reject)
        return self.ctx.respond({"outcome": {"outcome": "cancelled"}})


class _ApprovalCardApi:
    """The card API of approval cards: no "Other" choice on the card, and the winner of
    a settlement elsewhere shown in place."""

    def __init__(self, api: Any, registry: Any) -> None:
        self._api = api
        self._registry = registry
        self._lock = threading.Lock()
        self._live: dict[str, PermissionAsQuestion] = {}  # request id -> live wrapper

    def watch(self, wrapper: PermissionAsQuestion) -> None:
        with self._lock:
            while len(self._live) >= MAX_LIVE_APPROVALS:
                self._live.pop(next(iter(self._live)))
            self._live[wrapper.request_id] = wrapper

    def forget(self, request_id: str) -> None:
        with self._lock:
            self._live.pop(request_id, None)

    def create_and_deliver(
        self, template_id: str, out_track_id: str, target: CardTarget, data: dict[str, Any]
    ) -> Any:
        form = data.get("form") or {}
        fields = []
        for entry in form.get("fields") or ():
            if str(entry.get("name", "")).endswith(_OTHER_SUFFIX):
                continue
            options = [o for o in entry.get("options") or () if o.get("text") != "Other"]
            fields.append({**entry, "options": options})
        return self._api.create_and_deliver(
            template_id, out_track_id, target, {**data, "form": {"fields": fields}}
        )

    def update_instance(self, out_track_id: str, params: Mapping[str, str]) -> Any:
        tomb = self._registry.tombstone(out_track_id)
        with self._lock:
            wrapper = self._live.pop(tomb.request_id, None) if tomb is not None else None
        outcome = wrapper.ctx.outcome() if wrapper is not None else None
        if wrapper is not None and outcome is not None and outcome.kind != "expired":
            params = {
                **params,
                "question_desc": f"{wrapper.ctx.title}\n\n{describe_outcome(outcome)}",
            }
        return self._api.update_instance(out_track_id, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)


class _ApprovalCards:
    """A question card controller for approvals, sharing the presenter's registry."""

    def __init__(self, presenter: DingtalkPresenter, questions: QuestionCardController) -> None:
        self.api = _ApprovalCardApi(questions._api, questions.registry)
        self.controller = QuestionCardController(
            self.api,  # type: ignore[arg-type]
            clock=questions._clock,
            scheduler=questions._scheduler,
            timeout_seconds=questions._timeout,
            send_text=questions._send_text,
            on_template_rejected=lambda: presenter.question_switch.reject_globally("template"),
            registry=questions.registry,
            notify_forbidden=questions.notify_forbidden,
        )


_CARDS: weakref.WeakKeyDictionary[Any, _ApprovalCards] = weakref.WeakKeyDictionary()


def _cards_of(presenter: DingtalkPresenter, questions: QuestionCardController) -> _ApprovalCards:
    with questions.registry.lock:
        cards = _CARDS.get(presenter)
        if cards is None:
            cards = _CARDS[presenter] = _ApprovalCards(presenter, questions)
        return cards


def present_approval_card(
    channel: DingtalkChannel, context: PermissionRequestContext
) -> UserInputPresentationResult:
    """``DingtalkChannel.present_permission_request``: the agent's options as one
    single-choice question card; UNSUPPORTED (text prompt) without question cards, for
    a run not bound to cards, or with fewer than 2 / more than 4 options."""
    presenter = channel.presenter
    unsupported = UserInputPresentationResult.UNSUPPORTED
    if presenter is None or presenter.questions is None:
        return unsupported
    if not MIN_OPTIONS <= len(context.options) <= MAX_OPTIONS:
        return unsupported
    binding = presenter._eligible(context.run_id, context.owner.id, context.target.chat_id)
    if binding is None or bool(context.target.is_group) != binding.is_group:
        return unsupported
    if not presenter.question_switch.allows(binding.chat_id):
        return unsupported
    cards = _cards_of(presenter, presenter.questions)
    wrapper = PermissionAsQuestion(context, presenter.questions.registry)
    cards.api.watch(wrapper)
    result = cards.controller.present(
        wrapper,
        owner_key=binding.owner_key,
        chat_id=binding.chat_id,
        target=binding.card_target,
        queue=binding.queue,
        timeout=channel.question_lifetime(),
    )
    if result != "presented":
        cards.api.forget(context.request_id)
    return UserInputPresentationResult(result)
