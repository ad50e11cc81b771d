"""Pre-registration has one home, ``lmaudit.prereg``: it imports nothing of the pipeline or of
tracking, the rest of lmaudit reaches it through its public surface only, and the pipeline
calls it from ``stages.py`` (and reads its MLflow views in ``mlflow_run.py``)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
REPO = SRC.parent
PREREG = SRC / "lmaudit" / "prereg"


def _imported(path: Path) -> set[str]:
    """Every module ``path`` names in an import statement (function-level ones included)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def test_the_package_holds_each_concern_in_one_module() -> None:
    assert sorted(p.name for p in PREREG.glob("*.py")) == [
        "__init__.py",
        "bind.py",
        "conf_files.py",
        "files.py",
        "predictions.py",
    ]
    prereg = importlib.import_module("lmaudit.prereg")
    assert all(hasattr(prereg, name) for name in prereg.__all__)


def test_prereg_imports_nothing_of_the_pipeline_or_tracking() -> None:
    paths = sorted(PREREG.glob("*.py"))
    assert paths, f"no package at {PREREG}"
    for path in paths:
        upward = sorted(m for m in _imported(path) if m.startswith(("lmaudit.pipeline", "lmaudit.tracking")))
        assert not upward, f"{path.name} imports {upward}"


def test_the_rest_of_lmaudit_uses_its_public_surface_and_the_pipeline_two_modules() -> None:
    users: set[str] = set()
    for path in sorted([*SRC.rglob("*.py"), REPO / "run.py"]):
        if PREREG in path.parents:
            continue
        names = _imported(path)
        modules = ("bind", "conf_files", "files", "predictions")
        inner = sorted(m for m in names if m.startswith("lmaudit.prereg.") and m.split(".")[2] in modules)
        assert not inner, f"{path.relative_to(REPO)} imports {inner}: use lmaudit.prereg"
        if any(m == "lmaudit.prereg" or m.startswith("lmaudit.prereg.") for m in names):
            users.add(str(path.relative_to(REPO)))
    pipeline = sorted(u for u in users if u.startswith("src/lmaudit/pipeline/"))
    assert pipeline == ["src/lmaudit/pipeline/mlflow_run.py", "src/lmaudit/pipeline/stages.py"]
