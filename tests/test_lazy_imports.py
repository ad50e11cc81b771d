"""Heavy libraries are imported only on the paths that use them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
        "from lmaudit.config.store import register_configs\n"
        "register_configs()\n"
        "import lmaudit.pipeline, lmaudit.backends.cached, lmaudit.backends.registry, lmaudit.stats.intervals\n"
    )
    assert _loaded_after(code) == set()


def test_the_hf_module_defers_torch_until_a_model_is_used() -> None:
    assert {"torch", "transformers"}.isdisjoint(_loaded_after("import lmaudit.backends.sim"))


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
