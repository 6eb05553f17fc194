"""Concurrency: many sessions, owners and runs interleaved on real threads never cross
correlation (chat/thread, session, run, request, segment, owner)."""

from __future__ import annotations

import threading
from collections import defaultdict

from channelkit.agents.function import FunctionAgent, Question, Turn
from channelkit.core import LifecycleType, SegmentEndReason, UserInputPresentationResult
from channelkit.testing import inbound, make_channel

THREADS = 8
RUNS_PER_THREAD = 30  # 240 runs


def agent(turn: Turn) -> str:
    tag = turn.text
    turn.say(f"[{tag}] before ")
    answers = turn.ask([Question(f"q {tag}?", [f"{tag}-yes", f"{tag}-no"], header="H")])
    turn.say(f"[{tag}] after ")
    return f"[{tag}] answer={answers.get('0')}"


def test_interleaved_runs_never_cross_correlation():
    contexts_by_tag: dict[str, object] = {}
    lock = threading.Lock()

    def presenter(ctx):
        tag = ctx.questions[0].question.split()[1].rstrip("?")
        with lock:
            contexts_by_tag[tag] = ctx
        # answer from another thread, as a card callback would
        threading.Thread(
            target=ctx.respond,
            args=(
                {
                    "outcome": {"outcome": "selected", "optionId": ctx.submit_option_id},
                    "answers": {"0": f"{tag}-yes"},
                },
            ),
        ).start()
        return UserInputPresentationResult.PRESENTED

    ch = make_channel(
        FunctionAgent(agent),
        presenter=presenter,
        max_workers=24,
        max_queued_per_owner=RUNS_PER_THREAD,  # each producer is one person sending fast
    )
    handles: dict[str, object] = {}
    expected: dict[str, tuple[str, str, str | None]] = {}
    errors: list[BaseException] = []

    def producer(n: int) -> None:
        try:
            for i in range(RUNS_PER_THREAD):
                tag = f"t{n}r{i}"
                chat = f"chat-{n % 4}"
                sender = f"user-{n}"
                thread_id = f"th-{n % 2}" if n % 3 == 0 else None
                h = ch.handle_inbound(
                    inbound(
                        tag,
                        chat_id=chat,
                        sender_id=sender,
                        thread_id=thread_id,
                        message_id=f"m-{tag}",
                        is_group=True,
                    )
                )
                with lock:
                    handles[tag] = h
                    expected[tag] = (chat, sender, thread_id)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    try:
        producers = [threading.Thread(target=producer, args=(n,)) for n in range(THREADS)]
        for t in producers:
            t.start()
        for t in producers:
            t.join(30)
        assert not errors
        assert len(handles) == THREADS * RUNS_PER_THREAD
        results = {tag: h.result(30) for tag, h in handles.items()}  # type: ignore[attr-defined]
        assert all(r.status == "completed" for r in results.values())
        run_to_tag = {r.run_id: tag for tag, r in results.items()}
        assert len(run_to_tag) == len(results)  # unique run ids

        events_by_run = defaultdict(list)
        for event in ch.events:
            events_by_run[event.run_id].append(event)
        chunks_by_run = defaultdict(list)
        for chat_id, chunk, session_id, segment in ch.chunks:
            assert segment is not None
            chunks_by_run[segment.run_id].append((chat_id, chunk, session_id, segment))
        ends_by_run = defaultdict(list)
        for chat_id, session_id, segment, reason in ch.segment_ends:
            ends_by_run[segment.run_id].append((chat_id, session_id, segment, reason))

        for tag, result in results.items():
            chat, sender, thread_id = expected[tag]
            rid, sid = result.run_id, result.session_id
            events = events_by_run[rid]
            assert [str(e.type) for e in events] == [
                "started",
                "text_chunk",
                "text_chunk",
                "text_chunk",
                "completed",
            ]
            for e in events:
                assert (e.chat_id, e.session_id, e.thread_id) == (chat, sid, thread_id)
                assert e.owner is not None and e.owner.id == sender
                assert e.message_id == f"m-{tag}"
                if e.type is LifecycleType.TEXT_CHUNK:
                    assert e.chunk is not None and e.chunk.startswith(f"[{tag}]")
            chunks = chunks_by_run[rid]
            assert [c[1] for c in chunks] == [
                f"[{tag}] before ",
                f"[{tag}] after ",
                f"[{tag}] answer={tag}-yes",
            ]
            for chat_id, _chunk, session_id, segment in chunks:
                assert (chat_id, session_id) == (chat, sid)
                assert segment.owner.id == sender and segment.target.chat_id == chat
                assert segment.target.thread_id == thread_id
                assert segment.message_id == f"m-{tag}"
            seg1, seg2 = chunks[0][3], chunks[1][3]
            assert seg1.segment_id != seg2.segment_id and chunks[2][3] == seg2
            ends = ends_by_run[rid]
            assert [(e[2], e[3]) for e in ends] == [
                (seg1, SegmentEndReason.RESPONSE_BOUNDARY),
                (seg2, SegmentEndReason.COMPLETED),
            ]
            ctx = contexts_by_tag[tag]
            assert ctx.run_id == rid and ctx.session_id == sid  # type: ignore[attr-defined]
            assert ctx.owner.id == sender and ctx.target.chat_id == chat  # type: ignore[attr-defined]
            assert ctx.target.thread_id == thread_id  # type: ignore[attr-defined]
        completes = {c[3].run_id: c for c in ch.completes}  # type: ignore[union-attr]
        for tag, result in results.items():
            chat, _sender, _thread = expected[tag]
            c = completes[result.run_id]
            assert c[0] == chat and c[2] == result.session_id
            assert f"answer={tag}-yes" in c[1] and f"[{tag}] before" in c[1]
        # every request was settled and removed
        assert ch.pending_request_ids() == []
        # sessions: one per (chat, sender)
        sessions = {(expected[t][0], expected[t][1]): r.session_id for t, r in results.items()}
        assert len(set(sessions.values())) == len(sessions)
    finally:
        ch.close(timeout=10)
