"""channelkit's OpenAPI -> Python client generator (stdlib only).

``python -m codegen`` reads every ``openapi/*.json`` and writes
``sdk/channelkit/clients/<platform>/{__init__,models,client}.py``;
``python -m codegen --check`` regenerates into a temporary directory and exits 1 naming
each file that differs, is missing or is extra. See ``openapi/CONVENTIONS.md`` and
``docs/regenerating-clients.md``.
"""

from __future__ import annotations

from codegen.cli import check, generate, main, render_all

__all__ = ["check", "generate", "main", "render_all"]
