"""``lmaudit report <run dir>``: a run's ``report.html`` rebuilt from its records.

A report is a pure function of the run's files (``results.json``, ``plan.json``,
``audit_record.json`` and the measurements), so a run folder restored by ``dvc pull`` (which
does not carry reports: they hold times and the MLflow run) gets its page back without a model,
a measurement or an MLflow run, and the same records always give the same page. Nothing but
``report.html`` is written.
"""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir

from lmaudit.errors import InputError
from lmaudit.pipeline.rundir import run_lock
from lmaudit.provenance.io import atomic_write_text, read_json
from lmaudit.studies.base import Plan, RunContext
from lmaudit.studies.registry import get_study


def rebuild_report(run_dir: Path, conf_dir: Path) -> Path:
    """Write ``run_dir/report.html`` from the run's records; returns its path. InputError when
    the folder holds no results or the config folder is missing."""
    results_path = run_dir / "results.json"
    if not results_path.is_file():
        raise InputError(f"{run_dir}: no results.json here (a run folder after stage=analyze, or dvc pull)")
    results = read_json(results_path)
    plan = Plan.from_json(read_json(run_dir / "plan.json")) if (run_dir / "plan.json").is_file() else None
    audit = read_json(run_dir / "audit_record.json") if (run_dir / "audit_record.json").is_file() else {}
    name = results.get("study") if isinstance(results, dict) else None
    if not isinstance(name, str):
        raise InputError(f"{results_path}: field 'study' is missing: not an lmaudit results file")
    if not (conf_dir / "config.yaml").is_file():
        raise InputError(
            f"{conf_dir}: no config.yaml; run lmaudit report from the project folder or pass --conf"
        )
    from lmaudit.config.store import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(conf_dir.resolve()), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"study={name}", "stage=report", f"out_dir={run_dir}"])
    study = get_study(name)
    ctx = RunContext(cfg=cfg, stage="report", run_dir=run_dir, plan=plan, audit=audit)
    html = study.report(study.result(results, str(results_path)), ctx)
    with run_lock(run_dir, "report"):
        return atomic_write_text(run_dir / "report.html", html)
