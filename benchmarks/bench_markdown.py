"""Markdown rendering time per KB, per dialect, beside the old regular-expression converter.

Usage::

    python benchmarks/bench_markdown.py [--rounds 30]

The input is the 30 golden agent answers (``tests/markdown/golden/*/input.md``)
joined into one document (tables, nested lists, code, links, CJK and emoji). It times
the parse (markdown-it-py into the intermediate form, shared by every dialect), then for
each dialect the rendering of the parsed form, the whole `channelkit.markdown.render()`
(parse and render) and the same with splitting at 4,096 characters; beside it, in the
same run, the removed regular-expression Telegram converter
(``legacy_telegram_markdown.to_html``). Each figure is the best of ``--rounds`` rounds,
in microseconds per KB of Markdown (UTF-8).

Then a live preview: the corpus repeated to about 20 KB is streamed in 100 steps and
each step's text so far is rendered for Telegram as a preview (``preview=True``); the
figure is the mean time per preview, with the settled head cached (what the adapters
do) and parsed whole each time (``close_open_markdown`` then ``parse``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "sdk"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from channelkit.markdown import (  # noqa: E402
    Dialect,
    close_open_markdown,
    parse,
    render,
    render_document,
)
from legacy_telegram_markdown import to_html  # noqa: E402
from markdown_it import MarkdownIt  # noqa: E402

GOLDEN = ROOT / "tests" / "markdown" / "golden"


def corpus() -> str:
    """The golden answers joined, each a section of its own."""
    texts = [p.read_text(encoding="utf-8") for p in sorted(GOLDEN.glob("*/input.md"))]
    return "\n\n".join(t.rstrip("\n") for t in texts) + "\n"


def best_us_per_kb(fn: Callable[[], object], kb: float, rounds: int) -> float:
    """The fastest of ``rounds`` calls of ``fn``, in microseconds per KB."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1e6 / kb


def _mean_ms(fn: Callable[[str], object], steps: list[str]) -> float:
    start = time.perf_counter()
    for step in steps:
        fn(step)
    return (time.perf_counter() - start) * 1e3 / len(steps)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30, help="rounds per figure (best kept)")
    args = parser.parse_args(argv)
    text = corpus()
    kb = len(text.encode("utf-8")) / 1024
    print(f"input: {len(text):,} characters, {kb:.1f} KB, best of {args.rounds} rounds")
    document = parse(text)
    parsing = best_us_per_kb(lambda: parse(text), kb, args.rounds)
    print(f"parse (markdown-it-py -> intermediate form): {parsing:.1f} us/KB")
    # markdown-it-py configured as the pipeline configures it, tokens only: no pure-Python
    # parse of this input can be cheaper than the library's own tokenizer
    tokenizer = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    tokens_only = best_us_per_kb(lambda: tokenizer.parse(text), kb, args.rounds)
    print(f"markdown-it-py's own tokenizer alone (the parser's floor): {tokens_only:.1f} us/KB")
    print(f"{'us/KB':<20} {'render parsed':>14} {'parse+render':>13} {'+ split 4096':>13}")
    for dialect in Dialect:
        alone = best_us_per_kb(lambda d=dialect: render_document(document, d), kb, args.rounds)
        whole = best_us_per_kb(lambda d=dialect: render(text, d), kb, args.rounds)
        split = best_us_per_kb(lambda d=dialect: render(text, d, limit=4096), kb, args.rounds)
        print(f"{dialect.value:<20} {alone:>14.1f} {whole:>13.1f} {split:>13.1f}")
    legacy = best_us_per_kb(lambda: to_html(text), kb, args.rounds)
    print(f"{'regex telegram (old)':<20} {'-':>14} {legacy:>13.1f} {'-':>13}")
    long = text * max(1, round(20_000 / len(text)))
    steps = [long[: len(long) * (i + 1) // 100] for i in range(100)]
    cached = _mean_ms(lambda p: render(p, Dialect.TELEGRAM, preview=True), steps)
    whole = _mean_ms(
        lambda p: render_document(parse(close_open_markdown(p)), Dialect.TELEGRAM), steps
    )
    print(
        f"live preview of a {len(long) / 1000:.0f} k-character answer, 100 steps, mean per "
        f"preview: {cached:.2f} ms with the settled head cached, {whole:.2f} ms parsed whole"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
