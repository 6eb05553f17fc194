"""DingTalk approval cards: an ordinary tool permission on the question card template.

DingTalk cards come from fixed templates, so there is no free-form button row. A tool
permission whose agent offers `MIN_OPTIONS` to `MAX_OPTIONS` options (the
question template's choice bounds) is shown as a question card with ONE single-choice
question: its title is the tool call's title, its text the explanation, and its choices
are the agent's options in its order (labelled with the option's name; the option's
kind is added when two names are the same). The template's custom "Other" choice and
its text input are left out of the card. Any other permission keeps the text prompt
(``/approve``, ``/approve-always``, ``/deny``), which also keeps working while the card
is shown.

The card is a `QuestionCardController`
card on the presenter's own registry, so callbacks reach it through the presenter's usual
routing and it is owner-only, one-shot, tombstoned and expires exactly like a question
card (``EXPIRY_MARGIN`` before core's deadline; the request is then answered cancelled).
The adapter builds one `ApprovalCards` (its own controller over an
`ApprovalCardApi`) and calls `ApprovalCards.present()` from
``present_permission_request``. The permission is wrapped in
`PermissionAsQuestion`, which translates the
card's answer: Submit selects the chosen option's id through the request's one-shot
responder; the card's Cancel selects the agent's reject option (``reject_once`` first),
or answers cancelled when there is none. Buttons and commands race on that responder,
so exactly one wins; when another surface won, the card shows the winner (``✅ Allow``,
``❌ Reject``, ``✖️ Cancelled``) in place.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from channelkit.core.approvals import PermissionRequestContext, describe_outcome
from channelkit.core.catalog import Messages
from channelkit.core.types import UserInputPresentationResult
from channelkit.platforms.common.native_input import answer_response
from channelkit.platforms.common.registry import CardRegistry
from channelkit.platforms.common.types import Clock, Scheduler
from channelkit.platforms.dingtalk.api import CardTarget
from channelkit.platforms.dingtalk.output import DingtalkPresenter
from channelkit.platforms.dingtalk.questions import (
    OTHER_OPTION_VALUE,
    ForbiddenNotice,
    QuestionCardApi,
    QuestionCardController,
    QuestionRecord,
    QuestionTombstone,
)

__all__ = [
    "ANSWER_KEY",
    "MAX_OPTIONS",
    "MIN_OPTIONS",
    "ApprovalCardApi",
    "ApprovalCards",
    "PermissionAsQuestion",
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
#: The permission's cancelled answer (no option matches, no reject option, or expiry).
CANCELLED = answer_response("", None)

#: The presenter's question card registry, which approval cards share.
QuestionRegistry = CardRegistry[QuestionRecord, QuestionTombstone]


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
    """A `PermissionRequestContext` seen by the question card controller as a
    one-question input request (see the module docstring)."""

    def __init__(self, ctx: PermissionRequestContext, registry: QuestionRegistry) -> None:
        self.ctx = ctx
        self._registry = registry
        choices = tuple(
            _Choice(label, option.option_id)
            for label, option in zip(option_labels(ctx), ctx.options, strict=True)
        )
        header = ctx.title
        self.questions = (_Question(ANSWER_KEY, header, ctx.explanation or header, choices),)
        self.submit_option_id = "permission"
        self._won = threading.Event()

    @property
    def answered_here(self) -> bool:
        """True once the card's own answer (Submit or Cancel) won the request: its end
        state then shows that answer, not the outcome line of another surface."""
        return self._won.is_set()

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
        """The card's answer as the agent's option (one-shot); True when it won."""
        won = self._respond(response)
        if won:
            self._won.set()
        return won

    def _respond(self, response: Mapping[str, Any]) -> bool:
        outcome = response.get("outcome") or {}
        if outcome.get("outcome") == "selected":
            chosen = (response.get("answers") or {}).get(ANSWER_KEY)
            for choice in self.questions[0].options:
                if choice.label == chosen:
                    return self.ctx.select(choice.option_id)
            return self.ctx.respond(CANCELLED)
        record = self._registry.get(self.request_id)
        if record is not None and record.state.state == "claimed":
            # the card's own Cancel (expiry ends the card before it cancels)
            reject = self.reject_option_id()
            if reject is not None:
                return self.ctx.select(reject)
        return self.ctx.respond(CANCELLED)


class ApprovalCardApi:
    """The card calls of approval cards: no "Other" choice on the card, and the winner
    of a settlement elsewhere shown in place. Wraps the adapter's ``CardApi`` (the two
    calls of `QuestionCardApi`); ``texts_for`` gives the catalog texts of an approval's
    owner (the outcome line is in their language)."""

    def __init__(
        self,
        api: QuestionCardApi,
        registry: QuestionRegistry,
        texts_for: Callable[[str | None], Messages] | None = None,
    ) -> None:
        self._api = api
        self._registry = registry
        self._texts_for = texts_for
        self._lock = threading.Lock()
        self._live: dict[str, PermissionAsQuestion] = {}  # request id -> live wrapper

    def watch(self, wrapper: PermissionAsQuestion) -> None:
        """Remember a presented approval, to show its outcome when its card ends."""
        with self._lock:
            while len(self._live) >= MAX_LIVE_APPROVALS:
                self._live.pop(next(iter(self._live)))
            self._live[wrapper.request_id] = wrapper

    def forget(self, request_id: str) -> None:
        """Drop an approval that was not presented."""
        with self._lock:
            self._live.pop(request_id, None)

    def create_and_deliver(
        self,
        template_id: str,
        out_track_id: str,
        target: CardTarget,
        card_param_map: Mapping[str, Any],
    ) -> None:
        """The question card without its "Other" choice and text input."""
        form = card_param_map.get("form") or {}
        fields = []
        for entry in form.get("fields") or ():
            if str(entry.get("name", "")).endswith(_OTHER_SUFFIX):
                continue
            options = [
                o for o in entry.get("options") or () if o.get("value") != OTHER_OPTION_VALUE
            ]
            fields.append({**entry, "options": options})
        self._api.create_and_deliver(
            template_id, out_track_id, target, {**card_param_map, "form": {"fields": fields}}
        )

    def _outcome_line(self, wrapper: PermissionAsQuestion, outcome: Any) -> str:
        texts = None if self._texts_for is None else self._texts_for(wrapper.owner.id)
        return describe_outcome(outcome, texts)

    def update_instance(self, out_track_id: str, card_param_map: Mapping[str, Any]) -> None:
        """The card's end state, naming the winner when another surface answered.

        The card's own answer keeps the card's end state (its answer shown), however
        soon the request's outcome is recorded: that is decided by the answer itself,
        before the card ends, not by which write comes first."""
        tomb = self._registry.tombstone(out_track_id)
        with self._lock:
            wrapper = self._live.pop(tomb.request_id, None) if tomb is not None else None
        if wrapper is not None and wrapper.answered_here:
            wrapper = None
        outcome = wrapper.ctx.outcome() if wrapper is not None else None
        if wrapper is not None and outcome is not None and outcome.kind != "expired":
            card_param_map = {
                **card_param_map,
                "question_desc": f"{wrapper.ctx.title}\n\n{self._outcome_line(wrapper, outcome)}",
            }
        self._api.update_instance(out_track_id, card_param_map)


class ApprovalCards:
    """The DingTalk adapter's approval cards (``present_permission_request``).

    Built once by the adapter when it has question cards: ``api`` is its card API,
    ``presenter`` its presenter (whose run bindings, question switch and question
    registry approval cards share, so callbacks reach them through the presenter's
    usual routing), ``clock``, ``scheduler``, ``timeout_seconds``, ``send_text`` and
    ``notify_forbidden`` as for the presenter's question cards, ``lifetime`` the
    channel's current question lifetime (read for every card), and ``texts_for`` the
    catalog texts of a card's owner (the card's labels are in their language).
    """

    def __init__(
        self,
        api: QuestionCardApi,
        *,
        presenter: DingtalkPresenter,
        registry: QuestionRegistry,
        clock: Clock,
        scheduler: Scheduler,
        timeout_seconds: float,
        send_text: Callable[[str, str], Any],
        notify_forbidden: ForbiddenNotice | None,
        lifetime: Callable[[], float],
        texts_for: Callable[[str | None], Messages] | None = None,
    ) -> None:
        self._presenter = presenter
        self._registry = registry
        self._lifetime = lifetime
        self.api = ApprovalCardApi(api, registry, texts_for)
        switch = presenter.question_switch
        self.controller = QuestionCardController(
            self.api,
            clock=clock,
            scheduler=scheduler,
            timeout_seconds=timeout_seconds,
            send_text=send_text,
            on_template_rejected=lambda: switch.reject_globally("template"),
            registry=registry,
            notify_forbidden=notify_forbidden,
            texts_for=texts_for,
        )

    def present(self, context: PermissionRequestContext) -> UserInputPresentationResult:
        """The agent's options as one single-choice question card; UNSUPPORTED (text
        prompt) for a run not bound to cards, with question cards switched off for the
        chat, or with fewer than 2 / more than 4 options."""
        unsupported = UserInputPresentationResult.UNSUPPORTED
        if not MIN_OPTIONS <= len(context.options) <= MAX_OPTIONS:
            return unsupported
        presenter = self._presenter
        binding = presenter.eligible(context.run_id, context.owner.id, context.target.chat_id)
        if binding is None or bool(context.target.is_group) != binding.is_group:
            return unsupported
        if not presenter.question_switch.allows(binding.chat_id):
            return unsupported
        wrapper = PermissionAsQuestion(context, self._registry)
        self.api.watch(wrapper)
        result = self.controller.present(
            wrapper,
            owner_key=binding.owner_key,
            chat_id=binding.chat_id,
            target=binding.card_target,
            queue=binding.queue,
            timeout=self._lifetime(),
        )
        if result != "presented":
            self.api.forget(context.request_id)
        return UserInputPresentationResult(result)


if TYPE_CHECKING:
    from channelkit.platforms.common.contract import ApprovalSurface

    def _satisfies_the_contract(cards: ApprovalCards) -> None:
        """mypy: the approval cards are DingTalk's question surface for approvals."""
        approvals: ApprovalSurface = cards
        del approvals
