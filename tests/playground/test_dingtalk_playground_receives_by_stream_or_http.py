"""The DingTalk playground receives over Stream mode by default and over HTTP callbacks
with ``--ingress http``; ``GET /_emulator/callbacks`` names each delivery's transport."""

from __future__ import annotations

import pytest
from channelkit.cli import build_parser
from channelkit.playground import Playground
from playground_helpers import callbacks, click, send, views, wait


@pytest.mark.parametrize(("ingress", "transport"), [(None, "stream"), ("http", "http")])
def test_messages_and_clicks_use_the_configured_transport(
    ingress: str | None, transport: str
) -> None:
    with Playground(ingress=ingress, demo_delay=0.0) as pg:
        assert pg.channel.dingtalk.ingress == transport
        send(pg, "hello")
        question = wait(
            lambda: next((v for v in views(pg) if v["kind"] == "question"), None),
            "the demo's question card",
            timeout=15.0,
        )
        click(pg, question["id"], "submit", {"0": question["questions"][0]["options"][0]["value"]})
        wait(
            lambda: len([c for c in callbacks(pg) if c["kind"] == "card"]) == 1,
            "the click's delivery",
            timeout=15.0,
        )
        recorded = callbacks(pg)
        assert {(c["kind"], c["transport"]) for c in recorded} == {
            ("robot", transport),
            ("card", transport),
        }
        assert all(c["status"] == 200 for c in recorded)
        gateway_opens = [c for c in pg.emulator.calls() if "gateway" in c["path"]]
        assert bool(gateway_opens) == (transport == "stream")
        assert all(c["body"]["clientSecret"] == "***" for c in gateway_opens)


def test_the_cli_takes_the_dingtalk_ingress() -> None:
    args = build_parser().parse_args(["playground", "--ingress", "http"])
    assert args.ingress == "http"
