"""No import circles among the project's modules.

The graph is read from the source with ``ast`` (nothing is imported): every module of
``t2t_lite/``, ``problems/`` (as ``t2t_lite.problems``), ``hparams/`` (as
``t2t_lite.hparams``) and ``scripts/`` (top-level modules, as ``python scripts/NAME.py``
imports its neighbours). An edge is an ``import`` anywhere in a module, at module level or
inside a function or class; ``from x import y`` leads to the module ``x.y`` when that is a
module, else to ``x``; relative imports are resolved against the importing module's
package. Imports under ``if TYPE_CHECKING:`` never run and are not edges. The test fails
naming every strongly connected component of the graph (every set of modules that import
each other, directly or round a circle) with one circle through it.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Set, Tuple

ROOT = Path(__file__).resolve().parent.parent
# (folder, the module name it is imported as; "" for top-level modules)
PROJECT_FOLDERS = (("t2t_lite", "t2t_lite"), ("problems", "t2t_lite.problems"),
                   ("hparams", "t2t_lite.hparams"), ("scripts", ""))


# The graph ------------------------------------------------------------------------------
def module_files(folders: Iterable[Tuple[Path, str]]) -> Dict[str, Tuple[Path, bool]]:
    """{module name: (source file, is a package)} of every ``.py`` file under the folders;
    ``__init__.py`` is its package. A folder named with "" holds top-level modules."""
    modules = {}
    for folder, name in folders:
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            dotted = ".".join(([name] if name else []) + parts)
            if dotted:
                modules[dotted] = (path, is_package)
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _import_nodes(tree: ast.AST):
    """Every Import/ImportFrom node of ``tree`` that can run (not under TYPE_CHECKING)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def imports_of(name: str, path: Path, is_package: bool, known: Mapping) -> Set[str]:
    """The project modules that module ``name`` (its source at ``path``) imports."""
    package = name if is_package else name.rpartition(".")[0]
    targets: Set[str] = set()
    for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".") if package else []
            anchor = anchor[:len(anchor) - (node.level - 1)]
            base = ".".join(anchor + ([base] if base else []))
        for alias in node.names:
            submodule = f"{base}.{alias.name}" if base else alias.name
            targets.add(submodule if submodule in known else base)
    return {target for target in targets if target in known and target != name}


def import_graph(modules: Mapping[str, Tuple[Path, bool]]) -> Dict[str, Set[str]]:
    return {name: imports_of(name, path, is_package, modules)
            for name, (path, is_package) in modules.items()}


# Circles --------------------------------------------------------------------------------
def strongly_connected(graph: Mapping[str, Set[str]]) -> List[List[str]]:
    """The components of more than one module (Tarjan's algorithm, iterative), sorted."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    components = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return sorted(components)


def one_circle(graph: Mapping[str, Set[str]], component: List[str]) -> List[str]:
    """A shortest circle through the component's first module: [a, b, ..., a]."""
    start, members = component[0], set(component)
    previous: Dict[str, Optional[str]] = {start: None}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    path = [node]
                    while previous[path[-1]] is not None:
                        path.append(previous[path[-1]])
                    return list(reversed(path)) + [start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"{component} is not a circle")


def circles_report(graph: Mapping[str, Set[str]]) -> List[str]:
    """One line per component: its modules, and one circle through them."""
    return [f"{len(component)} modules import each other: {', '.join(component)} "
            f"(e.g. {' -> '.join(one_circle(graph, component))})"
            for component in strongly_connected(graph)]


# Tests ----------------------------------------------------------------------------------
def project_graph() -> Dict[str, Set[str]]:
    return import_graph(module_files((ROOT / folder, name)
                                     for folder, name in PROJECT_FOLDERS))


def test_the_project_has_no_import_circles():
    circles = circles_report(project_graph())
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_the_graph_holds_every_kind_of_import():
    """Module-level, function-level, ``from`` and mapped-folder imports are all read."""
    graph = project_graph()
    assert "t2t_lite.problems.parsing" in graph
    assert "t2t_lite.hparams" in graph and "benchmark" in graph
    assert "t2t_lite.errors" in graph["t2t_lite.commands.common"]
    # t2t_lite.data.problem imports vocab only inside its methods
    assert "t2t_lite.data.vocab" in graph["t2t_lite.data.problem"]


def _write(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_circle_hidden_in_functions_and_relative_imports_is_found(tmp_path):
    _write(tmp_path / "pkg", {
        "__init__.py": "",
        "a.py": "def f():\n    from . import b\n",                 # function-level, relative
        "b.py": "from pkg.sub import c\n",                          # from x import module
        "sub/__init__.py": "",
        "sub/c.py": "import pkg.a\n",
        "sub/d.py": "from ..a import f\nfrom typing import TYPE_CHECKING\n"
                    "if TYPE_CHECKING:\n    from pkg.sub import e\n",
        "sub/e.py": "from .d import *\n",                           # e -> d only
        "lone.py": "import os\nfrom pkg import a\n",
    })
    _write(tmp_path / "scripts", {"tool.py": "import helper\n", "helper.py": "import tool\n"})
    graph = import_graph(module_files([(tmp_path / "pkg", "pkg"), (tmp_path / "scripts", "")]))
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.sub.c"}
    assert graph["pkg.sub.d"] == {"pkg.a"}        # the TYPE_CHECKING import never runs
    assert graph["pkg.sub.e"] == {"pkg.sub.d"}
    assert circles_report(graph) == [
        "2 modules import each other: helper, tool (e.g. helper -> tool -> helper)",
        "3 modules import each other: pkg.a, pkg.b, pkg.sub.c "
        "(e.g. pkg.a -> pkg.b -> pkg.sub.c -> pkg.a)"]


def test_a_graph_without_circles_reports_none():
    assert circles_report({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []
