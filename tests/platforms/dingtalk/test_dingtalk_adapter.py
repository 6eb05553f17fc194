"""The DingTalk adapter on the real ChannelBase: status and question cards, Stop, ingress."""

from __future__ import annotations

import json
import threading

from channelkit.core import InboundMessage, SessionTarget
from dingtalk_helpers import stop_payload, submit_payload


def all_params(h):
    return [c[1]["params"] for c in h.api.ops() if "params" in c[1]]


def test_started_binds_real_inbound_run_and_no_card_on_started(adapter):
    gate = threading.Event()

    def script(bridge, sid, text, sink):
        assert gate.wait(5)
        sink.text_chunk(sid, "hello ")
        sink.text_chunk(sid, "world")
        return "hello world"

    h = adapter(script)
    h.send("hi")
    assert h.wait_for(lambda: h.channel.presenter.live_runs == 1)
    assert h.api.ops("create") == []  # started creates nothing
    gate.set()
    h.idle()
    assert len(h.status_tracks()) == 1
    # the card's terminal write: its final update, or its creation already finished
    # when the segment ended before the card went out
    final = h.api.finals()[-1][1]["params"]
    assert final["content"] == final["copy_content"] == "hello world"
    assert json.loads(final["blockList"]) == [{"type": 0, "markdown": "hello world"}]
    assert final["statusLine"].startswith("Completed · qwen3.7-max · ")
    assert h.api.texts() == []  # no Markdown duplicate
    assert h.channel.map_sizes()["runs"] == 0


def test_loop_webhook_and_unknown_runs_get_no_card(adapter):
    def script(bridge, sid, text, sink):
        sink.text_chunk(sid, "text")
        bridge.ask(sink, sid, "req-loop", wait=False)
        return "final"

    h = adapter(script)
    target = SessionTarget("dingtalk", "staff-1", "cid-group-1", None, True)
    h.channel.run_loop_prompt(target, "scheduled").result(5)
    h.channel.run_webhook_task(target, "hook").result(5)
    # an inbound turn whose message id never came through the robot ingress
    h.channel.handle_inbound(
        InboundMessage(
            "dingtalk", "cid-group-1", "staff-1", "x", message_id="synthetic-1", is_group=True
        )
    ).result(5)
    h.idle()
    assert h.api.ops("create") == []
    assert h.channel.presenter.live_runs == 0


def test_direct_question_one_question_card_no_status_card(adapter):
    def script(bridge, sid, text, sink):
        bridge.ask(sink, sid, "req-1")
        return ""

    h = adapter(script)
    h.send("ask me")
    assert h.wait_for(lambda: len(h.question_tracks()) == 1)
    assert h.status_tracks() == []
    resp = h.card_request(submit_payload(h.question_tracks()[0]))
    assert resp.status == 200
    h.idle()
    assert h.bridge.responses == [
        (
            "req-1",
            {
                "outcome": {"outcome": "selected", "optionId": "proceed_once"},
                "answers": {"0": "Beijing", "1": "Logs, Metrics"},
            },
        )
    ]
    assert h.status_tracks() == []


def test_text_then_question_then_new_status_card(adapter):
    def script(bridge, sid, text, sink):
        sink.text_chunk(sid, "Let me check.")
        bridge.ask(sink, sid, "req-1")
        sink.text_chunk(sid, "After answer.")
        return "After answer."

    h = adapter(script)
    h.send("go")
    assert h.wait_for(lambda: len(h.question_tracks()) == 1)
    first_status = h.status_tracks()
    assert len(first_status) == 1
    names = [(c[0], c[1].get("out_track_id")) for c in h.api.ops()]
    # the first card's terminal write: its final update, or its creation already
    # finished when its segment ended before the card went out
    fin = next(
        i
        for i, c in enumerate(h.api.ops())
        if c[0] in ("update", "create")
        and c[1]["out_track_id"] == first_status[0]
        and c[1]["params"].get("flowStatus") == 3
    )
    qcreate = next(
        i for i, (op, t) in enumerate(names) if op == "create" and t == h.question_tracks()[0]
    )
    assert fin < qcreate  # historical status card completed before the question card
    assert h.api.ops()[fin][1]["params"]["content"] == "Let me check."
    assert h.api.ops()[fin][1]["params"]["statusLine"].startswith("Completed")
    h.card_request(submit_payload(h.question_tracks()[0]))
    h.idle()
    tracks = h.status_tracks()
    assert len(tracks) == 2 and tracks[0] != tracks[1]  # text after submission: new card
    ops = h.api.ops()
    submitted = next(
        i
        for i, c in enumerate(ops)
        if c[0] == "update" and c[1]["params"].get("card_status") == "submitted"
    )
    second_create = next(
        i for i, c in enumerate(ops) if c[0] == "create" and c[1]["out_track_id"] == tracks[1]
    )
    assert submitted < second_create
    final = [c for c in h.api.finals() if c[1]["out_track_id"] == tracks[1]][-1]
    assert final[1]["params"]["content"] == "After answer."
    assert not any("Waiting for input" in json.dumps(p) for p in all_params(h))


def test_second_question_same_run_uses_text_first_card_answerable(adapter):
    def script(bridge, sid, text, sink):
        bridge.ask(sink, sid, "req-1", wait=False)
        bridge.ask(sink, sid, "req-2", wait=False)
        assert bridge.answered["req-1"].wait(5)
        return "done"

    h = adapter(script)
    h.send("two questions")
    assert h.wait_for(
        lambda: any("Permission required" in t or "/deny" in t for t in h.api.texts())
    )
    assert len(h.question_tracks()) == 1
    h.card_request(submit_payload(h.question_tracks()[0]))
    h.idle()
    assert h.bridge.responses[0][0] == "req-1"


def test_stop_cancels_only_the_captured_run(adapter):
    def script(bridge, sid, text, sink):
        sink.text_chunk(sid, f"working on {text}")
        bridge.wait_cancel(sid)
        return ""

    h = adapter(script)
    h.send("task-a", sender="staff-1", chat="cid-a")
    h.send("task-b", sender="staff-2", chat="cid-b")
    assert h.wait_for(lambda: len(h.status_tracks()) == 2)
    track_a = next(
        c[1]["out_track_id"] for c in h.api.ops("create") if c[1]["target"].chat_id == "cid-a"
    )
    # the owner of B cannot stop A; the owner of A can
    assert h.card_request(stop_payload(track_a, actor="staff-2")).status == 200
    assert h.wait_for(lambda: len(h.api.texts()) == 1)
    assert h.card_request(stop_payload(track_a, actor="staff-2")).status == 200  # no 2nd notice
    assert h.bridge.cancelled == []
    assert h.api.texts() == [
        "Only the task owner can operate this card. This action had no effect."
    ]
    assert h.api.ops("group")[-1][1]["chat_id"] == "cid-a"
    h.card_request(stop_payload(track_a))

    def finalized():
        return {
            c[1]["out_track_id"]: c[1]["params"]["statusLine"]
            for c in h.api.ops("update")
            if c[1]["params"].get("flowStatus") == 3
        }

    assert h.wait_for(lambda: len(finalized()) == 1)
    assert len(h.bridge.cancelled) == 1  # exactly A's session
    lines = finalized()
    assert list(lines) == [track_a] and lines[track_a].startswith("Stopped · qwen3.7-max ·")
    assert len(h.api.texts()) == 1  # B still running, no other output


def test_eye_reaction_when_status_cards_off(adapter):
    h = adapter(None, cards={"statusCard": {"enabled": False}})
    h.send("hello", msg_id="msg-eye")
    h.idle()
    names = [c[0] for c in h.api.ops()]
    assert names.index("emotion_reply") < names.index("emotion_recall")
    assert h.api.ops("emotion_reply")[0][1] == {"msg_id": "msg-eye", "chat_id": "cid-group-1"}
    assert h.api.texts() == ["echo hello"]
    assert h.status_tracks() == []


def test_eye_reaction_with_status_cards(adapter):
    h = adapter(None)
    h.send("hello", msg_id="msg-eye")
    h.idle()
    names = [c[0] for c in h.api.ops()]
    assert names.count("emotion_reply") == names.count("emotion_recall") == 1
    assert names.index("emotion_reply") < names.index("emotion_recall")
    assert h.api.ops("emotion_reply")[0][1] == {"msg_id": "msg-eye", "chat_id": "cid-group-1"}
    assert h.api.ops("emotion_recall")[0][1] == {"msg_id": "msg-eye", "chat_id": "cid-group-1"}
    assert len(h.status_tracks()) == 1


def test_cards_disabled_markdown_and_text_prompt_with_deny(adapter):
    def script(bridge, sid, text, sink):
        bridge.ask(sink, sid, "req-1")
        return "after"

    h = adapter(script, cards=None)
    h.channel.dingtalk  # noqa: B018
    h2 = adapter(script, cards={"enabled": False})
    h2.send("q")
    assert h2.wait_for(lambda: any("/deny" in t for t in h2.api.texts()))
    assert h2.api.ops("create") == []
    prompt = next(t for t in h2.api.texts() if "/deny" in t)
    # the core's text prompt, never the raw request JSON
    assert not any(raw in prompt for raw in ("_meta", "qwenQuestions", "toolCallId", '{"'))
    h2.send("/deny")
    h2.idle()
    assert h2.bridge.responses[0][1]["outcome"]["outcome"] in ("selected", "cancelled")
    assert "after" in h2.api.texts()


def test_block_streaming_disables_status_cards_only(adapter):
    def script(bridge, sid, text, sink):
        sink.text_chunk(sid, "streamed")
        bridge.ask(sink, sid, "req-1")
        return "final"

    h = adapter(script, block_streaming=True)
    h.send("x")
    assert h.wait_for(lambda: len(h.question_tracks()) == 1)
    assert h.status_tracks() == []
    h.card_request(submit_payload(h.question_tracks()[0]))
    h.idle()
    assert h.bridge.responses and "final" in h.api.texts()


def test_ingress_rejections_mutate_nothing(adapter):
    h = adapter(None, secret="api-secret")
    assert h.robot_request(h.robot_payload("x"), secret="wrong").status == 403
    old = str(int((h.clock.time() - 3601) * 1000))
    assert h.robot_request(h.robot_payload("x"), ts=old).status == 403
    assert h.robot_request(None, body=b"{not json").status == 400
    from channelkit.ingress import Headers, IngressRequest

    missing = h.channel.handle_robot_request(
        IngressRequest("POST", "/dingtalk/robot", Headers({}), b"{}")
    )
    assert missing.status == 401
    assert h.card_request(submit_payload("unknown")).status == 401  # secret set, no headers
    from channelkit.platforms.dingtalk import card_signature

    ts = str(int(h.clock.time() * 1000))
    good = {
        "x-ddpaas-signature-timestamp": ts,
        "x-ddpaas-signature": card_signature(ts, "api-secret"),
    }
    bad = {**good, "x-ddpaas-signature": "nope"}
    assert h.card_request(submit_payload("unknown"), headers=bad).status == 403
    ts_broken = str(int(ts) - 1)  # signatures are one-use: another request, another one
    broken = {
        "x-ddpaas-signature-timestamp": ts_broken,
        "x-ddpaas-signature": card_signature(ts_broken, "api-secret"),
    }
    assert h.card_request(None, headers=broken, body=b"{broken").status == 400
    unknown = h.card_request(submit_payload("unknown"), headers=good)
    assert unknown.status == 200 and json.loads(unknown.body) == {}
    h.idle()
    assert h.api.calls == [] and h.bridge.responses == []
    assert h.channel.map_sizes()["owners"] == 0


def test_duplicate_robot_delivery_runs_once(adapter):
    h = adapter(None)
    payload = h.robot_payload("once", msg_id="dup-1")
    assert h.robot_request(payload).status == 200
    assert h.robot_request(payload).status == 200
    h.idle()
    assert len(h.status_tracks()) == 1
