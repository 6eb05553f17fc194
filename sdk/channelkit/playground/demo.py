"""The playground's built-in demo agent (a function agent).

* any message: streams a short answer, asks a two-question form (one single-select, one
  multi-select) and continues in a new status card with the answers;
* ``present``: a rich presentation (title, tone, text, context, divider, buttons)
  between two pieces of text, rendered by the platform's renderer; its "Say hello"
  button comes back as the message ``hello from a button``, "Help" as ``/help``;
* ``markdown``: streams a fixed Markdown sample (`DEMO_MARKDOWN`: a heading, bold,
  italic, a link, a bullet list, a fenced code block, a 3x4 table and a long paragraph)
  so a person can see how each platform renders it, while streaming and at the end;
* ``long``: streams for up to a minute so there is time to press Stop;
* ``fail``: fails after a little text (the card ends as Failed);
* ``picture``: sends back a PNG it draws in memory (`demo_png`) with `Turn.send_image`;
* a message with attachments: describes each file (name, content type, size in bytes)
  instead of asking the form.
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Iterator

from channelkit.agents.function import FunctionAgent, Question, QuestionError, Turn
from channelkit.errors import FileNotDelivered

__all__ = [
    "DEMO_MARKDOWN",
    "DEMO_PICTURE_NAME",
    "DEMO_PRESENTATION",
    "DEMO_QUESTIONS",
    "DemoAgent",
    "demo_agent",
    "demo_png",
]

#: What ``present`` shows (the JSON form ``Turn.present`` accepts).
DEMO_PRESENTATION = {
    "title": "Deployment finished",
    "tone": "success",
    "blocks": [
        {"type": "text", "text": "All **3** services are up and healthy."},
        {"type": "context", "text": "channelkit demo - took 42 s"},
        {"type": "divider"},
        {
            "type": "buttons",
            "buttons": [
                {"label": "Open docs", "url": "https://example.com/channelkit/docs"},
                {"label": "Say hello", "value": "hello from a button"},
                {"label": "Help", "command": "/help"},
            ],
        },
    ],
}

#: What ``markdown`` answers: one of each construct the platforms render differently.
DEMO_MARKDOWN = """## Release notes

This build is **ready** and *mostly* quiet. Details are on the
[status page](https://example.com/channelkit/status).

- Parser: one pass for every platform
- Tables: native, aligned or one line per cell
- Previews: open constructs closed while streaming

```python
def greet(name: str) -> str:
    return f"Hello, {name}!"
```

| Service | Region | Status | Latency |
|---|---|---|---|
| api | eu-west | up | 42 ms |
| worker | us-east | up | 57 ms |
| search | ap-south | degraded | 310 ms |

A long paragraph closes the sample, so a platform that splits long answers has \
something to split: every platform gets the same parsed text, rendered in its own \
dialect, with the table following that platform's policy and each part of a split \
answer valid on its own, never cut inside a code block, a link or a character.
"""

#: The file name of the image ``picture`` sends.
DEMO_PICTURE_NAME = "picture.png"
#: Said before the image ``picture`` sends.
DEMO_PICTURE_INTRO = "Here is a picture I drew for you:"
#: The first line of the answer to a message with attachments.
DEMO_FILES_INTRO = "You sent {count} file(s):"
#: One line per attachment.
DEMO_FILE_LINE = "- **{name}**: {content_type}, {size} bytes"
#: The last line of that answer.
DEMO_FILES_OUTRO = "Send **picture** to get an image back."


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def demo_png(width: int = 96, height: int = 64) -> bytes:
    """A small valid PNG (8-bit RGB, a colour gradient with a diagonal stripe) built in
    memory with `zlib` and `struct`: what the demo's ``picture`` sends."""
    if not (0 < width <= 4096 and 0 < height <= 4096):
        raise ValueError("width and height: must be between 1 and 4096 pixels")
    rows = bytearray()
    for y in range(height):
        rows.append(0)  # filter type None
        for x in range(width):
            if abs(x * height - y * width) < width * 3:  # the diagonal
                rows += b"\xff\xff\xff"
            else:
                rows += bytes((x * 255 // width, y * 255 // height, 160))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", zlib.compress(bytes(rows), 9))
        + _png_chunk(b"IEND", b"")
    )


DEMO_QUESTIONS = (
    Question(
        "Which color should the demo use?",
        [("Red", "warm"), ("Green", "calm"), ("Blue", "cool")],
        header="Color",
    ),
    Question(
        "Which toppings do you want?",
        [("Cheese", ""), ("Olives", ""), ("Basil", "")],
        header="Toppings",
        multi_select=True,
    ),
)


def _words(text: str) -> Iterator[str]:
    parts = text.split(" ")
    for index, part in enumerate(parts):
        yield part if index == len(parts) - 1 else part + " "


class DemoAgent:
    """The demo's behaviour; ``delay`` is the pause between streamed words (seconds).

    Pauses wait on an event that `stop()` sets, so closing never hangs.
    """

    def __init__(self, delay: float = 0.06, long_seconds: float = 60.0) -> None:
        self.delay = max(0.0, delay)
        self.long_seconds = long_seconds
        self._stopped = threading.Event()

    def stop(self) -> None:
        """Release any pause in progress (used at shutdown)."""
        self._stopped.set()

    def _pause(self, turn: Turn, seconds: float) -> bool:
        """Wait ``seconds``; False when the turn was cancelled or the demo stopped."""
        if seconds > 0:
            self._stopped.wait(seconds)
        return not (turn.cancelled or self._stopped.is_set())

    def _stream(self, turn: Turn, text: str) -> bool:
        for word in _words(text):
            if not self._pause(turn, self.delay):
                return False
            turn.say(word)
        return True

    def __call__(self, turn: Turn) -> str | None:
        text = turn.text.strip()
        command = text.lower()
        if command == "long":
            return self._long(turn)
        if command == "present":
            if not self._stream(turn, "Here is a presentation, rendered by the platform:"):
                return None
            turn.present(DEMO_PRESENTATION)
            self._stream(turn, "And the text goes on in a new segment after it.")
            return None
        if command == "markdown":
            self._stream(turn, DEMO_MARKDOWN)
            return None
        if command == "fail":
            self._stream(turn, "Starting something that will fail...")
            raise RuntimeError("the demo agent failed on purpose")
        if turn.attachments:
            self._describe_files(turn)
            return None
        if command == "picture":
            self._picture(turn)
            return None
        intro = (
            f"Hello! I am the channelkit demo agent. You wrote: **{text}**. "
            "This card streams while I type. Next I will ask you two questions "
            "in a form card."
        )
        if not self._stream(turn, intro):
            return None
        try:
            answers = turn.ask(list(DEMO_QUESTIONS))
        except QuestionError:
            self._stream(turn, "No answers, no problem. Send me another message any time.")
            return None
        color = answers.get("0", "?")
        toppings = answers.get("1", "?")
        self._stream(
            turn,
            f"Thanks! You picked **{color}** and **{toppings}**. This text continues in a "
            "new status card after the form. Send **long** to try the Stop button, or "
            "**fail** to see a failed run.",
        )
        return None

    def _describe_files(self, turn: Turn) -> None:
        lines = [DEMO_FILES_INTRO.format(count=len(turn.attachments))]
        lines += [
            DEMO_FILE_LINE.format(name=f.name, content_type=f.content_type, size=f.size)
            for f in turn.attachments
        ]
        lines.append("\n" + DEMO_FILES_OUTRO)
        self._stream(turn, "\n".join(lines))

    def _picture(self, turn: Turn) -> None:
        if not self._stream(turn, DEMO_PICTURE_INTRO):
            return
        try:
            turn.send_image(demo_png(), name=DEMO_PICTURE_NAME)
        except FileNotDelivered:
            pass  # the person was told which file did not arrive and why

    def _long(self, turn: Turn) -> str | None:
        steps = max(1, int(self.long_seconds / max(self.delay * 5, 0.01)))
        for index in range(1, steps + 1):
            if not self._stream(turn, f"Step {index}: still working on a long answer. "):
                return None
            turn.say("\n")
        return None


def demo_agent(delay: float = 0.06, long_seconds: float = 60.0) -> FunctionAgent:
    """A `FunctionAgent` running `DemoAgent`."""
    demo = DemoAgent(delay=delay, long_seconds=long_seconds)
    agent = FunctionAgent(demo, question_timeout=600.0, name="channelkit-demo")
    agent.demo = demo  # type: ignore[attr-defined]
    return agent
