"""Heavy libraries are imported only on the paths that use them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "scipy.stats", "scipy.special", "scipy.sparse", "matplotlib", "mlflow")


def _run(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def _loaded_after(code: str) -> set[str]:
    return set(_run(f"{code}\nimport sys\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))").split())


def test_registering_every_study_imports_nothing_heavy() -> None:
    code = (
        "from lmaudit.config.schema import register_configs\n"
        "register_configs()\n"
        "import lmaudit.pipeline, lmaudit.backends.cached, lmaudit.backends.factory, lmaudit.stats.intervals\n"
    )
    assert _loaded_after(code) == set()


def test_the_hf_module_defers_torch_until_a_model_is_used() -> None:
    assert {"torch", "transformers"}.isdisjoint(_loaded_after("import lmaudit.backends.sim"))


def test_transformers_model_classes_load_without_scikit_learn_and_roc_curve_still_works() -> None:
    pytest.importorskip("sklearn")
    pytest.importorskip("transformers")
    # without the deferral, transformers' generation package imports scikit-learn (and scipy.stats)
    plain = "from transformers import AutoModelForCausalLM, GenerationMixin\nimport sys\nprint('sklearn' in sys.modules)"
    imports_sklearn = _run(plain) == "True"
    code = (
        "import json, sys\n"
        "from lmaudit.backends.hf_imports import defer_sklearn\n"
        "deferred = defer_sklearn()\n"
        "from lmaudit.backends.hf import HFBackend\n"
        "from lmaudit.backends.base import BackendError\n"
        "try:\n"
        "    HFBackend(model='/nonexistent/model', progress=False)\n"
        "except BackendError:\n"
        "    pass\n"
        "from transformers import AutoModelForCausalLM, GenerationMixin\n"
        "import transformers.generation.candidate_generator as cg\n"
        "before = sorted(m for m in ('sklearn', 'scipy.stats') if m in sys.modules)\n"
        "y, s = [0, 0, 1, 1, 0, 1], [0.1, 0.4, 0.35, 0.8, 0.7, 0.2]\n"
        "ours = [list(map(float, a)) for a in cg.roc_curve(y, s)] if deferred else None\n"
        "from sklearn.metrics import roc_curve\n"
        "ref = [list(map(float, a)) for a in roc_curve(y, s)]\n"
        "print(json.dumps({'deferred': deferred, 'before': before, 'ours': ours, 'ref': ref}))"
    )
    got = json.loads(_run(code))
    # deferred exactly when there is an import to defer (a transformers that no longer imports
    # scikit-learn with its model classes leaves nothing to do)
    assert got["deferred"] is imports_sklearn
    assert got["before"] == []
    if got["deferred"]:
        assert got["ours"] == got["ref"]  # the deferred function is scikit-learn's, imported on first call
