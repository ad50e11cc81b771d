"""No two lmaudit modules import each other, directly or around a loop, wherever the import is.

The graph is read statically (``ast``): an edge for every ``import`` of an lmaudit module
anywhere in its module: module level, class bodies, ``if``/``try`` blocks (the
``TYPE_CHECKING`` ones included) and inside functions, since an import deferred into a function
still ties the two modules together; it only hides the loop from Python. ``from p import n``
points at ``p.n`` when that is a module, else at ``p``.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``root``, by dotted name (a package by its own name)."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The known modules ``name`` imports, at module level or inside a function."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def resolve(target: str) -> str | None:
        while target and target not in known:
            target = target.rpartition(".")[0]
        return target if target and target != name else None

    found: set[str | None] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {resolve(a.name) for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            for a in node.names:
                full = f"{source}.{a.name}"
                found.add(resolve(full if full in known else source))
    return {m for m in found if m is not None}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    known = modules(root, package)
    return {name: imports_of(name, path, known) for name, path in known.items()}


def test_lmaudit_has_no_import_cycles() -> None:
    graph = import_graph(SRC, "lmaudit")
    assert len(graph) > 100 and "lmaudit.backends.registry" in graph  # the whole package was read
    found = cycles(graph)
    described = [
        " <-> ".join(c) + ": " + "; ".join(f"{m} imports {sorted(graph[m] & set(c))}" for m in c)
        for c in found
    ]
    assert not found, "import cycles among lmaudit's modules:\n" + "\n".join(described)


def test_the_finder_sees_type_checking_relative_and_function_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "toy"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from toy.sub import a\n")
    (pkg / "sub" / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n"
    )
    (pkg / "sub" / "b.py").write_text("from toy.sub.a import x\nclass B: ...\n")
    (pkg / "c.py").write_text("def f():\n    from toy import d\n")
    (pkg / "d.py").write_text("import toy.c\n")
    (pkg / "e.py").write_text("class E:\n    async def g(self):\n        from . import c\n")
    graph = import_graph(tmp_path, "toy")
    assert graph["toy.sub"] == {"toy.sub.a"} and graph["toy.sub.a"] == {"toy.sub.b"}
    assert graph["toy.c"] == {"toy.d"} and graph["toy.d"] == {"toy.c"} and graph["toy.e"] == {"toy.c"}
    assert cycles(graph) == [["toy.c", "toy.d"], ["toy.sub.a", "toy.sub.b"]]
