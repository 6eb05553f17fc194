"""The emulated CardKit card entities: ``/open-apis/cardkit/v1/cards`` and below.

``POST /open-apis/cardkit/v1/cards`` (schema 2.0 only), ``PUT .../{id}``,
``PUT .../{id}/elements/{element_id}/content`` (only while ``streaming_mode`` is on,
markdown/plain_text elements), ``PATCH .../{id}/settings``. Every CardKit write carries
a ``sequence`` that must strictly increase per card (300317); a repeated ``uuid`` is an
idempotent replay. A card entity is sent to the chat at most once, by an interactive
message (see `emulator`).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any

from channelkit.playground.emulator import HttpReply
from channelkit.playground.feishu.chat import FeishuChat, card_elements, classify, error, ok, walk

__all__ = ["MAX_CARD_BYTES", "MAX_SEQUENCE", "MAX_STREAM_CHARS", "FeishuCardKit"]

MAX_SEQUENCE = 2**31 - 1
MAX_STREAM_CHARS = 100_000
MAX_CARD_BYTES = 30 * 1024


class FeishuCardKit(FeishuChat):
    """The CardKit endpoints of the emulated tenant (card entities and their writes)."""

    # -- CardKit ------------------------------------------------------------------------------
    def _create_card(self, query: Mapping[str, str], data: Mapping[str, Any]) -> HttpReply:
        if data.get("type") != "card_json":
            return error(400, 10002, "type: only card_json is emulated")
        card_json, problem = _parse_card_json(data.get("data"))
        if card_json is None:
            return problem or error(400, 10002, "data is not valid card JSON")
        card_id = "7" + "".join(secrets.choice("0123456789") for _ in range(18))
        config = card_json.get("config")
        with self._lock:
            self._put_card(
                card_id,
                {
                    "id": card_id,
                    "source": "cardkit",
                    "json": card_json,
                    "kind": classify(card_json),
                    "messageId": None,
                    "streaming": isinstance(config, Mapping)
                    and config.get("streaming_mode") is True,
                    "sequence": 0,
                    "uuids": [],
                    "updates": 0,
                    "createdAt": time.time(),
                },
            )
        return ok({"card_id": card_id})

    def _cardkit_write(
        self,
        card_id: str,
        data: Mapping[str, Any],
        apply: Callable[[dict[str, Any]], HttpReply | None],
    ) -> HttpReply:
        sequence = data.get("sequence")
        if isinstance(sequence, bool) or not isinstance(sequence, int):
            return error(400, 99992402, "field validation failed: sequence is required")
        if not 1 <= sequence <= MAX_SEQUENCE:
            return error(400, 99992402, "field validation failed: sequence out of range")
        op_uuid = data.get("uuid")
        if op_uuid is not None and (not isinstance(op_uuid, str) or len(op_uuid) > 64):
            return error(400, 99992402, "field validation failed: uuid")
        with self._lock:
            card = self._cards.get(card_id)
            if card is None or card.get("source") != "cardkit":
                return error(400, 200740, "card entity not found")
            if op_uuid and op_uuid in card["uuids"]:
                return ok({})  # an idempotent replay of a write already applied
            if sequence <= card["sequence"]:
                return error(400, 300317, "sequence number compare failed")
            problem = apply(card)
            if problem is not None:
                return problem
            card["sequence"] = sequence
            if op_uuid:
                card["uuids"].append(op_uuid)
                del card["uuids"][:-100]
            card["updates"] += 1
            self._touch()
        return ok({})

    def _stream_element(
        self, query: Mapping[str, str], data: Mapping[str, Any], card_id: str, element_id: str
    ) -> HttpReply:
        content = data.get("content")
        if not isinstance(content, str):
            return error(400, 99992402, "field validation failed: content is required")
        if len(content) > MAX_STREAM_CHARS:
            return error(400, 99992402, "field validation failed: content exceeds 100000 chars")

        def apply(card: dict[str, Any]) -> HttpReply | None:
            if not card.get("streaming"):
                return error(400, 300309, "streaming mode is closed")
            element = next(
                (e for e in walk(card_elements(card["json"])) if e.get("element_id") == element_id),
                None,
            )
            if element is None:
                return error(400, 300301, f"element {element_id} not found")
            if element.get("tag") not in ("markdown", "plain_text"):
                return error(400, 300310, "only markdown and plain_text elements stream")
            element["content"] = content
            return None

        return self._cardkit_write(card_id, data, apply)

    def _card_settings(
        self, query: Mapping[str, str], data: Mapping[str, Any], card_id: str
    ) -> HttpReply:
        raw = data.get("settings")
        try:
            settings = json.loads(raw) if isinstance(raw, str) else None
        except ValueError:
            settings = None
        if not isinstance(settings, Mapping):
            return error(400, 99992402, "field validation failed: settings must be JSON text")
        config = settings.get("config")

        def apply(card: dict[str, Any]) -> HttpReply | None:
            if isinstance(config, Mapping):
                card["json"].setdefault("config", {}).update(config)
                if "streaming_mode" in config:
                    card["streaming"] = config["streaming_mode"] is True
            return None

        return self._cardkit_write(card_id, data, apply)

    def _update_card(
        self, query: Mapping[str, str], data: Mapping[str, Any], card_id: str
    ) -> HttpReply:
        content = data.get("card")
        if not isinstance(content, Mapping) or content.get("type") != "card_json":
            return error(400, 99992402, "field validation failed: card.type must be card_json")
        card_json, problem = _parse_card_json(content.get("data"))
        if card_json is None:
            return problem or error(400, 10002, "data is not valid card JSON")

        def apply(card: dict[str, Any]) -> HttpReply | None:
            config = card_json.get("config")
            old_config = card["json"].get("config")
            if isinstance(old_config, Mapping) and old_config.get("update_multi") is False:
                return error(400, 300302, "the card does not allow updates (update_multi)")
            card["json"] = card_json
            card["streaming"] = isinstance(config, Mapping) and config.get("streaming_mode") is True
            return None

        return self._cardkit_write(card_id, data, apply)


def _parse_card_json(raw: Any) -> tuple[dict[str, Any] | None, HttpReply | None]:
    if not isinstance(raw, str) or not raw:
        return None, error(400, 99992402, "field validation failed: data is required")
    if len(raw.encode("utf-8")) > MAX_CARD_BYTES:
        return None, error(400, 200860, "card content exceeds 30 KB")
    try:
        card_json = json.loads(raw)
    except ValueError:
        return None, error(400, 10002, "data is not valid card JSON")
    if not isinstance(card_json, dict):
        return None, error(400, 10002, "data is not valid card JSON")
    if card_json.get("schema") != "2.0":
        return None, error(400, 300303, "card JSON must be schema 2.0")
    return card_json, None
