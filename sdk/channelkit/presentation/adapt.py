"""``adapt``: degrade a presentation to what a channel declares it can render.

Order of operations (see docs/presentation.md):

1. Global button priority selection: when the shared action budget (after reserving
   one action and one row per renderable select) cannot hold every renderable button,
   the highest ``priority`` buttons win (ties keep authored order).
2. Walk the blocks in order. Per button/option: label truncation, oversized callback
   values dropped, disabled buttons dropped unless supported, styles dropped unless
   supported. Per buttons block: cut to the running budget (priority, then authored
   order), split into rows of ``max_actions_per_row``; every button that did not make
   it becomes a readable ``Actions:`` list right after the block. Selects keep their
   first ``max_options`` valid options (the rest are listed after the select).
   Unsupported kinds degrade: buttons/selects to lists, context to text, dividers
   are dropped.
3. Text limits last: the title is truncated; an authored text/context block longer
   than ``max_length`` is split into several blocks (``continuation=True`` on the later
   ones) up to ``max_message_length`` and cut past it (cut at ``max_length`` when no
   message length is declared); the generated lists are split into several blocks
   (never losing a label). Cuts fall on grapheme-cluster boundaries (no emoji sequence,
   flag or combining mark is split; see `channelkit.presentation.text`).

Link buttons keep their ``url`` only when it is an http(s) URL or one of the channel's
declared ``link_schemes`` (`channelkit.presentation.links`); otherwise the link is
dropped with a logged warning and the button reads as its plain label.

The function is pure and deterministic, and ``adapt(adapt(p, c), c) == adapt(p, c)``.
"""

from __future__ import annotations

from typing import Any

from channelkit.presentation.capabilities import (
    ActionLimits,
    PresentationCapabilities,
    SelectLimits,
    TextLimits,
)
from channelkit.presentation.links import WEB_SCHEMES, is_safe_link, warn_unsafe_link
from channelkit.presentation.model import (
    Block,
    Button,
    ButtonsBlock,
    ButtonStyle,
    ContextBlock,
    DividerBlock,
    MessagePresentation,
    SelectBlock,
    SelectOption,
    TextBlock,
)
from channelkit.presentation.text import measure, split_text, truncate

__all__ = ["adapt", "button_fallback_label"]


def button_fallback_label(button: Button, schemes: tuple[str, ...] = WEB_SCHEMES) -> str:
    """How a button reads in text: ``label``, ``label: url`` or ``label: `command` ``.

    Callback values are never shown; a disabled button shows its label only, and so
    does a link whose scheme is not in ``schemes`` (see
    `channelkit.presentation.links`).
    """
    if button.disabled:
        return button.label
    if button.url is not None and is_safe_link(button.url, schemes):
        return f"{button.label}: {button.url}"
    if button.command is not None:
        return f"{button.label}: `{button.command}`"
    return button.label


def _listed_label(button: Button, schemes: tuple[str, ...]) -> str:
    """The fallback label of a button that no channel control will show; a link that
    may not be sent as a link is logged (it reads as the bare label)."""
    if button.url is not None and not is_safe_link(button.url, schemes):
        warn_unsafe_link(button.label, button.url)
    return button_fallback_label(button, schemes)


def _fits_bytes(value: str | None, limit: int | None) -> bool:
    if value is None or limit is None:
        return True
    if len(value) * 4 <= limit:
        return True
    return len(value.encode("utf-8", "surrogatepass")) <= limit


def _adapt_button(button: Button, limits: ActionLimits) -> Button | None:
    """The button as the channel can show it, or None (it goes to the fallback list)."""
    url = button.url
    if url is not None and not is_safe_link(url, limits.link_schemes):
        warn_unsafe_link(button.label, url)
        url = None
    if button.disabled and not limits.supports_disabled:
        return None
    max_bytes = limits.max_value_bytes
    value = button.value
    command = button.command
    if max_bytes is not None:
        if not _fits_bytes(value, max_bytes):
            value = None
        if not _fits_bytes(command, max_bytes):
            command = None
    if not _fits_bytes(command, limits.max_command_bytes):
        command = None
    if url is None and value is None and command is None:
        return None
    label = button.label
    max_label = limits.max_label_length
    if max_label is not None and len(label) > max_label:
        label = truncate(label, max_label)
    style = button.style if limits.supports_styles else None
    if (
        label is button.label
        and value is button.value
        and url is button.url
        and command is button.command
        and style is button.style
    ):
        return button
    return _new_button(label, value, url, command, style, button.priority, button.disabled)


def _new_button(
    label: str,
    value: str | None,
    url: str | None,
    command: str | None,
    style: ButtonStyle | None,
    priority: float | None,
    disabled: bool,
) -> Button:
    """Build a button from already-validated parts (skips re-validation)."""
    label = label.strip()
    button = object.__new__(Button)
    set_field = object.__setattr__
    set_field(button, "label", label)
    set_field(button, "value", value)
    set_field(button, "url", url)
    set_field(button, "command", command)
    set_field(button, "style", style)
    set_field(button, "priority", priority)
    set_field(button, "disabled", disabled)
    return button


def _adapt_option(option: SelectOption, limits: SelectLimits) -> SelectOption | None:
    if limits.max_value_bytes is not None and not _fits_bytes(option.value, limits.max_value_bytes):
        return None
    max_label = limits.max_label_length
    if max_label is None or len(option.label) <= max_label:
        return option
    return SelectOption(truncate(option.label, max_label), option.value)


def _fallback_list(heading: str, labels: list[str]) -> _Fallback | None:
    lines = [label.strip() for label in labels]
    lines = [line for line in lines if line]
    if not lines:
        return None
    return _Fallback(heading + ":\n" + "\n".join(f"- {line}" for line in lines))


class _Fallback:
    """A generated list awaiting the text step (never escapes ``adapt``)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _selected_options(block: SelectBlock, limits: SelectLimits) -> tuple[list[SelectOption], bool]:
    """(options kept, whether some were dropped)."""
    kept: list[SelectOption] = []
    dropped = False
    max_options = limits.max_options
    for option in block.options:
        adapted = _adapt_option(option, limits)
        if adapted is None or (max_options is not None and len(kept) >= max_options):
            dropped = True
            continue
        kept.append(adapted)
    return kept, dropped


def _sort_key(item: tuple[Any, Button]) -> tuple[float, Any]:
    return (-(item[1].priority or 0), item[0])


def adapt(
    presentation: MessagePresentation, capabilities: PresentationCapabilities | None
) -> MessagePresentation:
    """Degrade ``presentation`` to ``capabilities``; pure, deterministic, idempotent.

    ``capabilities=None`` returns the presentation unchanged.
    """
    if capabilities is None:
        return presentation
    limits = capabilities.limits
    action_limits = limits.actions
    select_limits = limits.selects
    buttons_on = capabilities.buttons
    selects_on = capabilities.selects
    blocks = presentation.blocks
    max_actions = action_limits.max_actions
    max_rows = action_limits.max_rows
    per_row = action_limits.max_actions_per_row

    # Step 1: adapt controls; global priority selection after reserving selects.
    adapted_buttons: dict[int, list[Button | None]] = {}
    option_cache: dict[int, tuple[list[SelectOption], bool]] = {}
    selected: set[tuple[int, int]] | None = None
    reserved = 0
    total = 0
    for block_index, block in enumerate(blocks):
        cls = block.__class__
        if cls is ButtonsBlock and buttons_on:
            row = [_adapt_button(b, action_limits) for b in block.buttons]  # type: ignore[union-attr]
            adapted_buttons[block_index] = row
            total += len(row) - row.count(None)
        elif cls is SelectBlock and selects_on:
            kept_options, some_dropped = _selected_options(block, select_limits)  # type: ignore[arg-type]
            option_cache[block_index] = (kept_options, some_dropped)
            if kept_options:
                reserved += 1
    if buttons_on and (max_actions is not None or (max_rows is not None and per_row is not None)):
        parts: list[int] = []
        if max_actions is not None:
            parts.append(max_actions - reserved)
        if max_rows is not None and per_row is not None:
            parts.append((max_rows - reserved) * per_row)
        capacity = max(0, min(parts))
        if total > capacity:
            candidates = [
                ((block_index, i), b)
                for block_index, row in adapted_buttons.items()
                for i, b in enumerate(row)
                if b is not None
            ]
            candidates.sort(key=_sort_key)
            selected = {key for key, _ in candidates[:capacity]}

    # Step 2: walk the blocks; the running budget is shared by buttons and selects.
    remaining_actions = max_actions
    remaining_rows = max_rows
    out: list[Block | _Fallback] = []
    append = out.append
    for block_index, block in enumerate(blocks):
        cls = block.__class__
        if cls is ButtonsBlock:
            authored: tuple[Button, ...] = block.buttons  # type: ignore[union-attr]
            if not buttons_on:
                fallback = _fallback_list(
                    "Actions", [_listed_label(b, action_limits.link_schemes) for b in authored]
                )
                if fallback is not None:
                    append(fallback)
                continue
            row = adapted_buttons[block_index]
            eligible = [
                (i, b)
                for i, b in enumerate(row)
                if b is not None and (selected is None or (block_index, i) in selected)
            ]
            if remaining_actions == 0 or remaining_rows == 0:
                capacity_now: int | None = 0
            elif remaining_actions is not None and remaining_rows is not None and per_row:
                capacity_now = min(remaining_actions, remaining_rows * per_row)
            elif remaining_actions is not None:
                capacity_now = remaining_actions
            elif remaining_rows is not None and per_row:
                capacity_now = remaining_rows * per_row
            else:
                capacity_now = None
            if capacity_now is not None and len(eligible) > capacity_now:
                kept = sorted(eligible, key=_sort_key)[:capacity_now]
            else:
                kept = eligible
            count = len(kept)
            if count:
                if count == len(authored) and (per_row is None or count <= per_row):
                    same = all(b is orig for (_, b), orig in zip(kept, authored, strict=True))
                    append(block if same else ButtonsBlock(tuple(b for _, b in kept)))
                    used_rows = 1
                else:
                    size = per_row or count
                    used_rows = 0
                    for start in range(0, count, size):
                        append(ButtonsBlock(tuple(b for _, b in kept[start : start + size])))
                        used_rows += 1
                if remaining_actions is not None:
                    remaining_actions = max(0, remaining_actions - count)
                if remaining_rows is not None:
                    remaining_rows = max(0, remaining_rows - used_rows)
            if count < len(authored):
                kept_indexes = {i for i, _ in kept}
                fallback = _fallback_list(
                    "Actions",
                    [
                        button_fallback_label(b, action_limits.link_schemes)
                        for i, b in enumerate(authored)
                        if i not in kept_indexes
                    ],
                )
                if fallback is not None:
                    append(fallback)
        elif cls is SelectBlock:
            select: SelectBlock = block  # type: ignore[assignment]
            heading = select.placeholder or "Options"
            if not selects_on:
                fallback = _fallback_list(heading, [o.label for o in select.options])
                if fallback is not None:
                    append(fallback)
                continue
            options, dropped = option_cache[block_index]
            if options and remaining_actions != 0 and remaining_rows != 0:
                placeholder = select.placeholder
                max_label = select_limits.max_label_length
                if (
                    placeholder is not None
                    and max_label is not None
                    and len(placeholder) > max_label
                ):
                    placeholder = truncate(placeholder, max_label)
                same = len(options) == len(select.options) and all(
                    a is b for a, b in zip(options, select.options, strict=True)
                )
                if not same or placeholder != select.placeholder:
                    append(SelectBlock(tuple(options), placeholder=placeholder))
                else:
                    append(select)
                if remaining_actions is not None:
                    remaining_actions -= 1
                if remaining_rows is not None:
                    remaining_rows -= 1
                if dropped:
                    kept_sources = _kept_option_sources(select, options, select_limits)
                    fallback = _fallback_list(
                        heading,
                        [o.label for i, o in enumerate(select.options) if i not in kept_sources],
                    )
                    if fallback is not None:
                        append(fallback)
            else:
                fallback = _fallback_list(heading, [o.label for o in select.options])
                if fallback is not None:
                    append(fallback)
        elif cls is ContextBlock:
            if capabilities.context:
                append(block)
            else:
                append(TextBlock(block.text, block.continuation))  # type: ignore[union-attr]
        elif cls is DividerBlock:
            if capabilities.divider:
                append(block)
        else:
            append(block)

    # Step 3: text limits, and generated lists become real blocks.
    title = presentation.title
    final = _apply_text_limits(out, limits.text, capabilities.context)
    if title is not None and limits.text.max_length is not None:
        title = truncate(title, limits.text.max_length, limits.text.encoding).strip() or None
    tone = presentation.tone
    if tone is not None and capabilities.tones is not None and tone not in capabilities.tones:
        tone = None
    if (
        title == presentation.title
        and tone == presentation.tone
        and len(final) == len(blocks)
        and all(a is b for a, b in zip(final, blocks, strict=True))
    ):
        return presentation
    return MessagePresentation(title=title, tone=tone, blocks=tuple(final))


def _kept_option_sources(
    block: SelectBlock, options: list[SelectOption], limits: SelectLimits
) -> set[int]:
    """Indexes of the authored options that made it into ``options``."""
    kept: set[int] = set()
    count = 0
    for index, option in enumerate(block.options):
        if count >= len(options):
            break
        if _adapt_option(option, limits) is not None:
            kept.add(index)
            count += 1
    return kept


def _apply_text_limits(
    blocks: list[Block | _Fallback], limits: TextLimits, context: bool
) -> list[Block]:
    max_length = limits.max_length
    encoding = limits.encoding
    out: list[Block] = []
    for block in blocks:
        if isinstance(block, _Fallback):
            first = True
            for fragment in split_text(block.text, max_length, encoding):
                if fragment.strip():
                    if context:
                        out.append(ContextBlock(fragment, continuation=not first))
                    else:
                        out.append(TextBlock(fragment, continuation=not first))
                    first = False
        elif max_length is not None and isinstance(block, TextBlock | ContextBlock):
            if measure(block.text, encoding) <= max_length:
                out.append(block)
                continue
            total = limits.max_message_length
            if total is None or total <= max_length:
                text = truncate(block.text, max_length, encoding)
                if text.strip():
                    out.append(block.__class__(text, block.continuation))
                continue
            # Split across several blocks (sections, bubbles) up to the message limit.
            continuation = block.continuation
            for fragment in split_text(truncate(block.text, total, encoding), max_length, encoding):
                if fragment.strip():
                    out.append(block.__class__(fragment, continuation))
                    continuation = True
        else:
            out.append(block)
    return out
