"""``python -m channelkit``: the ``channelkit`` command."""

from __future__ import annotations

from channelkit.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
