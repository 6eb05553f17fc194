"""Nothing in ``sdk/channelkit`` imports in a circle.

The import graph is built from the AST of every module of the package, the generated
clients included:

* every import statement counts wherever it sits: module level, inside a function or a
  method (a lazy import), under ``if TYPE_CHECKING:``, relative or absolute, and so does
  ``importlib.import_module(...)`` / ``__import__(...)`` with a literal module name (a
  computed name cannot be read statically);
* ``import a.b.c`` and ``from a.b.c import name`` are an edge to ``a.b.c``; ``from a.b
  import c`` where ``a/b/c.py`` (or ``a/b/c/__init__.py``) exists is an edge to the
  submodule ``a.b.c`` (the name *is* that module), otherwise an edge to ``a.b`` (the name
  comes from the package's ``__init__``);
* a package is the node of its ``__init__.py``. Importing ``a.b.c`` also initializes the
  packages ``a`` and ``a.b`` first; that implicit initialization is the import system's,
  not the importing module's, and is *not* an edge. So a package ``__init__`` that
  re-exports its own submodules (``from a.b.c import Thing``) is the package's own
  business and forms no cycle by itself. It does form one as soon as anything it loads
  reaches back into the package's front door: a submodule ``a.b.c`` that imports
  ``from a.b import Other`` depends on the ``__init__`` that depends on it, and that is
  reported like any other cycle (import ``Other`` from its home module instead);
* an edge to a module outside ``channelkit`` is ignored; an edge to a missing
  ``channelkit`` module is kept (it names the module that would be imported).

The strongly connected components of that graph (Tarjan) with more than one module are
the cycles. Each is reported as readable paths through every module of the component,
``a:12 -> b:30 -> a``, where the number after a module is the line of the import
statement in that module that leads to the next one.

Run directly (``python tests/test_no_import_cycles.py``) to print every cycle.
"""

from __future__ import annotations

import ast
import functools
import itertools
import os
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE_NAME = "channelkit"


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
SDK = ROOT / "sdk"


# -- the modules ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Module:
    name: str  # dotted, a package by its own name
    path: Path
    is_package: bool


def _modules(sdk: Path = SDK) -> dict[str, Module]:
    """Every module under ``sdk/channelkit`` by dotted name."""
    found: dict[str, Module] = {}
    for path in sorted((sdk / PACKAGE_NAME).rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(sdk).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        name = ".".join(parts)
        found[name] = Module(name, path, is_package)
    return found


def _inside(name: str) -> bool:
    return name == PACKAGE_NAME or name.startswith(PACKAGE_NAME + ".")


# -- the edges --------------------------------------------------------------------------------


def _resolve_relative(module: Module, level: int, target: str | None) -> str:
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    parts = package.split(".")
    base = ".".join(parts[: len(parts) - (level - 1)])
    return f"{base}.{target}" if target else base


def _literal_import_call(node: ast.Call) -> str | None:
    """The module name of ``importlib.import_module("x")`` / ``__import__("x")``."""
    func = node.func
    name = (
        func.attr
        if isinstance(func, ast.Attribute)
        else func.id
        if isinstance(func, ast.Name)
        else ""
    )
    if name not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return None


def imports_of(module: Module, tree: ast.AST, known: set[str]) -> Iterator[tuple[int, str]]:
    """``(line, module)`` for every import in ``tree``, at any depth, per the rules in the
    module docstring (only targets inside ``channelkit``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _inside(alias.name):
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _resolve_relative(module, node.level, node.module)
            else:
                base = node.module or ""
            if not _inside(base):
                continue
            takes_from_base = False
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if alias.name != "*" and submodule in known:
                    yield node.lineno, submodule
                else:
                    takes_from_base = True
            if takes_from_base:
                yield node.lineno, base
        elif isinstance(node, ast.Call):
            name = _literal_import_call(node)
            if name is not None and _inside(name):
                yield node.lineno, name


Graph = dict[str, dict[str, int]]  # module -> imported module -> first line


def import_graph(sdk: Path = SDK) -> tuple[Graph, dict[str, Module]]:
    """The import graph of the package (self edges dropped) and its modules."""
    modules = _modules(sdk)
    known = set(modules)
    graph: Graph = {name: {} for name in modules}
    for name, module in modules.items():
        tree = ast.parse(module.path.read_text(encoding="utf-8"), filename=str(module.path))
        edges = graph[name]
        for line, target in imports_of(module, tree, known):
            if target != name and (target not in edges or line < edges[target]):
                edges[target] = line
    return graph, modules


# -- the cycles -------------------------------------------------------------------------------


def strongly_connected(graph: Graph) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative), each sorted, components with
    more than one module only, in a stable order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph.get(root, {}))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in graph:
                    continue  # a missing module: no edges out of it
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return sorted(components)


def _shortest_cycle(graph: Graph, start: str, members: set[str]) -> list[str]:
    """The shortest path ``start -> ... -> start`` inside ``members`` (BFS)."""
    previous: dict[str, str] = {}
    queue = deque([start])
    seen = {start}
    while queue:
        node = queue.popleft()
        for child in sorted(graph[node]):
            if child not in members:
                continue
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [*reversed(path), start]
            if child not in seen:
                seen.add(child)
                previous[child] = node
                queue.append(child)
    raise AssertionError(f"{start} is in a component but on no cycle")  # pragma: no cover


def cycles(graph: Graph) -> list[list[str]]:
    """For every component, shortest cycles until every member lies on one shown."""
    found: list[list[str]] = []
    for component in strongly_connected(graph):
        members = set(component)
        covered: set[str] = set()
        for module in component:
            if module in covered:
                continue
            cycle = _shortest_cycle(graph, module, members)[:-1]
            covered.update(cycle)
            first = cycle.index(min(cycle))  # start at the smallest name: stable output
            cycle = cycle[first:] + cycle[:first]
            found.append([*cycle, cycle[0]])
    return found


def describe(cycle: list[str], graph: Graph) -> str:
    """``a:12 -> b:30 -> a``: each module with the line of its import of the next one."""
    steps = [f"{a}:{graph[a][b]}" for a, b in itertools.pairwise(cycle)]
    return " -> ".join([*steps, cycle[-1]])


@functools.cache
def _package_graph() -> tuple[Graph, dict[str, Module]]:
    """The package's import graph, built once for the tests that only read it."""
    return import_graph(SDK)


def cycle_report(sdk: Path = SDK) -> list[str]:
    graph, _modules_ = _package_graph() if sdk == SDK else import_graph(sdk)
    return [describe(cycle, graph) for cycle in cycles(graph)]


# -- the tests --------------------------------------------------------------------------------


def test_nothing_in_the_package_imports_in_a_circle() -> None:
    found = cycle_report()
    assert not found, f"import cycles ({len(found)}):\n  " + "\n  ".join(found)


def test_the_graph_sees_the_package() -> None:
    """Guard against a vacuous pass: the graph holds the package, the generated clients
    and known edges of every kind."""
    graph, modules = _package_graph()
    assert len(modules) > 100
    assert "channelkit.clients.dingtalk" in modules  # generated code is in the graph
    assert "channelkit.core.runs" in graph["channelkit.core.channel"]  # module level
    assert "channelkit.agents.acp.rpc" in graph["channelkit.agents.acp.bridge"]
    assert sum(len(edges) for edges in graph.values()) > 300


def _write(tmp: Path, files: dict[str, str]) -> Path:
    for relative, source in files.items():
        path = tmp / "sdk" / PACKAGE_NAME / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
    return tmp / "sdk"


def test_every_kind_of_import_makes_an_edge(tmp_path: Path) -> None:
    sdk = _write(
        tmp_path,
        {
            "__init__.py": "",
            "pkg/__init__.py": "from channelkit.pkg.leaf import Leaf\n",
            "pkg/leaf.py": "class Leaf: ...\n",
            "pkg/top.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from channelkit.pkg.typed import T\n"
                "def f():\n"
                "    from . import lazy\n"
                "    import importlib\n"
                "    importlib.import_module('channelkit.pkg.dynamic')\n"
                "from channelkit.pkg import Leaf\n"
                "import os\n"
            ),
            "pkg/typed.py": "",
            "pkg/lazy.py": "",
            "pkg/dynamic.py": "",
        },
    )
    graph, _ = import_graph(sdk)
    assert graph["channelkit.pkg.top"] == {
        "channelkit.pkg.typed": 3,
        "channelkit.pkg.lazy": 5,
        "channelkit.pkg.dynamic": 7,
        "channelkit.pkg": 8,
    }
    assert graph["channelkit.pkg"] == {"channelkit.pkg.leaf": 1}


def test_a_cycle_is_reported_as_a_path_with_lines(tmp_path: Path) -> None:
    sdk = _write(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "import os\nfrom channelkit import b\n",
            "b.py": "def f():\n    from channelkit.c import x\n",
            "c.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    import channelkit.a\n"
            ),
            "d.py": "from channelkit.a import y\n",
        },
    )
    assert cycle_report(sdk) == [
        "channelkit.a:2 -> channelkit.b:2 -> channelkit.c:3 -> channelkit.a"
    ]


def test_a_package_reexporting_its_submodules_is_no_cycle_until_one_uses_the_front_door(
    tmp_path: Path,
) -> None:
    files = {
        "__init__.py": "",
        "pkg/__init__.py": (
            "from channelkit.pkg.one import One\nfrom channelkit.pkg.two import Two\n"
        ),
        "pkg/one.py": "from channelkit.pkg.two import Two\n",
        "pkg/two.py": "class Two: ...\n",
    }
    assert cycle_report(_write(tmp_path / "clean", files)) == []
    files["pkg/two.py"] = "def f():\n    from channelkit.pkg import One\n"
    assert cycle_report(_write(tmp_path / "front_door", files)) == [
        "channelkit.pkg:2 -> channelkit.pkg.two:2 -> channelkit.pkg",
        "channelkit.pkg:1 -> channelkit.pkg.one:1 -> channelkit.pkg.two:2 -> channelkit.pkg",
    ]


def test_every_module_of_a_component_is_shown_on_a_cycle(tmp_path: Path) -> None:
    sdk = _write(
        tmp_path,
        {
            "__init__.py": "",
            "hub.py": "import channelkit.x\nimport channelkit.y\n",
            "x.py": "import channelkit.hub\n",
            "y.py": "import channelkit.hub\n",
        },
    )
    assert cycle_report(sdk) == [
        "channelkit.hub:1 -> channelkit.x:1 -> channelkit.hub",
        "channelkit.hub:2 -> channelkit.y:1 -> channelkit.hub",
    ]


if __name__ == "__main__":  # pragma: no cover - a manual report
    report = cycle_report()
    print(f"{len(report)} cycle(s)")
    for line in report:
        print(" ", line)
