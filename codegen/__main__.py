"""``python -m codegen`` (write the clients) and ``python -m codegen --check`` (detect drift)."""

from __future__ import annotations

import sys

from codegen.cli import main

if __name__ == "__main__":
    sys.exit(main())
