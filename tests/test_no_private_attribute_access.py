"""Nothing in ``sdk/channelkit`` reaches into another module's private attributes.

A *private attribute access* is ``expr._name`` (load, store or delete) where ``_name``
starts with an underscore and is not a dunder (``__name__``). It is allowed only

* on ``self``, ``cls`` or ``super()`` (an object's own attributes), or
* when ``_name`` is defined in the same module: an attribute of a class of that module
  (a class-body name or method, a ``__slots__`` entry, or ``self._name = ...`` /
  ``cls._name = ...`` in one of its methods), or a module-private function, class or
  global of that module. A module is its own unit of privacy: a class may touch the
  private state of another class it defines beside it, never one defined elsewhere.

The only other names let through are the few the standard library documents as public
despite their underscore (:data:`STDLIB_PUBLIC`).

Importing another module's private name (``from a.b import _helper``) and reaching it by
reflection with a literal name (``getattr(obj, "_x")``, ``setattr``, ``hasattr``,
``delattr``) are the same reach and are reported too (an alias such as
``import_module as _im`` of a public name is not).

Everything else is a reach into another module's internals: use a public (or documented
internal) method of the object, or hand the code the narrow collaborator it needs.
Every module of the package counts, the generated clients included; the tests of the
suite are out of scope.

Each access is reported as ``path:line: expr._name``. Run directly
(``python tests/test_no_private_attribute_access.py``) to print every one.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from pathlib import Path

PACKAGE_NAME = "channelkit"
OWN_RECEIVERS = frozenset({"self", "cls"})
#: Names the Python standard library documents as public although they start with an
#: underscore (``os._exit``: exit at once, without cleanup). Not a list of exemptions:
#: nothing of channelkit's own may be added here.
STDLIB_PUBLIC = frozenset({"os._exit"})


def _find_root() -> Path:
    """The repository root: ``$CHANNELKIT_ROOT``, else the first ancestor of this file (or
    of the working directory) holding ``sdk/channelkit``."""
    env = os.environ.get("CHANNELKIT_ROOT")
    if env:
        return Path(env).resolve()
    for start in (Path(__file__).resolve().parent, Path.cwd().resolve()):
        for candidate in (start, *start.parents):
            if (candidate / "sdk" / PACKAGE_NAME / "__init__.py").is_file():
                return candidate
    raise RuntimeError("no sdk/channelkit above this file or the working directory")


ROOT = _find_root()
PACKAGE = ROOT / "sdk" / PACKAGE_NAME


def is_private(name: str) -> bool:
    """``_x`` and ``__x`` are private; ``__x__`` is not."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


# -- what a module defines ------------------------------------------------------------------


def _target_names(target: ast.expr) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _target_names(element)
    elif isinstance(target, ast.Starred):
        yield from _target_names(target.value)


def _assigned(node: ast.stmt) -> Iterator[str]:
    """Names a statement binds directly (assignments, defs, classes)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        yield node.name
    elif isinstance(node, ast.Assign):
        for target in node.targets:
            yield from _target_names(target)
    elif isinstance(node, ast.AnnAssign | ast.AugAssign):
        yield from _target_names(node.target)


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements of a body, looking through ``if`` / ``try`` / ``with`` blocks (not into
    functions or classes)."""
    for node in body:
        yield node
        if isinstance(node, ast.If | ast.Try | ast.With | ast.For | ast.While):
            for field in ("body", "orelse", "finalbody"):
                yield from _statements(getattr(node, field, []) or [])
            for handler in getattr(node, "handlers", []) or []:
                yield from _statements(handler.body)


def _class_attributes(cls: ast.ClassDef) -> Iterator[str]:
    for node in _statements(cls.body):
        yield from _assigned(node)
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets
        ):
            for element in ast.walk(node.value):
                if isinstance(element, ast.Constant) and isinstance(element.value, str):
                    yield element.value
    for node in ast.walk(cls):
        # self._x = ... / cls._x = ... (also annotated, augmented, tuple targets)
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        for target in targets:
            for element in ast.walk(target):
                if (
                    isinstance(element, ast.Attribute)
                    and isinstance(element.value, ast.Name)
                    and element.value.id in OWN_RECEIVERS
                ):
                    yield element.attr


def defined_private_names(tree: ast.Module) -> set[str]:
    """Private names the module defines: its classes' attributes and its own globals."""
    names: set[str] = set()
    for node in _statements(tree.body):
        names.update(_assigned(node))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            names.update(_class_attributes(node))
    return {name for name in names if is_private(name)}


# -- the accesses ---------------------------------------------------------------------------


def _own_receiver(value: ast.expr) -> bool:
    if isinstance(value, ast.Name):
        return value.id in OWN_RECEIVERS
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "super"
    )


REFLECTION = frozenset({"getattr", "setattr", "hasattr", "delattr"})


def _reflective_access(node: ast.AST) -> tuple[ast.expr, str] | None:
    """``(receiver, name)`` of ``getattr(receiver, "_name", ...)`` and its siblings."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in REFLECTION
        and len(node.args) >= 2
    ):
        return None
    name = node.args[1]
    if isinstance(name, ast.Constant) and isinstance(name.value, str) and is_private(name.value):
        return node.args[0], name.value
    return None


def private_accesses(source: str, filename: str = "<module>") -> list[tuple[int, str]]:
    """``(line, "expr._name")`` of every disallowed access in ``source``."""
    tree = ast.parse(source, filename=filename)
    own = defined_private_names(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            for alias in node.names:
                if is_private(alias.name):
                    found.append((node.lineno, f"from {module} import {alias.name}"))
            continue
        reflective = _reflective_access(node)
        if reflective is not None:
            receiver, name = reflective
            if not _own_receiver(receiver) and name not in own:
                found.append((node.lineno, f"{ast.unparse(node)}"))
            continue
        if not isinstance(node, ast.Attribute) or not is_private(node.attr):
            continue
        if _own_receiver(node.value) or node.attr in own:
            continue
        access = f"{ast.unparse(node.value)}.{node.attr}"
        if access not in STDLIB_PUBLIC:
            found.append((node.lineno, access))
    return sorted(found)


def violations(package: Path = PACKAGE) -> list[str]:
    found: list[str] = []
    for path in sorted(package.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        relative = path.relative_to(package.parent.parent).as_posix()
        source = path.read_text(encoding="utf-8")
        for line, access in private_accesses(source, str(path)):
            found.append(f"{relative}:{line}: {access}")
    return found


# -- the tests ------------------------------------------------------------------------------


def test_no_module_touches_another_modules_private_attributes() -> None:
    found = violations()
    assert not found, f"private attribute accesses ({len(found)}):\n  " + "\n  ".join(found)


def test_the_check_sees_the_package() -> None:
    """Guard against a vacuous pass: the package (generated clients included) is there,
    and the module scan finds the channel's own private state."""
    paths = [p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts]
    assert len(paths) > 100
    assert any(p.relative_to(PACKAGE).parts[0] == "clients" for p in paths)
    channel = (PACKAGE / "core" / "channel.py").read_text(encoding="utf-8")
    assert {"_bridge", "_requests", "_check_open"} <= defined_private_names(ast.parse(channel))


def test_reaching_into_another_object_is_found() -> None:
    source = (
        "def f(channel, run):\n"
        "    with channel._lock:\n"
        "        channel._active[run.session_id] = run\n"
        "    del run._cache\n"
        "    from channelkit.core.text import _label, sanitize_text as _clean\n"
        "    getattr(run, '_state', None), getattr(run, name), hasattr(self, '_own')\n"
        "    return channel.public, channel.__class__\n"
    )
    assert private_accesses(source) == [
        (2, "channel._lock"),
        (3, "channel._active"),
        (4, "run._cache"),
        (5, "from channelkit.core.text import _label"),
        (6, "getattr(run, '_state', None)"),
    ]


def test_own_attributes_and_same_module_privates_are_allowed() -> None:
    source = (
        "import other\n"
        "_REGISTRY = {}\n"
        "def _helper(): ...\n"
        "class Box:\n"
        "    __slots__ = ('_slot',)\n"
        "    _flag = False\n"
        "    def __init__(self):\n"
        "        self._value = 1\n"
        "    def _method(self): ...\n"
        "    @classmethod\n"
        "    def make(cls):\n"
        "        cls._made = True\n"
        "        return super()._hidden\n"
        "class Friend:\n"
        "    def peek(self, box, module):\n"
        "        box._value, box._slot, box._flag, box._made, box._method()\n"
        "        module._helper(), module._REGISTRY\n"
        "        return other._secret, os._exit\n"
    )
    assert private_accesses(source) == [(18, "other._secret")]


if __name__ == "__main__":  # pragma: no cover - a manual report
    report = violations()
    print(f"{len(report)} private attribute access(es)")
    for entry in report:
        print(" ", entry)
