"""``channelkit pairing list | approve CODE | deny CODE | revoke USER``.

Answers the pairing requests of a bot whose channels use ``access.dm = "pairing"``
(`channelkit.core.pairing`). The records live in the bot's state store: with
``state.redis`` in the configuration this command reads and changes them in Redis
directly, and every process serving the bot sees the change at once. With the in-memory
store they live inside the serving process only; the command then refuses (use
``channel.access.approve(code)`` in that process).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from channelkit.errors import ChannelKitError, ConfigurationError

__all__ = ["add_pairing_parser"]


def add_pairing_parser(sub: Any) -> None:
    """Add the ``pairing`` subcommand to the ``channelkit`` parser's subparsers."""
    pairing = sub.add_parser(
        "pairing",
        help="list, approve or deny pairing codes; revoke a paired person",
        description="Answer the pairing requests of people who wrote to the bot directly "
        "while access.dm is 'pairing'. The records are in the bot's Redis store "
        "(state.redis), shared by every process serving it.",
        epilog="exit status: 0 done; 1 no such code or person; 2 invalid configuration "
        "or arguments; 3 the store could not be reached.",
    )
    pairing.add_argument("--config", required=True, help="the bot's JSON configuration file")
    pairing.add_argument(
        "--channel",
        default=None,
        help="the channel's name (default: the only channel whose access.dm is 'pairing')",
    )
    pairing.add_argument("action", choices=("list", "approve", "deny", "revoke"), help="what to do")
    pairing.add_argument(
        "target",
        nargs="?",
        default=None,
        help="approve / deny: the CODE the person was given; revoke: the person's USER id",
    )
    pairing.set_defaults(func=_cmd_pairing)


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")


def _fail(text: str, status: int) -> int:
    sys.stderr.write(f"channelkit pairing: {text}\n")
    return status


def _channel_name(config: Any, wanted: str | None) -> str:
    """The channel whose pairings the command answers."""
    names = [spec.name for spec in config.channels]
    if wanted is not None:
        if wanted not in names:
            raise ConfigurationError(f"no channel {wanted!r} (channels: {names})", "--channel")
        return wanted
    pairing = [str(s.name) for s in config.channels if (s.access or {}).get("dm") == "pairing"]
    if len(pairing) == 1:
        return pairing[0]
    if not pairing:
        raise ConfigurationError("no channel has access.dm 'pairing'", "--channel")
    raise ConfigurationError(f"several channels pair people, name one of {pairing}", "--channel")


def _cmd_pairing(args: argparse.Namespace) -> int:
    from channelkit.cluster_config import build_state_store
    from channelkit.config import validate_config_file
    from channelkit.core.pairing import PairingBook

    if args.action != "list" and not args.target:
        return _fail(f"{args.action}: needs a {'USER' if args.action == 'revoke' else 'CODE'}", 2)
    if args.action == "list" and args.target:
        return _fail("list: takes no argument", 2)
    try:
        config = validate_config_file(args.config)
        name = _channel_name(config, args.channel)
    except ConfigurationError as exc:
        return _fail(f"invalid configuration: {exc}", 2)
    if "redis" not in config.state:
        return _fail(
            "needs state.redis in the configuration: with the in-memory store the pairing "
            "codes live inside the serving process only",
            2,
        )
    store = build_state_store(config)
    try:
        book = PairingBook(name, store)
        return _act(book, args.action, args.target)
    except ChannelKitError as exc:
        return _fail(f"the store could not be reached: {exc}", 3)
    finally:
        store.close()


def _act(book: Any, action: str, target: str | None) -> int:
    if action == "list":
        codes = book.codes()
        if not codes:
            _out("no pairing requests waiting")
        now = time.time()
        for request in codes:
            age = max(0, int(now - request.created_at))
            _out(f"{request.code}  user={request.user_id}  chat={request.chat_id}  {age}s ago")
        return 0
    assert target is not None
    if action == "revoke":
        if not book.revoke(target):
            return _fail(f"revoke: {target} is not paired", 1)
        _out(f"revoked: {target} is no longer paired")
        return 0
    request = book.approve(target) if action == "approve" else book.deny(target)
    if request is None:
        return _fail(f"{action}: no such code (unknown, expired or answered already)", 1)
    verb = "approved" if action == "approve" else "denied"
    _out(f"{verb} {request.code}: user {request.user_id}")
    return 0
