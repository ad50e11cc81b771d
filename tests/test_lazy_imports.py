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
        "import lmaudit.pipeline, lmaudit.backends.cached, lmaudit.backends.registry, lmaudit.stats.intervals\n"
    )
    assert _loaded_after(code) == set()


def test_the_hf_module_defers_torch_until_a_model_is_used() -> None:
    assert {"torch", "transformers"}.isdisjoint(_loaded_after("import lmaudit.backends.sim"))


def test_model_classes_load_without_sklearn_or_scipy_and_deferred_functions_work() -> None:
    pytest.importorskip("sklearn")
    pytest.importorskip("scipy")
    pytest.importorskip("transformers")
    classes = "from transformers import AutoModelForCausalLM, GenerationMixin, PreTrainedModel\n"
    # without the deferrals, loading transformers' model classes imports scikit-learn (the
    # generation package) and scipy.optimize (the loss package)
    plain = _run(f"{classes}import sys\nprint(' '.join(m for m in ('sklearn', 'scipy') if m in sys.modules))")
    imported_without = set(plain.split())
    code = (
        "import json, sys\n"
        "from lmaudit.backends.hf_imports import defer_optional_imports\n"
        "deferred = defer_optional_imports()\n"
        "from lmaudit.backends.hf import HFBackend\n"
        "from lmaudit.backends.base import BackendError\n"
        "try:\n"
        "    HFBackend(model='/nonexistent/model', progress=False)\n"
        "except BackendError:\n"
        "    pass\n"
        f"{classes}"
        "import transformers.generation.candidate_generator as cg\n"
        "import transformers.loss.loss_for_object_detection as l1, transformers.loss.loss_rt_detr as l2\n"
        "import transformers.loss.loss_deformable_detr as l3, transformers.loss.loss_grounding_dino as l4\n"
        "before = sorted(m for m in ('sklearn', 'scipy') if m in sys.modules)\n"
        "y, s = [0, 0, 1, 1, 0, 1], [0.1, 0.4, 0.35, 0.8, 0.7, 0.2]\n"
        "cost = [[4.0, 1.0, 3.0, 7.0], [2.0, 0.0, 5.0, 1.0], [3.0, 2.0, 2.0, 6.0]]\n"
        "roc = [list(map(float, a)) for a in cg.roc_curve(y, s)]\n"
        "lsa = [[[int(i) for i in a] for a in m.linear_sum_assignment(cost)] for m in (l1, l2, l3, l4)]\n"
        "from sklearn.metrics import roc_curve\n"
        "from scipy.optimize import linear_sum_assignment\n"
        "ref_roc = [list(map(float, a)) for a in roc_curve(y, s)]\n"
        "ref_lsa = [[int(i) for i in a] for a in linear_sum_assignment(cost)]\n"
        "print(json.dumps({'deferred': deferred, 'before': before, 'roc': roc, 'ref_roc': ref_roc,\n"
        "                  'lsa': lsa, 'ref_lsa': ref_lsa}))"
    )
    got = json.loads(_run(code))
    # deferred exactly where there is an import to defer (a transformers that no longer imports
    # a package with its model classes leaves nothing to do for it)
    assert got["deferred"] == {
        "sklearn.metrics": "sklearn" in imported_without,
        "scipy.optimize": "scipy" in imported_without,
    }
    assert got["before"] == []
    # the functions the modules hold are the packages' own, imported on first call
    assert got["roc"] == got["ref_roc"]
    assert got["lsa"] == [got["ref_lsa"]] * 4
    assert got["ref_lsa"] == [[0, 1, 2], [1, 3, 2]]  # the minimum-cost assignment, by hand: 1 + 1 + 2


def test_a_sim_qq_run_imports_no_torch(tmp_path: Path) -> None:
    """A whole sim QQ run imports neither torch nor transformers (nor MLflow, with tracking
    off); its report's two figures come from matplotlib."""
    code = (
        "import atexit, runpy, sys\n"
        f"heavy = {HEAVY!r}\n"
        "atexit.register(lambda: print('LOADED', ' '.join(m for m in heavy if m in sys.modules)))\n"
        f"sys.argv = ['run.py', 'model=sim_projective', 'mlflow.enabled=false', 'progress=false',\n"
        f"            'paths.results={tmp_path / 'results'}', 'paths.cache={tmp_path / 'cache'}']\n"
        f"runpy.run_path({str(REPO / 'run.py')!r}, run_name='__main__')\n"
    )
    out = _run(code)
    # scipy.special: G3's Clopper-Pearson intervals; matplotlib: the report's figures
    assert set(out.split("LOADED", 1)[1].split()) <= {"scipy.special", "matplotlib"}
    (report,) = (tmp_path / "results").glob("qq/*/report.html")
    assert report.read_text().count("<svg") == 2


def test_a_sim_run_that_logs_imports_mlflow_in_its_own_process_and_no_torch(tmp_path: Path) -> None:
    """MLflow is imported by the run that logs (in the run's process, after its report), while
    a simulated model still needs neither torch nor transformers."""
    code = (
        "import atexit, runpy, sys\n"
        f"heavy = {HEAVY!r}\n"
        "atexit.register(lambda: print('LOADED', ' '.join(m for m in heavy if m in sys.modules)))\n"
        f"sys.argv = ['run.py', 'model=sim_projective', 'items=sim_demo', 'progress=false',\n"
        f"            'out_dir={tmp_path / 'run'}', 'paths.cache={tmp_path / 'cache'}',\n"
        f"            'paths.mlruns={tmp_path / 'mlruns'}']\n"
        f"runpy.run_path({str(REPO / 'run.py')!r}, run_name='__main__')\n"
    )
    loaded = set(_run(code).split("LOADED", 1)[1].split())
    assert "mlflow" in loaded and {"torch", "transformers"}.isdisjoint(loaded), loaded
    assert json.loads((tmp_path / "run" / "audit_record.json").read_text())["mlflow"]["run_id"]
