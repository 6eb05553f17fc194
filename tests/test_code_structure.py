"""The package keeps the shape docs/architecture.md describes.

* Every ``platforms/<name>/`` package uses only the shared room names (``adapter``,
  ``config``, ``ingress``, ``api``, ``output``, ``questions``, ``renderer``, ``sender``)
  plus the platform-specific modules listed in :data:`PLATFORM_EXTRAS`; ``common`` holds
  what every adapter shares and is exempt.
* Imports go one way: ``presentation`` imports nothing from ``platforms``; ``core`` imports
  nothing from ``platforms`` or ``web``; ``platforms`` imports nothing from ``web``. Every
  import statement counts, wherever it sits (module level, inside a function, under
  ``TYPE_CHECKING``), relative ones included, and so do ``importlib.import_module`` /
  ``__import__`` calls with a literal name.
* Every exception class defined in the package lives in ``channelkit.errors``.

* Every module other than a package's ``__init__.py`` defines something of its own: a
  module that only re-exports names imported from elsewhere is an old import path kept
  alive, and the package (0.x, never published) keeps none (the CHANGELOG lists moves).

A module holds one concern and is named after it; there is no line-count rule.

Each check collects every violation and fails with the whole list, one per line.
Run directly (``python test_code_structure.py``) to print every list without pytest.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

# -- what the structure allows ------------------------------------------------------------

ROOMS = frozenset(
    {
        "__init__.py",
        "adapter.py",
        "config.py",
        "files.py",  # files both ways: a person's attachments in, the agent's files out
        "ingress.py",
        "api.py",
        "output.py",
        "questions.py",
        "renderer.py",
        "sender.py",
    }
)

ANY = None  # the package is exempt from the room names
PLATFORM_EXTRAS: dict[str, frozenset[str] | None] = {
    "common": ANY,
    # image-marker sanitizing for cards and Markdown; the Stream mode connection; the
    # store-backed records, routed callbacks and recovery of several processes; approval
    # buttons for tool permissions (on the question card template)
    "dingtalk": frozenset({"approvals.py", "cluster.py", "markdown.py", "stream.py"}),
    # event decryption; card JSON builder; the long connection (WebSocket event delivery);
    # approval buttons for tool permissions
    "feishu": frozenset({"approvals.py", "crypto.py", "cards.py", "longconn.py"}),
    # the Socket Mode connection (WebSocket envelopes); approval buttons for tool permissions
    "slack": frozenset({"approvals.py", "socket_mode.py"}),
    # getUpdates long polling; approval buttons for tool permissions; group rules
    "telegram": frozenset({"approvals.py", "groups.py", "indicators.py", "polling.py"}),
    # the Gateway (WebSocket) connection; REST rate-limit buckets; approval buttons for
    # tool permissions; the typing keep-alive
    "discord": frozenset({"approvals.py", "gateway.py", "indicators.py", "ratelimit.py"}),
    "weixin": frozenset({"indicators.py", "polling.py"}),  # + getupdates long polling
}

# (importing layer, imported layer): an edge that must not exist.
FORBIDDEN_IMPORTS: tuple[tuple[str, str], ...] = (
    ("channelkit.presentation", "channelkit.platforms"),
    ("channelkit.core", "channelkit.platforms"),
    ("channelkit.core", "channelkit.web"),
    ("channelkit.platforms", "channelkit.web"),
)

ERRORS_MODULE = "channelkit.errors"
GENERATED = "channelkit.clients"


# -- the tree -------------------------------------------------------------------------------


def _find_root() -> Path:
    """The repository root: ``$CHANNELKIT_ROOT``, else the first ancestor of this file (or
    of the working directory) holding ``sdk/channelkit``."""
    env = os.environ.get("CHANNELKIT_ROOT")
    if env:
        return Path(env).resolve()
    for start in (Path(__file__).resolve().parent, Path.cwd().resolve()):
        for candidate in (start, *start.parents):
            if (candidate / "sdk" / "channelkit" / "__init__.py").is_file():
                return candidate
    raise RuntimeError("no sdk/channelkit above this file or the working directory")


ROOT = _find_root()
SDK = ROOT / "sdk"
PACKAGE = SDK / "channelkit"
PLATFORMS = PACKAGE / "platforms"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SDK).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _in(name: str, layer: str) -> bool:
    return name == layer or name.startswith(layer + ".")


def _hand_written() -> Iterator[Path]:
    """Every ``.py`` under sdk/channelkit except the generated clients, in path order."""
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in path.parts or _in(_module_name(path), GENERATED):
            continue
        yield path


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@functools.cache
def _parsed(path: Path) -> ast.Module | SyntaxError:
    """The module's AST (parsed once for all the checks, which only read it), or the error."""
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        return exc


def _parse(path: Path, found: list[str]) -> ast.Module | None:
    """The module's AST, or ``None`` with a violation added when it does not parse."""
    tree = _parsed(path)
    if isinstance(tree, SyntaxError):
        found.append(f"{_rel(path)}:{tree.lineno}: does not parse ({tree.msg})")
        return None
    return tree


def _defines_nothing_of_its_own(tree: ast.Module) -> bool:
    """A body of a docstring, imports and ``__all__`` only: a pure re-export."""
    for index, node in enumerate(tree.body):
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if targets and all(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            continue
        return False
    return True


# -- 1. room names ------------------------------------------------------------------------


def room_violations() -> list[str]:
    found: list[str] = []
    for package in sorted(p for p in PLATFORMS.iterdir() if p.is_dir()):
        if package.name == "__pycache__":
            continue
        extras = PLATFORM_EXTRAS.get(package.name, frozenset())
        if extras is ANY:
            continue
        allowed = ROOMS | extras
        for entry in sorted(package.iterdir()):
            if entry.name == "__pycache__":
                continue
            if entry.is_dir():
                # A room may grow into a subpackage: output/ stands for output.py.
                if not (entry / "__init__.py").is_file():
                    continue
                room = entry.name + ".py"
            elif entry.suffix == ".py":
                room = entry.name
            else:
                continue
            if room not in allowed:
                found.append(
                    f"{_rel(entry)}: not a room name ({', '.join(sorted(allowed))}); "
                    f"fold it into a room or add it to PLATFORM_EXTRAS[{package.name!r}]"
                )
    return found


# -- 2. no re-export modules --------------------------------------------------------------


def reexport_violations() -> list[str]:
    found = []
    for path in _hand_written():
        if path.name == "__init__.py":
            continue
        tree = _parse(path, found)
        if tree is not None and _defines_nothing_of_its_own(tree):
            found.append(
                f"{_rel(path)}: only re-exports names defined elsewhere; import them from home"
            )
    return found


# -- 3. import direction ------------------------------------------------------------------


def _imported_names(tree: ast.Module, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """``(line, absolute module name)`` of every import in the module, at any depth.

    ``from X import y`` yields both ``X`` and ``X.y`` (``y`` may be a submodule, as in
    ``from channelkit import platforms`` or ``from . import sender``).
    """
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base_parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(base_parts)
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            yield node.lineno, target
            for alias in node.names:
                if alias.name != "*":
                    yield node.lineno, f"{target}.{alias.name}"
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else ""
            )
            first = node.args[0]
            if (
                name in ("import_module", "__import__")
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
            ):
                yield node.lineno, first.value
            elif name in ("import_module", "__import__") and isinstance(first, ast.JoinedStr):
                # f"channelkit.platforms.{name}.sender": the literal prefix names the layer.
                prefix = ""
                for piece in first.values:
                    if not (isinstance(piece, ast.Constant) and isinstance(piece.value, str)):
                        break
                    prefix += piece.value
                if prefix:
                    yield node.lineno, prefix.rstrip(".") + ".<dynamic>"


def import_violations() -> list[str]:
    found = []
    for path in _hand_written():
        module = _module_name(path)
        tree = _parse(path, found)
        if tree is None:
            continue
        is_package = path.name == "__init__.py"
        seen: set[tuple[int, str]] = set()
        for line, target in _imported_names(tree, module, is_package):
            for source_layer, target_layer in FORBIDDEN_IMPORTS:
                if (
                    _in(module, source_layer)
                    and _in(target, target_layer)
                    and (line, target_layer) not in seen
                ):
                    seen.add((line, target_layer))
                    found.append(
                        f"{_rel(path)}:{line}: {source_layer} imports {target} "
                        f"({source_layer} must not import {target_layer})"
                    )
    return found


# -- 4. exceptions --------------------------------------------------------------------------


def _class_paths(tree: ast.Module) -> Iterator[tuple[int, list[str], list[str]]]:
    """``(line, qualified name parts, base expressions)`` of every class, nested included
    (classes inside functions are reported with ``<locals>`` and checked statically)."""

    def walk(
        body: list[ast.stmt], prefix: list[str], local: bool
    ) -> Iterator[tuple[int, list[str], list[str]]]:
        for node in body:
            if isinstance(node, ast.ClassDef):
                path = [*prefix, node.name]
                bases = [ast.unparse(b) for b in node.bases]
                yield node.lineno, (["<locals>", *path] if local else path), bases
                yield from walk(node.body, path, local)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield from walk(node.body, [*prefix, node.name], True)
            elif isinstance(node, ast.If | ast.Try | ast.With | ast.For | ast.While):
                for field in ("body", "orelse", "finalbody", "handlers"):
                    for child in getattr(node, field, []) or []:
                        inner = child.body if isinstance(child, ast.ExceptHandler) else [child]
                        yield from walk(inner, prefix, local)

    yield from walk(tree.body, [], False)


_BUILTIN_EXCEPTIONS = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}


def _static_exception_names(tree: ast.Module) -> set[str]:
    """Class names in the module that derive (by name) from a known exception class."""
    errors_module = importlib.import_module(ERRORS_MODULE)
    known = set(_BUILTIN_EXCEPTIONS) | {
        name
        for name, value in vars(errors_module).items()
        if isinstance(value, type) and issubclass(value, BaseException)
    }
    classes = [(path[-1], bases) for _line, path, bases in _class_paths(tree)]
    changed = True
    while changed:
        changed = False
        for name, bases in classes:
            if name not in known and any(b.rpartition(".")[2] in known for b in bases):
                known.add(name)
                changed = True
    return {name for name, _bases in classes if name in known}


def exception_violations() -> tuple[list[str], list[str]]:
    """``(violations, notes)``; notes name modules checked statically (not importable)."""
    found: list[str] = []
    notes: list[str] = []
    for path in _hand_written():
        module_name = _module_name(path)
        tree = _parse(path, found)
        if tree is None:
            continue
        classes = list(_class_paths(tree))
        if not classes:
            continue
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # an optional dependency missing: fall back to the AST
            notes.append(f"{_rel(path)}: not importable ({exc!r}); checked by base names")
            module = None
        static = _static_exception_names(tree)
        for line, parts, _bases in classes:
            obj: object = None
            if module is not None and parts[0] != "<locals>":
                obj = module
                for part in parts:
                    obj = getattr(obj, part, None)
                    if obj is None:
                        break
            if isinstance(obj, type):
                if not issubclass(obj, BaseException):
                    continue
                where = obj.__module__
                if where != module_name or where == ERRORS_MODULE:
                    continue  # moved (``__module__`` says errors) or a name bound elsewhere
            elif parts[-1] not in static:
                continue
            else:
                where = module_name
            found.append(
                f"{_rel(path)}:{line}: exception class {'.'.join(parts)} is defined in "
                f"{where}, not {ERRORS_MODULE}"
            )
    return found, notes


# -- the tests ------------------------------------------------------------------------------


def _report(title: str, violations: list[str]) -> str:
    return f"{title} ({len(violations)}):\n  " + "\n  ".join(violations)


def test_platform_packages_use_only_the_room_names() -> None:
    violations = room_violations()
    assert not violations, _report("platform modules outside the room names", violations)


def test_no_module_only_re_exports_names_from_elsewhere() -> None:
    violations = reexport_violations()
    assert not violations, _report("modules that only re-export", violations)


def test_imports_only_go_downward() -> None:
    violations = import_violations()
    assert not violations, _report("imports against the layer direction", violations)


def test_every_exception_class_lives_in_channelkit_errors() -> None:
    violations, notes = exception_violations()
    for note in notes:
        print(note)
    assert not violations, _report("exception classes outside channelkit.errors", violations)


def _reexport(source: str) -> bool:
    return _defines_nothing_of_its_own(ast.parse(source))


def test_a_re_export_module_is_recognised() -> None:
    assert _reexport('"""Moved."""\nfrom a.b import C, d\n__all__ = ["C", "d"]\n')
    assert _reexport("from __future__ import annotations\nfrom a.b import C as C\n")
    assert not _reexport('"""Settings."""\nLIMIT = 5\n')
    assert not _reexport("from a import b\ndef helper():\n    return b\n")
    assert not _reexport("from a import b\nclass C(b):\n    pass\n")


def test_the_checks_see_the_package() -> None:
    """Guard against a vacuous pass (a wrong root finds nothing to check)."""
    assert (PACKAGE / "errors.py").is_file()
    assert sum(1 for _ in _hand_written()) > 50
    assert any(p.is_dir() for p in PLATFORMS.iterdir())


if __name__ == "__main__":  # pragma: no cover - a manual report
    if str(SDK) not in sys.path:
        sys.path.insert(0, str(SDK))
    exceptions, exception_notes = exception_violations()
    total = 0
    for title, items in (
        ("platform modules outside the room names", room_violations()),
        ("modules that only re-export", reexport_violations()),
        ("imports against the layer direction", import_violations()),
        ("exception classes outside channelkit.errors", exceptions),
    ):
        total += len(items)
        print(_report(title, items) if items else f"{title}: none")
    for note in exception_notes:
        print("note:", note)
    sys.exit(1 if total else 0)
