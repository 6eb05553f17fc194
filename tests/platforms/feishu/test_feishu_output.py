"""Streaming output cards: lazy per-segment creation, coalescing, sequence, terminal."""

from __future__ import annotations

import itertools
import json
import math
import threading
from typing import Any

import pytest
from channelkit.core import ChannelPromptOwner, OutputSegmentContext, SessionTarget
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.platforms.feishu.output import OutputCardPresenter
from feishu_helpers import FakeFeishu


def make(rt: Any, api: FeishuApi, **kw: Any) -> OutputCardPresenter:
    texts: list[tuple[str, str]] = []
    presenter = OutputCardPresenter(
        api,
        clock=rt.clock,
        scheduler=rt.scheduler,
        submit=rt.serial.submit,
        send_text=lambda chat, text: texts.append((chat, text)),
        **kw,
    )
    presenter.texts = texts  # type: ignore[attr-defined]
    return presenter


def append(p: OutputCardPresenter, chunk: str, segment: str = "seg-1", run: str = "run-1") -> None:
    p.append(
        OutputSegmentContext(
            channel_name="feishu",
            session_id="s1",
            run_id=run,
            segment_id=segment,
            owner=ChannelPromptOwner("ou_owner"),
            target=SessionTarget("feishu", "ou_owner", "oc_chat"),
        ),
        chunk,
    )


def sequences(fake: FakeFeishu, card_id: str) -> list[int]:
    return [
        c.body["sequence"]
        for c in fake.calls
        if c.op in ("stream", "settings", "update_card") and f"/cards/{card_id}" in c.path
    ]


def test_no_card_before_visible_text(rt: Any, fake: FakeFeishu, api: FeishuApi) -> None:
    p = make(rt, api)
    append(p, "")
    rt.settle()
    assert fake.calls == []
    assert len(p) == 0


def test_first_text_creates_one_card_then_streams(
    rt: Any, fake: FakeFeishu, api: FeishuApi
) -> None:
    p = make(rt, api)
    append(p, "Hel")
    rt.settle()
    assert [c.op for c in fake.calls] == ["create_card", "send"]
    entity = fake.calls[0].card
    assert entity["config"]["streaming_mode"] is True
    assert entity["body"]["elements"][0]["content"] == "Hel"
    sent = json.loads(fake.calls[1].body["content"])
    assert sent == {"type": "card", "data": {"card_id": "card_1"}}
    assert fake.calls[1].body["receive_id"] == "oc_chat"
    append(p, "lo")
    rt.advance(0.5)
    streams = fake.ops("stream")
    assert len(streams) == 1
    assert streams[0].body["content"] == "Hello"
    assert streams[0].path.endswith("/cards/card_1/elements/ck_content/content")


def test_chunks_coalesce_and_sequence_strictly_increases(
    rt: Any, fake: FakeFeishu, api: FeishuApi
) -> None:
    p = make(rt, api)
    text = ""
    # 1,000 chunks spread over 3 s of fake time
    for i in range(1000):
        chunk = f"c{i} "
        text += chunk
        append(p, chunk)
        if i % 10 == 9:
            rt.advance(0.03)
    rt.settle()
    streams = fake.ops("stream")
    assert len(streams) <= math.ceil(3 / 0.5) + 3
    times = [c.at for c in streams]
    assert all(b - a >= 0.5 - 1e-9 for a, b in itertools.pairwise(times))
    assert p.finish("seg-1", "completed", wait=5.0)
    rt.settle()
    seq = sequences(fake, "card_1")
    assert seq == sorted(seq) and len(set(seq)) == len(seq) and seq[0] == 1
    final = fake.ops("update_card")[-1].card
    assert final["body"]["elements"][0]["content"] == text
    assert final["body"]["elements"][1]["content"] == "*已完成*"


def test_one_write_in_flight(rt: Any, fake: FakeFeishu, api: FeishuApi) -> None:
    p = make(rt, api)
    append(p, "a")
    rt.settle()
    fake.gate = threading.Event()
    append(p, "b")
    rt.clock.advance(0.5)  # the first stream write starts and blocks
    assert fake.entered.wait(5.0)
    for i in range(20):
        append(p, str(i))
        rt.clock.advance(0.5)
    assert len(fake.ops("stream")) == 1
    fake.gate.set()
    rt.settle()
    rt.advance(0.5)
    assert fake.max_in_flight == 1
    streams = fake.ops("stream")
    assert len(streams) == 2  # the pending snapshot replaced, not queued
    assert streams[-1].body["content"].endswith("19")


def test_terminal_closes_streaming_then_writes_label(
    rt: Any, fake: FakeFeishu, api: FeishuApi
) -> None:
    p = make(rt, api, language="en")
    append(p, "done text")
    rt.settle()
    assert p.finish("seg-1", "completed", wait=5.0)
    ops = [c.op for c in fake.calls]
    assert ops[-2:] == ["settings", "update_card"]
    assert json.loads(fake.calls[-2].body["settings"]) == {"config": {"streaming_mode": False}}
    card = fake.calls[-1].card
    assert card["body"]["elements"][1]["content"] == "*Completed*"
    assert not any(e["tag"] == "button" for e in card["body"]["elements"])
    assert p.get("seg-1") is None and p.tombstone("seg-1") == ("run-1", "completed")


def test_more_specific_terminal_state_is_not_overwritten(
    rt: Any, fake: FakeFeishu, api: FeishuApi
) -> None:
    p = make(rt, api)
    append(p, "x")
    rt.settle()
    assert p.finish("seg-1", "failed", wait=5.0)
    assert not p.finish("seg-1", "completed", wait=5.0)
    assert p.finish_run("run-1", "cancelled") == 0
    rt.settle()
    finals = fake.ops("update_card")
    assert len(finals) == 1
    assert finals[0].card["body"]["elements"][1]["content"] == "*已失败，请重试*"


def test_stop_turns_cancelled_into_stopped(rt: Any, fake: FakeFeishu, api: FeishuApi) -> None:
    p = make(rt, api, language="en")
    append(p, "x")
    rt.settle()
    card = p.get("seg-1")
    assert card is not None
    card.stop_requested = True
    assert p.finish("seg-1", "cancelled", wait=5.0)
    assert fake.ops("update_card")[0].card["body"]["elements"][1]["content"] == "*Stopped*"


def test_segment_owns_its_card_and_is_never_reopened(
    rt: Any, fake: FakeFeishu, api: FeishuApi
) -> None:
    p = make(rt, api)
    append(p, "before", segment="seg-1")
    rt.settle()
    p.finish("seg-1", "completed", wait=5.0)
    append(p, "late", segment="seg-1")  # closed segment: ignored
    append(p, "after", segment="seg-2")
    rt.settle()
    creates = fake.ops("create_card")
    assert len(creates) == 2
    assert creates[1].card["body"]["elements"][0]["content"] == "after"


def test_cardkit_unavailable_falls_back_to_patch(rt: Any, fake: FakeFeishu, api: FeishuApi) -> None:
    fake.fail.add("create_card")
    p = make(rt, api)
    for i in range(400):
        append(p, f"{i} ")
        rt.advance(0.01)  # 100 chunks per second for 4 s
    assert p.finish("seg-1", "completed", wait=5.0)
    rt.settle()
    sends = fake.ops("send")
    assert len(sends) == 1 and sends[0].body["msg_type"] == "interactive"
    assert sends[0].card["config"]["update_multi"] is True
    patches = fake.ops("patch")
    assert patches, "streaming must continue through PATCH"
    times = [c.at for c in patches]
    for t in times:
        assert sum(1 for u in times if t <= u < t + 1.0) <= 5
    assert patches[-1].card["body"]["elements"][1]["content"] == "*已完成*"
    assert not fake.ops("stream")


def test_streaming_failure_switches_to_patch(rt: Any, fake: FakeFeishu, api: FeishuApi) -> None:
    p = make(rt, api)
    append(p, "a")
    rt.settle()
    fake.fail.add("stream")
    append(p, "b")
    rt.advance(0.5)
    fake.fail.discard("stream")
    p.finish("seg-1", "completed", wait=5.0)
    rt.settle()
    # CardKit finalization still works here; the text is complete
    final = fake.calls[-1]
    assert final.card["body"]["elements"][0]["content"] == "ab"


def test_creation_failure_delivers_plain_text(rt: Any, fake: FakeFeishu, api: FeishuApi) -> None:
    fake.fail.update({"create_card", "send"})
    p = make(rt, api, language="en")
    append(p, "answer")
    rt.settle()
    p.finish("seg-1", "completed", wait=5.0)
    assert p.texts == [("oc_chat", "answer\n\n---\n*Completed*")]  # type: ignore[attr-defined]


@pytest.mark.parametrize("language", ["zh", "en", "de"])
def test_labels_per_language_through_the_stream_path(
    rt: Any, fake: FakeFeishu, api: FeishuApi, language: str
) -> None:
    expected = {
        "zh": ["运行中...", "已完成", "已取消", "已失败，请重试"],
        "en": ["Running...", "Completed", "Cancelled", "Failed, please retry"],
        "de": [
            "Läuft...",
            "Abgeschlossen",
            "Abgebrochen",
            "Fehlgeschlagen, bitte erneut versuchen",
        ],
    }[language]
    p = make(rt, api, language=language)
    for i, state in enumerate(("completed", "cancelled", "failed")):
        append(p, "t", segment=f"seg-{i}", run=f"run-{i}")
        rt.settle()
        p.finish(f"seg-{i}", state, wait=5.0)  # type: ignore[arg-type]
    entities = [c.card for c in fake.ops("create_card")]
    assert all(e["body"]["elements"][1]["content"] == f"*{expected[0]}*" for e in entities)
    finals = [c.card["body"]["elements"][1]["content"] for c in fake.ops("update_card")]
    assert finals == [f"*{label}*" for label in expected[1:]]
