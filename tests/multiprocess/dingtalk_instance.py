"""One DingTalk instance of a bot in its own process, for the multi-process tests.

``python dingtalk_instance.py EMULATOR_URL REDIS_URL NAMESPACE LOG_FILE`` serves
``"ingress": "http"`` on 127.0.0.1 (a free port, printed as ``PORT <n>``), with a
RedisStore and a short lease (1 s renew / 3 s expiry). The scripted agent: ``ask``
asks one question and answers ``Answer: <region>`` (each answer it receives is
appended to LOG_FILE, one line); ``seg`` says ``Before the question`` first and answers
``After: <region>``; ``hold`` streams text and runs until cancelled (then appends its
text to ``LOG_FILE.stopped``); ``approve`` asks
permission to run a tool and answers ``Decision: <option id>``.
"""

from __future__ import annotations

import os
import sys
import threading

from channelkit.agents.function import FunctionAgent, Question, Turn
from channelkit.platforms.dingtalk import DingtalkChannel, DingtalkConfig
from channelkit.playground.server import LocalServer
from channelkit.state import open_store
from channelkit.web.wsgi import create_wsgi_app

APP_KEY = "ding-test-app"
APP_SECRET = "ding-test-secret"
CARD_SECRET = "ding-card-secret"


def _question_card() -> dict[str, object]:
    """A shorter question card lifetime when the test asks for one (milliseconds)."""
    timeout_ms = int(os.environ.get("CHANNELKIT_TEST_QUESTION_TIMEOUT_MS", "0"))
    return {"questionCard": {"timeoutMs": timeout_ms}} if timeout_ms > 0 else {}


def main() -> None:
    emulator, redis_url, namespace, log_file = sys.argv[1:5]
    lock = threading.Lock()

    def agent(turn: Turn) -> str:
        if turn.text.startswith("hold"):
            turn.say("Working on it")
            while not turn.cancelled:
                threading.Event().wait(0.05)  # a long-running tool call
            with lock, open(log_file + ".stopped", "a", encoding="utf-8") as log:
                log.write(f"{turn.text}\n")  # the run saw its cancellation
            return "stopped"
        if turn.text.startswith("approve"):  # a tool permission (an approval card)
            decision = turn.request_permission("Run ls")
            with lock, open(log_file, "a", encoding="utf-8") as log:
                log.write(f"permission:{decision.option_id}\n")
            return f"Decision: {decision.option_id}"
        if turn.text.startswith("seg"):  # a segment before the question, one after it
            turn.say("Before the question")
        answers = turn.ask([Question("Which region?", ["Beijing", "Shanghai"], header="Region")])
        with lock, open(log_file, "a", encoding="utf-8") as log:
            log.write(f"{answers['0']}\n")
        prefix = "After" if turn.text.startswith("seg") else "Answer"
        return f"{prefix}: {answers['0']}"

    config = DingtalkConfig.from_dict(
        {
            "clientId": APP_KEY,
            "clientSecret": APP_SECRET,
            "cardCallbackSecret": CARD_SECRET,
            "cardCallbackRouteKey": "channelkit-test",
            "apiBaseUrl": emulator,
            "model": "test-model",
            "interactiveCards": {"enabled": True, **_question_card()},
            "ingress": "http",
        }
    )
    store = open_store({"redis": {"url": redis_url}, "namespace": namespace})
    channel = DingtalkChannel(
        config,
        FunctionAgent(agent, question_timeout=60),
        store=store,
        cluster_options={"leaseRenewS": 1.0, "leaseExpiryS": 3.0},
    )
    server = LocalServer().start(create_wsgi_app([channel]))
    print("PORT", server.url.rsplit(":", 1)[1], channel.cluster.cluster.instance_id, flush=True)
    sys.stdin.read()  # until the test closes stdin (or kills the process)
    channel.close(timeout=5)
    server.stop()


if __name__ == "__main__":
    main()
