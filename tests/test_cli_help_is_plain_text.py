"""`channelkit --help` and every subcommand's --help read as plain text on a terminal:
no reStructuredText markup, and every option says what it does."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

import pytest
from channelkit.cli import build_parser, main

# ``literal``, :role:`x`, a ``.. directive::`` line, a `link`_ or an **emphasis**.
REST_MARKUP = re.compile(r"``|:[a-z]+:`|^\s*\.\. |`_|`[^`\n]+`|\*\*", re.M)


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


SUBCOMMANDS = sorted(_subcommands())


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 0
    return capsys.readouterr().out


def test_markup_pattern_catches_rest() -> None:
    for marked in ("see ``serve``", "a :class:`Channel`", ".. note::", "`docs`_", "**bold**"):
        assert REST_MARKUP.search(marked), marked
    assert not REST_MARKUP.search("run 'channelkit playground' (default: free)")


def test_the_installed_command_prints_plain_help() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "channelkit.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert shown.startswith("usage: channelkit")
    assert REST_MARKUP.search(shown) is None, shown
    for name in SUBCOMMANDS:
        assert name in shown


def test_top_level_help_is_plain_and_lists_every_subcommand(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shown = _help(["--help"], capsys)
    assert REST_MARKUP.search(shown) is None, shown
    documented = {"check-config", "config-schema", "info", "playground", "serve"}
    assert documented <= set(SUBCOMMANDS), SUBCOMMANDS
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help for choice in sub._choices_actions}
    assert sorted(helps) == SUBCOMMANDS
    assert all(text and text.strip() for text in helps.values()), helps


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_subcommand_help_is_plain_and_every_option_has_a_help_line(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    shown = _help([name, "--help"], capsys)
    assert shown.startswith(f"usage: channelkit {name}")
    assert REST_MARKUP.search(shown) is None, shown
    parser = _subcommands()[name]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help and action.help != argparse.SUPPRESS, action.dest
        assert action.help.strip() and REST_MARKUP.search(action.help) is None, action.help
        first = action.help.split()[0]
        assert first in shown, (action.dest, shown)
