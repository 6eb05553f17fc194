"""An in-process agent for ``channelkit serve`` subprocess tests (configured as
``{"type": "function", "function": "recording_serve_agent:agent"}`` with this directory on
PYTHONPATH): it appends each prompt it receives, as one JSON line, to the file named by
``$CHANNELKIT_TEST_RECORD``, then answers with the text reversed (so the answer can be
told apart from the prompt wherever a platform shows both)."""

from __future__ import annotations

import json
import os
import threading

from channelkit.agents.function import Turn

_LOCK = threading.Lock()


def agent(turn: Turn) -> str:
    line = json.dumps({"session_id": turn.session_id, "text": turn.text})
    with _LOCK, open(os.environ["CHANNELKIT_TEST_RECORD"], "a", encoding="utf-8") as out:
        out.write(line + "\n")
    return f"reversed: {turn.text[::-1]}"
