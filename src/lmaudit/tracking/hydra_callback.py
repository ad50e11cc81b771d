"""Hydra callback for ``python run.py -m ...`` sweeps.

- ``on_multirun_start`` records the sweep's overrides in the sweep directory.
- Each job nests its MLflow run under a parent run *of its own experiment*: the first job of
  a study creates the parent (under a file lock, so parallel launcher workers agree) and
  leaves its id in ``mlflow_parents.json``. The experiment is known only inside a job: a
  sweep such as ``-m judge/condition=P0,PA`` selects its study through the swept group, so
  the sweep-level config still names the default study.
- ``on_job_end`` leaves a record per job (its config, run directory and status) in ``jobs/``.
- ``on_multirun_end`` lets each study combine its jobs where that means something (the judge
  study analyses single-condition jobs together), then logs the side-by-side comparison of
  the jobs to each parent run.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict

from lmaudit.provenance.io import atomic_write_json, atomic_write_text

SWEEP_FILE = "sweep.json"
PARENTS_FILE = "mlflow_parents.json"
JOBS_DIR = "jobs"


def experiment_name(config: DictConfig) -> str:
    return str(config.mlflow.experiment or f"lmaudit-{config.study.name}")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@contextmanager
def _locked(sweep_dir: Path) -> Iterator[None]:
    sweep_dir.mkdir(parents=True, exist_ok=True)
    with open(sweep_dir / ".lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def parents(sweep_dir: str | Path) -> dict[str, str]:
    """``{experiment: parent run id}`` of a sweep (empty before its first job logged)."""
    p = Path(sweep_dir) / PARENTS_FILE
    return dict(json.loads(p.read_text())) if p.exists() else {}


def sweep_parent(sweep_dir: str | Path, mlruns: str | Path, experiment: str) -> str:
    """The sweep's parent run in ``experiment``, created by the first job that asks."""
    from lmaudit.tracking.mlflow_log import _mlflow, ensure_experiment

    sweep_dir = Path(sweep_dir)
    with _locked(sweep_dir):
        known = parents(sweep_dir)
        if experiment in known:
            return known[experiment]
        meta = json.loads((sweep_dir / SWEEP_FILE).read_text()) if (sweep_dir / SWEEP_FILE).exists() else {}
        mlflow = _mlflow(mlruns)
        run = mlflow.start_run(
            experiment_id=ensure_experiment(mlruns, experiment),
            run_name=f"sweep {sweep_dir.name}",
            tags={
                "lmaudit.kind": "sweep",
                "sweep_dir": str(sweep_dir),
                "sweep_overrides": " ".join(meta.get("overrides", []))[:5000],
            },
        )
        mlflow.end_run(status="RUNNING")
        known[experiment] = str(run.info.run_id)
        atomic_write_json(sweep_dir / PARENTS_FILE, known)
        return known[experiment]


def job_records(sweep_dir: str | Path) -> list[dict[str, Any]]:
    """The sweep's job records, in job order."""
    folder = Path(sweep_dir) / JOBS_DIR
    recs = [json.loads(p.read_text()) for p in folder.glob("*.json")] if folder.exists() else []
    return sorted(recs, key=lambda r: int(r["num"]))


class JobFailed(NamedTuple):
    """What a sweep job returns instead of raising (run.py), so that the other jobs still run
    and the sweep's end (records, combination, comparison, parent runs) still happens."""

    error: str


def _labels(records: list[dict[str, Any]]) -> dict[int, str]:
    """Each job by the overrides that set it apart from the sweep's other jobs."""
    common = set.intersection(*(set(r["overrides"]) for r in records)) if records else set()
    return {
        r["num"]: " ".join(o for o in r["overrides"] if o not in common) or f"job {r['num']}" for r in records
    }


def _combine(config: DictConfig, sweep_dir: Path, records: list[dict[str, Any]]) -> None:
    """Per study: jobs that only split one design across processes are analysed together."""
    from lmaudit.cli import run
    from lmaudit.provenance.io import InputError
    from lmaudit.studies.registry import get_study

    labels = _labels(records)
    by_study: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r["status"] == "COMPLETED":
            by_study.setdefault(r["study"], []).append(r)
    for name, recs in by_study.items():
        study = get_study(name)
        combine = getattr(study, "combine_sweep", None)
        if combine is None or len(recs) < 2:
            continue
        cfgs = [OmegaConf.create(r["config"]) for r in recs]
        key = getattr(study, "design_key", lambda c: "")
        groups: dict[str, list[int]] = {}
        for i, c in enumerate(cfgs):
            groups.setdefault(key(c), []).append(i)
        combinable = [g for g in groups.values() if len(g) > 1]
        if not combinable:
            print(f"sweep: no two {name} jobs share a design beyond their conditions; nothing combined")
        for n, group in enumerate(combinable, start=1):
            out = sweep_dir / (f"combined-{name}" if len(combinable) == 1 else f"combined-{name}-{n}")
            jobs = ", ".join(labels[recs[i]["num"]] for i in group)
            try:
                cfg = combine([cfgs[i] for i in group], [Path(recs[i]["run_dir"]) for i in group], out)
            except InputError as e:
                print(f"sweep: the {name} jobs [{jobs}] are not combined: {e}")
                continue
            print(f"sweep: analysing the {name} jobs [{jobs}] together in {out}")
            run(cfg, sweep_dir=sweep_dir)


class MLflowSweepCallback(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        # a sweep directory used before (a fixed hydra.sweep.dir): its records and parent runs
        # belong to that sweep, whose MLflow runs stay where they are
        shutil.rmtree(sweep_dir / JOBS_DIR, ignore_errors=True)
        (sweep_dir / PARENTS_FILE).unlink(missing_ok=True)
        atomic_write_json(
            sweep_dir / SWEEP_FILE,
            {"overrides": list(config.hydra.overrides.task), "started_utc": _now()},
        )

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        from hydra.types import RunMode

        hc = config.get("hydra")
        if hc is None or hc.get("mode") != RunMode.MULTIRUN:
            return
        from hydra.core.utils import JobStatus

        from lmaudit.cli import run_dir

        task = OmegaConf.create(OmegaConf.to_container(config, resolve=False))
        assert isinstance(task, DictConfig)
        with open_dict(task):
            del task["hydra"]
        try:
            where: str | None = str(run_dir(task))
        except Exception:  # an invalid config: the job failed before it had a run dir
            where = None
        status = getattr(job_return, "status", None)
        status_name = status.name if isinstance(status, JobStatus) else str(status)
        error = None
        if status_name == "COMPLETED":
            value = job_return.return_value
            if isinstance(value, JobFailed):
                status_name, error = "FAILED", value.error
        rec = {
            "num": int(hc.job.num),
            "overrides": list(hc.overrides.task),
            "study": str(task.study.name),
            "experiment": experiment_name(task),
            "run_dir": where,
            "status": status_name,
            "error": error,
            "config": OmegaConf.to_container(task, resolve=True),
            "ended_utc": _now(),
        }
        atomic_write_json(Path(hc.sweep.dir) / JOBS_DIR / f"{int(hc.job.num):04d}.json", rec)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        records = job_records(sweep_dir)
        failed = [r for r in records if r["status"] != "COMPLETED"]
        try:
            _combine(config, sweep_dir, records)
        except Exception:  # the jobs' own results stand; say what went wrong
            print("sweep: combining the jobs failed:\n" + traceback.format_exc())
        if config.mlflow.enabled:
            self._compare(config, sweep_dir, records)
        if failed:
            print(
                f"sweep: {len(failed)} of {len(records)} jobs failed: "
                + "; ".join(f"[{_labels(records)[r['num']]}] {r.get('error') or 'error'}" for r in failed)
            )
            raise SystemExit(1)

    def _compare(self, config: DictConfig, sweep_dir: Path, records: list[dict[str, Any]]) -> None:
        from lmaudit.tracking.compare import fetch_runs, table, to_csv, to_markdown
        from lmaudit.tracking.mlflow_log import _mlflow

        mlruns = config.paths.mlruns
        mlflow = _mlflow(mlruns)
        for experiment, run_id in parents(sweep_dir).items():
            runs = fetch_runs(mlruns, [experiment], parent_run_id=run_id)
            header, rows = table(list(reversed(runs)))
            stem = "comparison" if len(parents(sweep_dir)) == 1 else f"comparison-{experiment}"
            atomic_write_text(sweep_dir / f"{stem}.md", to_markdown(header, rows))
            atomic_write_text(sweep_dir / f"{stem}.csv", to_csv(header, rows))
            with mlflow.start_run(run_id=run_id):
                mlflow.log_metric("n_jobs", sum(r["experiment"] == experiment for r in records))
                mlflow.log_metric("n_runs", len(runs))
                mlflow.log_artifact(str(sweep_dir / f"{stem}.md"))
                mlflow.log_artifact(str(sweep_dir / f"{stem}.csv"))
            print(
                f"sweep: {len(runs)} runs under MLflow parent run {run_id} ({experiment}); "
                f"comparison in {sweep_dir}/{stem}.md"
            )
