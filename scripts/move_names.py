"""Point every use of some names at the one module that now defines them.

    python scripts/move_names.py lmaudit.errors InputError BackendError ... \
        --from lmaudit.provenance.io lmaudit.backends.base ... [--paths src tests ...]

``--from`` lists the names' old homes. A module *serves* a name when it is an old home, or
when it imports the name from the target or from a module that serves it (a re-export). For
each Python file under ``--paths`` (default: src tests benchmarks run.py), except the target
module itself:

* ``from <serving module> import A, Name, B`` (any depth, relative imports too) loses
  ``Name``, and ``from <target> import Name`` follows it at the same indentation;
* ``<alias>.Name``, where ``<alias>`` is an imported module that serves it, becomes ``Name``;
* a name used but no longer bound in the file (its definition moved away, or the previous
  rewrite) gets ``from <target> import Name`` after the file's last top-level import;
* ``Name`` leaves the ``__all__`` of a module that is not a package's ``__init__.py``.

It only rewrites imports and references, never definitions, and running it twice changes
nothing the second time. An old import left inside a string (code a test runs in a
subprocess) is listed, to be edited by hand. Run ``ruff check --fix src tests benchmarks run.py`` and
``ruff format`` after it: they merge and sort the import lines and drop any left unused.
"""

from __future__ import annotations

import argparse
import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"


def module_file(module: str) -> Path | None:
    """The file of an lmaudit module (a package's ``__init__.py``), or None."""
    base = SRC.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def module_name(path: Path) -> str | None:
    """The dotted name of a file under src/ (None elsewhere)."""
    try:
        parts = list(path.resolve().relative_to(SRC).with_suffix("").parts)
    except ValueError:
        return None
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_of(node: ast.ImportFrom, path: Path) -> str:
    """The absolute module an ``ImportFrom`` reads from."""
    if not node.level:
        return node.module or ""
    own = module_name(path) or ""
    package = own.split(".") if path.name == "__init__.py" else own.split(".")[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def walk(tree: ast.AST) -> Iterator[ast.AST]:
    yield from ast.walk(tree)


def serves(module: str, name: str, homes: set[str], target: str, depth: int = 0) -> bool:
    """Whether ``module``'s ``name`` is the moved one (an old home, or a re-export of it)."""
    if module in homes or module == target:
        return True
    if depth > 5:
        return False
    return any(serves(source, name, homes, target, depth + 1) for source in _imported_from(module, name))


@functools.cache
def _imported_from(module: str, name: str) -> tuple[str, ...]:
    """The modules ``module`` imports ``name`` from (none when it is not an lmaudit file)."""
    path = module_file(module)
    if path is None:
        return ()
    return tuple(
        source_of(node, path)
        for node in walk(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names)
    )


def _offsets(text: str) -> list[int]:
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _alias_text(a: ast.alias) -> str:
    return a.name if a.asname is None else f"{a.name} as {a.asname}"


def rewrite(path: Path, target: str, names: set[str], homes: set[str]) -> str | None:
    """The file's new text, or None when nothing changes."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text, str(path))
    starts = _offsets(text)

    def pos(line: int, col: int) -> int:
        # ast columns are UTF-8 byte offsets
        return starts[line - 1] + len(text[starts[line - 1] :].encode("utf-8")[:col].decode("utf-8"))

    edits: list[tuple[int, int, str]] = []
    modules: dict[str, str] = {}  # local alias -> lmaudit module it names
    for node in walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("lmaudit"):
                    modules[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            source = source_of(node, path)
            if not source.startswith("lmaudit"):
                continue
            for a in node.names:
                if module_file(f"{source}.{a.name}") is not None:
                    modules[a.asname or a.name] = f"{source}.{a.name}"
            if source == target:
                continue
            moved = [a for a in node.names if a.name in names and serves(source, a.name, homes, target)]
            if not moved:
                continue
            kept = [a for a in node.names if a not in moved]
            indent = " " * node.col_offset
            new = f"from {target} import {', '.join(map(_alias_text, moved))}"
            assert node.end_lineno is not None and node.end_col_offset is not None
            start, end = pos(node.lineno, node.col_offset), pos(node.end_lineno, node.end_col_offset)
            if kept:
                dots = "." * node.level
                old = f"from {dots}{node.module or ''} import {', '.join(map(_alias_text, kept))}"
                # a trailing comment (an E402 waiver) stays on the old line and is copied to the new one
                rest = text[end : starts[node.end_lineno]].rstrip("\n")
                comment = rest[rest.index("#") :] if "#" in rest else ""
                if comment:
                    edits.append((start, end, old))
                    at = end + len(rest)
                    edits.append((at, at, f"\n{indent}{new}  {comment}"))
                    continue
                new = f"{old}\n{indent}{new}"
            edits.append((start, end, new))

    def dotted(node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return modules.get(node.id)
        if isinstance(node, ast.Attribute):
            head = dotted(node.value)
            return f"{head}.{node.attr}" if head else None
        return None

    needed: set[str] = set()
    bound: set[str] = set()
    for node in walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in names:
            owner = dotted(node.value)
            if owner and owner != target and serves(owner, node.attr, homes, target):
                assert node.end_lineno is not None and node.end_col_offset is not None
                edits.append(
                    (pos(node.lineno, node.col_offset), pos(node.end_lineno, node.end_col_offset), node.attr)
                )
                needed.add(node.attr)
        elif isinstance(node, ast.Name) and node.id in names:
            (bound if isinstance(node.ctx, ast.Store) else needed).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name in names:
            bound.add(node.name)
        elif isinstance(node, ast.alias) and (node.asname or node.name) in names:
            bound.add(node.asname or node.name)
        elif isinstance(node, ast.arg) and node.arg in names:
            bound.add(node.arg)

    if path.name != "__init__.py":
        for node in tree.body:
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
                and isinstance(node.value, ast.List | ast.Tuple)
            ):
                elts = node.value.elts
                kept_elts = [e for e in elts if not (isinstance(e, ast.Constant) and e.value in names)]
                if len(kept_elts) != len(elts):
                    body = ", ".join(ast.get_source_segment(text, e) or ast.unparse(e) for e in kept_elts)
                    new = f"[{body}]" if isinstance(node.value, ast.List) else f"({body},)"
                    v = node.value
                    assert v.end_lineno is not None and v.end_col_offset is not None
                    edits.append((pos(v.lineno, v.col_offset), pos(v.end_lineno, v.end_col_offset), new))

    missing = sorted(needed - bound)
    if missing:
        imports = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
        docstring = tree.body[:1] if ast.get_docstring(tree, clean=False) is not None else []
        after = (imports or docstring or [None])[-1]
        line = f"from {target} import {', '.join(missing)}\n"
        at = starts[after.end_lineno] if after is not None and after.end_lineno is not None else 0
        edits.append((at, at, line))

    if not edits:
        return None
    out = text
    for start, end, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        out = out[:start] + new + out[end:]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", help="the module that defines the names, e.g. lmaudit.errors")
    parser.add_argument("names", nargs="+")
    parser.add_argument("--from", dest="homes", nargs="+", required=True, help="the names' old modules")
    parser.add_argument("--paths", nargs="+", default=["src", "tests", "benchmarks", "run.py"])
    args = parser.parse_args()
    target_file = module_file(args.target)
    if target_file is None:
        raise SystemExit(f"error: {args.target} has no file under {SRC}")
    files: list[Path] = []
    for p in args.paths:
        root = ROOT / p
        files += [root] if root.is_file() else sorted(root.rglob("*.py"))
    changed = 0
    left = re.compile(
        rf"(from ({'|'.join(map(re.escape, args.homes))}) import .*\b({'|'.join(args.names)})\b)"
    )
    for f in files:
        if f.resolve() == target_file.resolve():
            continue
        new = rewrite(f, args.target, set(args.names), set(args.homes))
        if new is not None:
            f.write_text(new, encoding="utf-8")
            changed += 1
        for n, line in enumerate((new or f.read_text(encoding="utf-8")).splitlines(), 1):
            if left.search(line):  # inside a string (code run in a subprocess): not rewritten
                print(f"{f.relative_to(ROOT)}:{n}: still reads {left.search(line).group(1)!r} (in a string?)")
    print(f"{changed} files rewritten")


if __name__ == "__main__":
    main()
