"""Heavy libraries are imported only on the paths that use them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "scipy.stats", "scipy.special", "scipy.sparse", "matplotlib", "mlflow")


def _loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    return set(out.stdout.split())


def test_registering_every_study_imports_nothing_heavy() -> None:
    code = (
        "from lmaudit.config.schema import register_configs\n"
        "register_configs()\n"
        "import lmaudit.pipeline, lmaudit.backends.cached, lmaudit.backends.factory, lmaudit.stats.intervals\n"
    )
    assert _loaded_after(code) == set()


def test_the_hf_module_defers_torch_until_a_model_is_used() -> None:
    assert {"torch", "transformers"}.isdisjoint(_loaded_after("import lmaudit.backends.sim"))
