"""The plug-in platform's contract driver: the suite's vocabulary on Tinychat's emulator."""

from __future__ import annotations

from typing import Any

from contract_drivers import Capabilities, Driver, Prompt, Segment

from plugin_platform import NAME
from plugin_platform.api import EVENTS_PATH, SIGNATURE_HEADER, TIMESTAMP_HEADER
from plugin_platform.channel import TEXT_FAILED
from plugin_platform.output import MARKERS, STOP_PREFIX
from plugin_platform.questions import LABELS, QUESTION_PREFIX

_NOT_BUILT = "not built: the plug-in platform stays minimal"


class TinychatDriver(Driver):
    platform = NAME
    other_chat = "chat-other"
    message_path = EVENTS_PATH
    sender_attribute = "user_id"  # the emulator's person (the burst contract)
    signature_headers = (SIGNATURE_HEADER, TIMESTAMP_HEADER)  # the hostile-headers contract
    timestamp_headers = (TIMESTAMP_HEADER,)
    caps = Capabilities(
        native_presentation=_NOT_BUILT,
        presentation_buttons=_NOT_BUILT,
        pins=_NOT_BUILT,
        threads=_NOT_BUILT,
    )

    @staticmethod
    def dedup_gates(channel: Any) -> list[Any]:
        """The dedup objects a message passes on its way in (the replay contract)."""
        return [channel.dedup]

    def _segment_ids(self) -> set[str]:
        """The messages posted as output segments (with a Stop button)."""
        return {
            str(call["response"]["id"])
            for call in self.emulator.calls("/tinychat/api/post")
            if any(
                b.get("data", "").startswith(STOP_PREFIX)
                for row in call["body"].get("buttons") or []
                for b in row
            )
        }

    def segments(self) -> list[Segment]:
        ids = self._segment_ids()
        out = []
        for view in self.bot_views():
            if view["id"] not in ids:
                continue
            text = view.get("text", "")
            stop = [b for row in view["keyboard"] for b in row if b["data"].startswith(STOP_PREFIX)]
            if stop:
                state = "running"
            elif text.endswith(MARKERS["cancelled"]):
                state = "cancelled"
            elif text.endswith(MARKERS["failed"]):
                state = "failed"
            else:
                state = "completed"
            out.append(Segment(view["id"], text, state, view["id"] if stop else None))
        return out

    def failures(self) -> int:
        notices = sum(1 for v in self.bot_views() if v.get("text") == TEXT_FAILED)
        return notices + sum(1 for s in self.segments() if s.state == "failed")

    def stop(self, segment: Segment, user: str | None = None) -> None:
        assert segment.stop_id is not None, f"{segment} has no Stop button"
        self._tap(segment.stop_id, "Stop", user)

    def _tap(self, message_id: str, label: str, user: str | None) -> None:
        view = next(v for v in self.bot_views() if v["id"] == message_id)
        data = next(b["data"] for row in view["keyboard"] for b in row if b["text"] == label)
        self.click(message_id, "tap", {"data": data}, user=user)

    def notices(self, user: str) -> list[str]:
        return [n["text"] for n in self.emulator.notices() if n["user"] == user]

    def _prompts(self) -> list[Prompt]:
        settled = {label: state for state, label in LABELS.items()}
        out = []
        for view in self.bot_views():
            text = view.get("text", "")
            keys = [b["data"] for row in view["keyboard"] for b in row]
            if any(k.startswith(QUESTION_PREFIX) for k in keys):
                out.append(Prompt(view["id"], True, "pending", text, view))
                continue
            last = text.rpartition("\n\n")[2]
            state = next((s for label, s in settled.items() if last.startswith(label)), None)
            if state is not None and view["id"] not in self._segment_ids():
                out.append(Prompt(view["id"], True, state, text, view))
            elif "/approve" in text or "reply with" in text.lower():
                out.append(Prompt(view["id"], False, "pending", text, view))
        return out

    def answer(self, prompt: Prompt, label: str, user: str | None = None) -> None:
        self._tap(prompt.id, label, user)

    def cancel(self, prompt: Prompt, user: str | None = None) -> None:
        self._tap(prompt.id, "Cancel", user)

    def presentations(self, title: str) -> list[dict[str, Any]]:
        return [
            {"messageId": v["id"], "text": v.get("text"), "native": False, "pinned": False}
            for v in self.bot_views()
            if title in v.get("text", "")
        ]
