"""The ``channelkit`` console script.

* ``channelkit info`` - what is configured and installed;
* ``channelkit playground`` - the local emulator + chat page + demo agent;
* ``channelkit serve --config FILE`` - run configured channels on a production WSGI
  server (waitress or gunicorn, see docs/deployment.md);
* ``channelkit check-config FILE`` / ``channelkit config-schema`` - validate a
  configuration / print its JSON Schema.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys
from collections.abc import Sequence
from typing import Any

import channelkit
from channelkit.errors import ConfigurationError

#: WSGI servers ``serve`` can use, in the order ``engine: auto`` tries them.
SERVER_ENGINES = ("waitress", "gunicorn")

NO_SERVER_MESSAGE = (
    "channelkit serve needs a production WSGI server and found none.\n"
    "Install one of them, then run the command again:\n"
    "    python -m pip install waitress      # recommended, pure Python, threaded\n"
    "    python -m pip install gunicorn      # Unix; runs one process with threads\n"
    "(The standard library's server is only for `channelkit playground`; see "
    "docs/deployment.md.)"
)


def _platforms() -> list[str]:
    import channelkit.platforms as platforms

    return sorted(
        m.name for m in pkgutil.iter_modules(platforms.__path__) if m.ispkg and m.name != "common"
    )


def _clients() -> list[str]:
    import channelkit.clients as clients

    return sorted(m.name for m in pkgutil.iter_modules(clients.__path__) if m.ispkg)


def _cmd_info(_: argparse.Namespace) -> int:
    print(f"channelkit {channelkit.__version__} on Python {sys.version.split()[0]}")
    print(f"platform adapters: {', '.join(_platforms()) or '(none)'}")
    print(f"generated clients: {', '.join(_clients()) or '(none)'}")
    extras = []
    for name in ("flask", "django", "acp", "waitress", "gunicorn"):
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        extras.append(name)
    print(f"optional integrations importable: {', '.join(extras) or '(none)'}")
    return 0


def _feishu_options(args: argparse.Namespace) -> dict[str, Any]:
    key = getattr(args, "feishu_encrypt_key", None)
    if key is None:
        return {}
    return {"feishu_encrypt_key": key or None}


def _cmd_playground(args: argparse.Namespace) -> int:
    from channelkit.playground import Playground

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        playground = Playground(
            platform=args.platform,
            agent=args.agent,
            host=args.host,
            port=args.port,
            demo_delay=args.delay,
            **_feishu_options(args),
        )
    except ConfigurationError as exc:
        print(f"channelkit playground: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(
            f"channelkit playground: cannot listen on {args.host}:{args.port}: {exc}",
            file=sys.stderr,
        )
        return 2
    agent = f"ACP agent `{args.agent}`" if args.agent else "the built-in demo agent"
    print(f"channelkit playground ({args.platform} emulator, {agent})")
    print(f"Open {playground.url}/ in your browser. Press Ctrl+C to stop.", flush=True)
    playground.serve_forever()
    return 0


def _pick_engine(preferred: str) -> str | None:
    candidates = SERVER_ENGINES if preferred == "auto" else (preferred,)
    for name in candidates:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        return name
    return None


def run_server(engine: str, app: Any, host: str, port: int, threads: int) -> None:
    """Serve ``app`` with ``engine`` (``waitress`` or ``gunicorn``) until stopped."""
    if engine == "waitress":
        waitress = importlib.import_module("waitress")
        waitress.serve(app, host=host, port=port, threads=threads)
        return
    base = importlib.import_module("gunicorn.app.base")

    class _Gunicorn(base.BaseApplication):  # type: ignore[misc,name-defined]
        def load_config(self) -> None:
            # One process: channel state (runs, pending questions) lives in memory.
            self.cfg.set("bind", f"{host}:{port}")
            self.cfg.set("workers", 1)
            self.cfg.set("worker_class", "gthread")
            self.cfg.set("threads", threads)

        def load(self) -> Any:
            return app

    _Gunicorn().run()


def _cmd_serve(args: argparse.Namespace) -> int:
    from channelkit.config import build_channels, load_config
    from channelkit.web import MAX_BODY_BYTES, create_wsgi_app

    try:
        config = load_config(args.config)
    except ConfigurationError as exc:
        print(f"channelkit serve: invalid configuration: {exc}", file=sys.stderr)
        return 2
    preferred = args.engine or str(config.server.get("engine", "auto"))
    engine = _pick_engine(preferred)
    if engine is None:
        print(NO_SERVER_MESSAGE, file=sys.stderr)
        return 3
    level = str(config.options.get("logLevel", "INFO"))
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        channels = build_channels(config)
    except ConfigurationError as exc:
        print(f"channelkit serve: invalid configuration: {exc}", file=sys.stderr)
        return 2
    app = create_wsgi_app(
        channels, max_body_bytes=int(config.options.get("maxBodyBytes", MAX_BODY_BYTES))
    )
    host = args.host or str(config.server.get("host", "127.0.0.1"))
    port = args.port if args.port is not None else int(config.server.get("port", 8000))
    threads = int(config.server.get("threads", 8))
    paths = ", ".join(path for path, _ in app.dispatcher.routes())
    print(f"channelkit serve: {engine} on http://{host}:{port} ({paths})", flush=True)
    try:
        run_server(engine, app, host, port, threads)
    except KeyboardInterrupt:
        pass
    finally:
        for channel in channels:
            channel.close()
    return 0


def _cmd_check_config(args: argparse.Namespace) -> int:
    from channelkit.config import load_config

    try:
        config = load_config(args.config)
    except ConfigurationError as exc:
        print(f"invalid: {exc}", file=sys.stderr)
        return 2
    names = ", ".join(f"{c.name} ({c.platform})" for c in config.channels)
    print(f"ok: {len(config.channels)} channel(s): {names}; agent: {config.agent.get('type')}")
    return 0


def _cmd_config_schema(_: argparse.Namespace) -> int:
    from channelkit.config import schema_json

    print(schema_json())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="channelkit",
        description=(
            "channelkit: connect an AI agent's runs to IM platforms with native "
            "interactions. Try it locally with 'channelkit playground'; serve real "
            "channels with 'channelkit serve --config channelkit.json'."
        ),
    )
    parser.add_argument("--version", action="version", version=channelkit.__version__)
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="print what channelkit has configured and installed")
    info.set_defaults(func=_cmd_info)

    play = sub.add_parser(
        "playground", help="run the local platform emulator, chat page and demo agent"
    )
    play.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: free)")
    play.add_argument("--host", default="127.0.0.1", help="address to listen on")
    play.add_argument(
        "--platform",
        default="dingtalk",
        choices=["dingtalk", "feishu", "telegram"],
        help="platform to emulate (default: dingtalk)",
    )
    play.add_argument(
        "--feishu-encrypt-key",
        default=None,
        metavar="KEY",
        help="Feishu only: the encrypt key callbacks are encrypted and signed with "
        '(default: a playground key; "" sends plain, unsigned callbacks)',
    )
    play.add_argument(
        "--agent", default=None, metavar="CMD", help='an ACP agent command, e.g. "qwen --acp"'
    )
    play.add_argument(
        "--delay", type=float, default=0.06, help="demo agent pause between words (seconds)"
    )
    play.set_defaults(func=_cmd_playground)

    serve = sub.add_parser("serve", help="serve configured channels on a production WSGI server")
    serve.add_argument("--config", required=True, help="the JSON configuration file")
    serve.add_argument(
        "--host", default=None, help="listen address (default: server.host, else 127.0.0.1)"
    )
    serve.add_argument(
        "--port", type=int, default=None, help="listen port (default: server.port, else 8000)"
    )
    serve.add_argument(
        "--engine",
        choices=["auto", *SERVER_ENGINES],
        default=None,
        help="WSGI server (default: server.engine, else auto: waitress, then gunicorn)",
    )
    serve.set_defaults(func=_cmd_serve)

    check = sub.add_parser("check-config", help="validate a configuration file")
    check.add_argument("config", help="the JSON configuration file to validate")
    check.set_defaults(func=_cmd_check_config)

    schema = sub.add_parser("config-schema", help="print the configuration JSON Schema")
    schema.set_defaults(func=_cmd_config_schema)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
