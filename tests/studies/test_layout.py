"""Every study lays its files out the same way, and no study reaches into another.

Read statically (``ast``), so the checks see every module whether or not a test imports it:

- the same files in the same places in every built-in study (the table in docs/architecture.md);
- ``study.py`` holds the Study class and nothing else that runs (no module-level functions);
- no Study class rebinds a module function as a hook (``headline = staticmethod(headline)``);
- no module of a study imports another study, wherever the import stands;
- no module of a study passes 400 lines;
- no prefix family (three or more modules named ``<prefix>_*``, anywhere in lmaudit) where a
  subpackage belongs;
- imports point one way: planning, measure, analysis, views, report, study.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
STUDIES = SRC / "lmaudit" / "studies"
NAMES = ("qq", "judge", "choir", "draws")
#: the layout every study shares: what each file holds is in docs/architecture.md
LAYOUT = (
    "__init__.py",
    "study.py",
    "config.py",
    "planning.py",
    "measure.py",
    "analysis.py",
    "views.py",
    "results",  # results.py, or a results/ subpackage
    "report/__init__.py",
    "report/page.py",
    "report/figures.py",
    "report/template.html.j2",
)
MAX_LINES = 400


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports, wherever the import stands (``from p import n``: ``p.n``)."""
    out: set[str] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return out


def test_the_built_in_studies_are_the_four_named_here() -> None:
    found = sorted(p.parent.name for p in STUDIES.glob("*/__init__.py"))
    assert found == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_every_study_has_the_same_files_in_the_same_places(name: str) -> None:
    missing = [
        f
        for f in LAYOUT
        if not (STUDIES / name / f).is_file()
        and not (
            f == "results"
            and (
                (STUDIES / name / "results.py").is_file()
                or (STUDIES / name / "results/__init__.py").is_file()
            )
        )
    ]
    assert not missing, f"studies/{name}/ lacks {missing}"


@pytest.mark.parametrize("name", NAMES)
def test_study_py_holds_only_the_study_class(name: str) -> None:
    body = _tree(STUDIES / name / "study.py").body
    functions = [n.name for n in body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    classes = [n.name for n in body if isinstance(n, ast.ClassDef)]
    assert not functions, f"studies/{name}/study.py defines functions {functions}"
    assert len(classes) == 1, f"studies/{name}/study.py defines classes {classes}"


def test_no_study_rebinds_a_module_function_as_a_hook() -> None:
    found = []
    for path in sorted(STUDIES.rglob("*.py")):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ClassDef):
                for stmt in node.body:
                    value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
                    if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "staticmethod":
                        found.append(f"{path.relative_to(SRC)}:{stmt.lineno}")
    assert not found, "hooks rebound with staticmethod(...):\n" + "\n".join(found)


def test_no_study_imports_another() -> None:
    found = []
    for name in NAMES:
        others = [f"lmaudit.studies.{o}" for o in NAMES if o != name]
        for path in sorted((STUDIES / name).rglob("*.py")):
            bad = sorted(m for m in imported(path) if any(m == o or m.startswith(o + ".") for o in others))
            if bad:
                found.append(f"{path.relative_to(SRC)}: {', '.join(bad)}")
    assert not found, "a study imports another:\n" + "\n".join(found)


def test_the_cross_study_scan_sees_function_local_imports(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from lmaudit.studies.qq.planning import cells_for\n")
    assert "lmaudit.studies.qq.planning.cells_for" in imported(src)


#: the layout's modules in import order: each may import those before it, never one after
ORDER = ("planning", "measure", "analysis", "views", "report", "study")


@pytest.mark.parametrize("name", NAMES)
def test_imports_point_one_way_along_the_layout(name: str) -> None:
    found = []
    for i, mod in enumerate(ORDER[:3]):
        later = [f"lmaudit.studies.{name}.{m}" for m in ORDER[i + 1 :]]
        bad = sorted(
            m
            for m in imported(STUDIES / name / f"{mod}.py")
            if any(m == x or m.startswith(x + ".") for x in later)
        )
        if bad:
            found.append(f"{mod}.py: {', '.join(bad)}")
    assert not found, f"studies/{name}/ imports against the layout's order:\n" + "\n".join(found)


def test_no_study_module_passes_400_lines() -> None:
    long = {
        str(p.relative_to(SRC)): n
        for p in sorted(STUDIES.rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"split by concern: {long}"


def _families(folder: Path) -> dict[str, int]:
    prefixes = Counter(p.stem.split("_")[0] for p in folder.glob("*_*.py"))
    return {p: n for p, n in prefixes.items() if n >= 3}


def test_no_prefix_family_where_a_subpackage_belongs() -> None:
    found = {
        str(folder.relative_to(SRC)): fam
        for folder in sorted({p.parent for p in (SRC / "lmaudit").rglob("*.py")})
        if (fam := _families(folder))
    }
    assert not found, f"module families that want a subpackage: {found}"
