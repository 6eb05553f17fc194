"""The ``channelkit`` console script."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

import channelkit


def _platforms() -> list[str]:
    import channelkit.platforms as platforms

    return sorted(m.name for m in pkgutil.iter_modules(platforms.__path__) if m.ispkg)


def _clients() -> list[str]:
    import channelkit.clients as clients

    return sorted(m.name for m in pkgutil.iter_modules(clients.__path__) if m.ispkg)


def _cmd_info(_: argparse.Namespace) -> int:
    print(f"channelkit {channelkit.__version__} on Python {sys.version.split()[0]}")
    print(f"platform adapters: {', '.join(_platforms()) or '(none)'}")
    print(f"generated clients: {', '.join(_clients()) or '(none)'}")
    extras = []
    for name in ("flask", "django", "acp"):
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        extras.append(name)
    print(f"optional integrations importable: {', '.join(extras) or '(none)'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="channelkit", description=channelkit.__doc__)
    parser.add_argument("--version", action="version", version=channelkit.__version__)
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="print what channelkit has configured and installed")
    info.set_defaults(func=_cmd_info)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
