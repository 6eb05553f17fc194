"""``channelkit pairing list | approve CODE | deny CODE | revoke USER``.

Answers the pairing requests of a bot whose channels use ``access.dm = "pairing"``
(`channelkit.core.pairing`). The records live in the bot's state store: with
``state.redis`` in the configuration this command reads and changes them in Redis
directly, and every process serving the bot sees the change at once. With the in-memory
store they live inside the serving process: ``--admin-port N`` reaches that process's
local admin endpoint (`channelkit.web.admin`, ``serve --admin-port N``) on 127.0.0.1
with the token in ``CHANNELKIT_ADMIN_TOKEN``.
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
    pairing.add_argument(
        "--admin-port",
        type=int,
        default=None,
        metavar="N",
        help="without state.redis: the port of the bot's local admin endpoint on 127.0.0.1 "
        "(serve --admin-port N); the token is read from CHANNELKIT_ADMIN_TOKEN",
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
        if args.admin_port is None:
            return _fail(
                "needs state.redis in the configuration, or --admin-port N to reach the "
                "serving process (the in-memory store's codes live there)",
                2,
            )
        return _over_http(args.admin_port, name, args.action, args.target)
    store = build_state_store(config)
    try:
        book = PairingBook(name, store)
        return _act(book, args.action, args.target)
    except ChannelKitError as exc:
        return _fail(f"the store could not be reached: {exc}", 3)
    finally:
        store.close()


def _over_http(port: int, channel: str, action: str, target: str | None) -> int:
    """The same actions through the serving process's admin endpoint."""
    import os

    import requests

    from channelkit.web.admin import ADMIN_HOST, ADMIN_TOKEN_ENV

    token = os.environ.get(ADMIN_TOKEN_ENV, "")
    if not token:
        return _fail(f"--admin-port needs the admin token in {ADMIN_TOKEN_ENV}", 2)
    url = f"http://{ADMIN_HOST}:{port}/pairing/{channel}"
    headers = {"Authorization": f"Bearer {token}"}
    try:
        if action == "list":
            response = requests.get(url, headers=headers, timeout=10)
        else:
            field = "user" if action == "revoke" else "code"
            body = {field: target}
            response = requests.post(f"{url}/{action}", json=body, headers=headers, timeout=10)
    except requests.RequestException as exc:
        return _fail(f"the admin endpoint on port {port} could not be reached: {exc}", 3)
    try:
        data = response.json()
    except ValueError:
        data = {}
    if response.status_code == 401:
        return _fail(f"the admin endpoint refused the token in {ADMIN_TOKEN_ENV}", 2)
    if response.status_code != 200:
        return _fail(f"{action}: {data.get('error', response.status_code)}", 1)
    if action == "list":
        if not data.get("codes"):
            _out("no pairing requests waiting")
        now = time.time()
        for item in data.get("codes", []):
            age = max(0, int(now - float(item["at"])))
            _out(f"{item['code']}  user={item['user']}  chat={item['chat']}  {age}s ago")
    elif action == "revoke":
        _out(f"revoked: {target} is no longer paired")
    else:
        verb = "approved" if action == "approve" else "denied"
        _out(f"{verb} {data.get('code')}: user {data.get('user')}")
    return 0


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
