"""Imports flow one way (the style guide's Shape; DESIGN §6): no import circle between
acode's modules, and nothing in a lower layer imports a higher one.

The imports are read, not run: every ``.py`` file of protocol/, broker/, actors/, acode/,
cli/, scripts/ and tests/ is parsed with :mod:`ast` and each import resolved to a module of
this tree (third-party and standard modules are left out). Nothing is imported, so the
check takes about a second. A failure prints the whole circle or the offending edge,
each import with its file and line.

What counts as an edge (decided here):

- an import at module level, and one inside a function or method: it runs later, but it
  runs, so a circle closed by a function-level import is still a circle (a deferred import
  is how a circle hides). ``try``/``except ImportError`` imports count too;
- an import under ``if TYPE_CHECKING:`` never runs and cannot close a circle; a type named
  back within one layer is the usual idiom (protocol/sessions/profiles.py and protocol/sessions/session.py,
  acode/config/loader.py and acode/config/trust.py do so). It is left out of the circle check. It **does**
  count for the layers: naming a higher layer's type is knowing that layer, and moving an
  upward import under ``TYPE_CHECKING`` must not pass;
- ``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to
  ``pkg``; the packages Python runs on the way (``pkg/__init__.py``) are not edges of
  their own; ``importlib.import_module`` and ``__import__`` are not followed;
- a file of scripts/ is the module ``scripts.<name>``; a bare ``import <name>`` of one
  (a script, or a test that put scripts/ on ``sys.path``) resolves to it.

The layers, bottom to top, are :data:`LAYERS`; a module imports its own layer or one below
(two layers of one rank, like the sandbox and persistence, are independent: neither
imports the other). Every module must fall in a layer, so a new package is placed on
purpose.
"""

from __future__ import annotations

import ast
import functools
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("protocol", "broker", "actors", "acode", "cli", "tests")  # and scripts/, a folder of scripts
# The example project `acode init` copies is the user's code (it imports its own `greet`).
SKIPPED = ("cli/example/",)

# Bottom to top. Each rank is a list of layers (name, module patterns); a layer may import
# its own modules and those of a lower rank only.
# DESIGN §6 and the list agree on the chain protocol -> broker -> actors/llm ->
# sandbox, persistence -> stages -> coordinator -> cli; the tree adds two facts:
# - actors' own top-level modules (_base: the run loop; lean, logs, logrotate, private, paths, spawn)
#   are the plumbing of every acode process, the broker's too (broker/__main__.py runs it on
#   actors._base's loop, with actors.lean's logging); they import only protocol, so they sit
#   between protocol and broker, not above the broker with the actors' packages;
# - acode/, the public Python client, is below cli/: DESIGN §6 puts the CLI "on top of the
#   client" (the package does not exist yet; its place is kept).
# A pattern ``pkg.*`` is the package and everything in it; a plain name, that module alone.
LAYERS: list[list[tuple[str, tuple[str, ...]]]] = [
    [("protocol", ("protocol.*",))],
    [("actors' process plumbing", ("actors", "actors._base", "actors.lean", "actors.logs", "actors.logrotate",
                                   "actors.private",
                                   "actors.paths", "actors.spawn", "actors.mcpkept"))],
    [("broker", ("broker.*",))],
    # the user's hooks (actors/hooks.py) are run by the stages and the coordinator
    [("actors/llm", ("actors.llm.*",)), ("actors/hooks", ("actors.hooks",))],
    [("actors/sandbox", ("actors.sandbox.*",)), ("actors/persistence", ("actors.persistence.*",))],
    # the mcp actor starts stdio servers through the sandbox's launcher and isolation; inside
    # the sandbox and the stages, rooms import one way too (tests/actors/{sandbox,stages}/test_rooms.py)
    [("actors/stages", ("actors.stages.*",)), ("actors/mcp", ("actors.mcp.*",))],
    [("actors/coordinator", ("actors.coordinator.*",))],
    [("acode (the public client)", ("acode.*",))],
    [("cli", ("cli.*",))],
    [("scripts and tests", ("scripts.*", "tests.*"))],  # they may import anything
]


@dataclass(frozen=True)
class Edge:
    source: str  # importing module
    target: str  # imported module
    path: str  # the importing file, relative to the root
    line: int
    type_only: bool  # under `if TYPE_CHECKING:`

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} ({self.path}:{self.line}{', TYPE_CHECKING' if self.type_only else ''})"


def modules(root: Path) -> dict[str, Path]:
    """Every module of the tree, by its dotted name (a package by its folder's)."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root)
            if relative.as_posix().startswith(SKIPPED):
                continue
            parts = relative.with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    for path in sorted((root / "scripts").glob("*.py")):
        found[f"scripts.{path.stem}"] = path
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")  # where a statement holds statements


def _imports(tree: ast.Module) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement of a file, at any depth (in a function, a class, a ``try``),
    with whether it is type-only. Only statements are walked: an import is one."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []
    stack: list[tuple[ast.AST, bool]] = [(statement, False) for statement in tree.body]
    while stack:
        node, type_only = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append((node, type_only))
            continue
        for field in _BLOCKS:
            inner = type_only or (field == "body" and isinstance(node, ast.If) and _type_checking(node.test))
            stack += [(child, inner) for child in getattr(node, field, ())]
    return found


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The module of this tree that ``import name`` loads last, if any."""
    if f"scripts.{name}" in known:  # a script imported by bare name (scripts/ on sys.path)
        return f"scripts.{name}"
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known:
            return candidate
    return None


@functools.cache
def edges(root: Path) -> list[Edge]:
    """Every import from one module of the tree to another (read once per run)."""
    known = modules(root)
    found: list[Edge] = []
    for source, path in known.items():
        relative = path.relative_to(root).as_posix()
        package = source.split(".") if path.name == "__init__.py" else source.split(".")[:-1]
        for node, type_only in _imports(ast.parse(path.read_text(), relative)):
            names: list[str]
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package[:len(package) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                names = []
                for alias in node.names:
                    full = f"{base}.{alias.name}" if base else alias.name
                    names.append(full if _resolve(full, known) == full or f"scripts.{full}" in known else base)
            for name in names:
                target = _resolve(name, known)
                if target is not None and target != source:
                    found.append(Edge(source, target, relative, node.lineno, type_only))
    return found


def circles(found: list[Edge]) -> list[tuple[list[str], list[Edge]]]:
    """Each group of modules tied by a circle (a strongly connected component: Tarjan's
    algorithm), with one shortest circle through its first module (breadth-first)."""
    graph: dict[str, dict[str, Edge]] = {}
    for edge in found:
        if not edge.type_only:
            graph.setdefault(edge.source, {}).setdefault(edge.target, edge)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: list[str] = []
    groups: list[list[str]] = []

    def connect(start: str) -> None:  # iterative Tarjan: the import graph is deep
        work = [(start, iter(graph.get(start, {})))]
        index[start] = low[start] = len(index)
        on_stack.append(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    on_stack.append(child)
                    work.append((child, iter(graph.get(child, {}))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = on_stack.pop()
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    found_circles = []
    for group in sorted(groups):
        members, first = set(group), group[0]
        came_by: dict[str, Edge] = {}
        queue = deque([first])
        while queue:
            node = queue.popleft()
            for child, edge in sorted(graph.get(node, {}).items()):
                if child in members and child not in came_by:
                    came_by[child] = edge
                    queue.append(child)
        chain, node = [], first
        while True:
            edge = came_by[node]
            chain.append(edge)
            node = edge.source
            if node == first:
                break
        found_circles.append((group, chain[::-1]))
    return found_circles


def layer_of(module: str) -> tuple[int, str] | None:
    """The rank and name of the module's layer, None if no pattern of :data:`LAYERS` names it."""
    for rank, layers in enumerate(LAYERS):
        for name, patterns in layers:
            for pattern in patterns:
                package = pattern.removesuffix(".*")
                if module == package or (pattern.endswith(".*") and module.startswith(package + ".")):
                    return rank, name
    return None


def upward(found: list[Edge]) -> list[str]:
    """Each import that reaches a higher layer (or a peer of the same rank), said in full."""
    problems = []
    for edge in found:
        source, target = layer_of(edge.source), layer_of(edge.target)
        if source is None or target is None:
            continue  # test_every_module_is_in_a_layer... names it
        if source[1] != target[1] and target[0] >= source[0]:
            problems.append(f"{edge}: {source[1]} (rank {source[0]}) must not import {target[1]} "
                            f"(rank {target[0]}); move what it needs down, or ask for it as a parameter")
    return problems


def shown(group: list[str], chain: list[Edge]) -> str:
    return (f"import circle among {', '.join(group)}: "
            + " -> ".join([chain[0].source, *(edge.target for edge in chain)]) + "\n"
            + "\n".join(f"    {edge}" for edge in chain))


def test_no_import_circle_between_acode_modules() -> None:
    found = [shown(group, chain) for group, chain in circles(edges(ROOT))]
    if found:
        pytest.fail("\n".join(found), pytrace=False)


def test_no_module_imports_a_higher_layer() -> None:
    problems = upward(edges(ROOT))
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def test_every_module_is_in_a_layer_and_the_reader_sees_the_whole_tree() -> None:
    known = modules(ROOT)
    assert sorted(name for name in known if layer_of(name) is None) == []
    found = edges(ROOT)
    # the reader is not blind: the imports it must see are seen, of every kind
    assert {name.split(".")[0] for name in known} >= {"protocol", "broker", "actors", "acode", "cli", "scripts",
                                                       "tests"}
    assert len(found) > 1000
    seen = {(e.source, e.target, e.type_only) for e in found}
    assert ("broker.__main__", "actors._base", False) in seen
    assert ("acode.stream", "broker.wire", False) in seen  # inside a function
    assert ("protocol.sessions.profiles", "protocol.sessions.session", True) in seen  # under TYPE_CHECKING
    assert ("scripts.bench_tasks", "scripts.task_set", False) in seen  # a script by bare name
    assert ("scripts.bench_local", "tests.modelserver", False) in seen


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_planted_circle_is_shown_whole_even_when_a_function_import_closes_it(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "cli/__init__.py": "",
        "cli/a.py": "from cli import b\n",
        "cli/b.py": "import cli.c\n",
        "cli/c.py": "def late():\n    from cli.a import thing\n",
        "cli/d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cli.e import T\n",
        "cli/e.py": "from cli.d import U\n",  # closed only by a type: not a circle
    })
    assert [shown(group, chain) for group, chain in circles(edges(root))] == [
        "import circle among cli.a, cli.b, cli.c: cli.a -> cli.b -> cli.c -> cli.a\n"
        "    cli.a -> cli.b (cli/a.py:1)\n    cli.b -> cli.c (cli/b.py:1)\n    cli.c -> cli.a (cli/c.py:2)"]


def test_a_planted_upward_import_is_named_with_its_layers_even_under_type_checking(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "actors/llm/__init__.py": "",
        "actors/llm/recorded.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                  "    from actors.stages.request.callwatch import CallWatch\n",
        "actors/stages/__init__.py": "",
        "actors/stages/request/__init__.py": "",
        "actors/stages/request/callwatch.py": "from actors.llm import recorded\n",  # downward: fine
        "actors/sandbox/__init__.py": "from actors.persistence import store\n",  # a peer of its rank
        "actors/persistence/store.py": "",
    })
    assert upward(edges(root)) == [
        "actors.llm.recorded -> actors.stages.request.callwatch (actors/llm/recorded.py:3, TYPE_CHECKING): actors/llm "
        "(rank 3) must not import actors/stages (rank 5); move what it needs down, or ask for it as a parameter",
        "actors.sandbox -> actors.persistence.store (actors/sandbox/__init__.py:1): actors/sandbox (rank 4) must "
        "not import actors/persistence (rank 4); move what it needs down, or ask for it as a parameter"]
