"""Every layer outside the backends (the pipeline, the studies, the config, tracking, interop,
provenance, stats, reporting) reaches a backend only through the registry.

Read statically (``ast``), every import counts: module level, ``TYPE_CHECKING`` blocks and
imports inside functions alike. A backend implementation is any module of a backend subpackage
(``lmaudit.backends.hf``, ``.openai``, ``.sim``, ``.embed``), except the embedding contract and
its cache layer (``embed.base``, ``embed.cached``), which stand beside ``backends.base`` and
``backends.cached``.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
BACKENDS = SRC / "lmaudit" / "backends"
#: the modules of backend subpackages that are contracts, not implementations
CONTRACTS = {"lmaudit.backends.embed.base", "lmaudit.backends.embed.cached"}
#: the layers outside the backends
LAYERS = ("pipeline", "studies", "config", "tracking", "interop", "provenance", "stats", "reporting")


def implementation_packages() -> list[str]:
    return sorted(f"lmaudit.backends.{p.parent.name}" for p in BACKENDS.glob("*/__init__.py"))


def imported(path: Path) -> set[str]:
    """Every name ``path`` imports, wherever the import stands (``from p import n``: ``p.n``)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def is_implementation(module: str, packages: list[str]) -> bool:
    if any(module == c or module.startswith(c + ".") for c in CONTRACTS):
        return False
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_no_layer_outside_the_backends_imports_a_backend_implementation() -> None:
    packages = implementation_packages()
    assert {"lmaudit.backends.hf", "lmaudit.backends.openai", "lmaudit.backends.sim"} <= set(packages)
    found = []
    for layer in LAYERS:
        files = sorted((SRC / "lmaudit" / layer).rglob("*.py"))
        assert files, layer
        for path in files:
            bad = sorted(m for m in imported(path) if is_implementation(m, packages))
            if bad:
                found.append(f"{path.relative_to(SRC)}: {', '.join(bad)}")
    assert not found, "backend implementations imported past the registry:\n" + "\n".join(found)


def test_the_scan_sees_function_local_and_type_checking_imports(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from lmaudit.backends.embed.cached import CachedEmbedder\n"
        "def f():\n    from lmaudit.backends.hf.lightning.runner import serve_if_secondary\n"
        "def g():\n    import lmaudit.backends.sim\n"
    )
    packages = implementation_packages()
    bad = sorted(m for m in imported(src) if is_implementation(m, packages))
    assert bad == ["lmaudit.backends.hf.lightning.runner.serve_if_secondary", "lmaudit.backends.sim"]
