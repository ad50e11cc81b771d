"""``python run.py -m ...`` sweeps: a thin Hydra callback on top of the pipeline.

- ``on_multirun_start`` records the sweep's overrides in the sweep directory.
- ``on_job_end`` leaves a record per job (its config, run directory and status) in ``jobs/``.
- ``on_multirun_end`` analyses together the jobs that split one design across processes (a
  study's :meth:`~lmaudit.studies.base.Study.design_key` and ``combine_sweep``), then logs
  the side-by-side comparison of the jobs to each MLflow parent run
  (:mod:`lmaudit.tracking.sweeps`).
"""

from __future__ import annotations

import json
import logging
import re
import sys
import traceback
from pathlib import Path
from typing import Any, NamedTuple

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict

from lmaudit.config.overrides import display
from lmaudit.errors import NotCombinable
from lmaudit.pipeline.audit import AuditRecord, utc_now
from lmaudit.pipeline.context import experiment_name, run_dir
from lmaudit.pipeline.rundir import claim_folder
from lmaudit.provenance.io import atomic_write_json, atomic_write_text
from lmaudit.provenance.redact import redact_config, redact_text
from lmaudit.studies.registry import get_study
from lmaudit.terminal import printable
from lmaudit.tracking.mlflow_log import tracking_uri
from lmaudit.tracking.sweeps import JOBS_DIR, SWEEP_FILE, clear_records, job_records, log_comparison


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


def combine(sweep_dir: Path, records: list[dict[str, Any]]) -> None:
    """Per study: jobs that only split one design across processes are analysed together."""
    from lmaudit.pipeline.stages import run

    labels = _labels(records)
    by_study: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r["status"] == "COMPLETED":
            by_study.setdefault(r["study"], []).append(r)
    for name, recs in by_study.items():
        study = get_study(name)
        cfgs = [OmegaConf.create(r["config"]) for r in recs]
        groups: dict[str, list[int]] = {}
        for i, c in enumerate(cfgs):
            key = study.design_key(c)
            if key is not None:
                groups.setdefault(key, []).append(i)
        if not groups or len(recs) < 2:
            continue
        combinable = [g for g in groups.values() if len(g) > 1]
        if not combinable:
            print(f"sweep: no two {name} jobs share a design beyond their conditions; nothing combined")
        for n, group in enumerate(combinable, start=1):
            out = sweep_dir / (f"combined-{name}" if len(combinable) == 1 else f"combined-{name}-{n}")
            jobs = ", ".join(labels[recs[i]["num"]] for i in group)
            claim_folder(out)  # an earlier combined run of this sweep folder, or nothing
            try:
                cfg = study.combine_sweep(
                    [cfgs[i] for i in group], [Path(recs[i]["run_dir"]) for i in group], out
                )
            except NotCombinable as e:
                print(printable(f"sweep: the {name} jobs [{jobs}] are not combined: {e}"))
                continue
            # the folder is lmaudit's: its record says which jobs' measurements it pools
            AuditRecord(out / "audit_record.json", None).update(
                "combined", {"written_utc": utc_now(), "jobs": [recs[i]["run_dir"] for i in group]}
            )
            print(f"sweep: analysing the {name} jobs [{jobs}] together in {out}")
            with open_dict(cfg):  # named by what it combines, not by the last job's overrides
                cfg.run_name = cfg.get("run_name") or study.default_run_name(cfg)
            run(cfg, sweep_dir=sweep_dir)


def _recorded(override: str) -> str:
    """An override as the sweep records it: its short spelling, Hydra's escapes undone so that
    credentials in a URL are found and redacted."""
    return redact_text(display(re.sub(r"\\(.)", r"\1", override)))


def _redact_multirun_yaml(sweep_dir: Path) -> None:
    """Hydra's own record of the sweep (``multirun.yaml``) with credentials in URLs redacted."""
    path = sweep_dir / "multirun.yaml"
    if path.exists():
        text = path.read_text()
        safe = redact_text(text)
        if safe != text:
            atomic_write_text(path, safe)


def _open_store(uri: str) -> None:
    """The sweep's MLflow store made before its jobs start; a store that cannot be opened is
    said once here, and each job reports what it could not log."""
    from lmaudit.tracking.mlflow_log import open_store

    try:
        open_store(uri)
    except Exception as e:
        first = (str(e).strip().splitlines() or [""])[0]
        print(
            f"warning: the MLflow store {uri} could not be opened ({type(e).__name__}: {redact_text(first)[:300]})",
            file=sys.stderr,
        )


def _say_unlogged(records: list[dict[str, Any]]) -> None:
    """One line at the sweep's end naming the completed jobs MLflow did not get (each job warned
    as it ended; a comparison without them would otherwise pass unnoticed), with how to log them."""
    later = []
    for r in records:
        audit = (
            Path(r["run_dir"]) / "audit_record.json" if r["status"] == "COMPLETED" and r["run_dir"] else None
        )
        try:
            section = json.loads(audit.read_text(encoding="utf-8")).get("mlflow") if audit else None
        except (OSError, ValueError):
            section = None
        if isinstance(section, dict) and section.get("not_logged"):
            later.append(str(section.get("log_later") or f"lmaudit log {r['run_dir']}"))
    if later:
        print(
            printable(
                f"warning: sweep: {len(later)} of {len(records)} jobs are not logged to MLflow and missing "
                f"from its comparison; to log them: {'; '.join(later)}"
            ),
            file=sys.stderr,
        )


class _RedactedLog(logging.Filter):
    """Credentials in URLs masked in the lines Hydra logs (a launcher lists each job's
    overrides, its escapes undone so that a URL's credentials are found)."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = re.sub(r"\\(.)", r"\1", record.getMessage())
        safe = redact_text(text)
        if safe != text:
            record.msg, record.args = safe, None
        return True


#: the loggers of the launchers lmaudit documents (each lists the jobs' overrides)
_LAUNCHER_LOGGERS = (
    "hydra._internal.core_plugins.basic_launcher",
    "hydra_plugins.hydra_joblib_launcher._core",
    "hydra_plugins.hydra_submitit_launcher.submitit_launcher",
)


def _redact_hydra_log() -> None:
    for name in _LAUNCHER_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _RedactedLog) for f in logger.filters):
            logger.addFilter(_RedactedLog())


class SweepCallback(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _redact_hydra_log()  # before the launcher lists the jobs
        sweep_dir = Path(config.hydra.sweep.dir)
        # a sweep directory used before (a fixed hydra.sweep.dir): its records and parent runs
        # belong to that sweep, whose MLflow runs stay where they are
        clear_records(sweep_dir)  # only what lmaudit can prove it wrote
        atomic_write_json(
            sweep_dir / SWEEP_FILE,
            {"overrides": [_recorded(o) for o in config.hydra.overrides.task], "started_utc": utc_now()},
        )
        if config.mlflow.enabled:  # made and migrated once, before parallel jobs open it
            _open_store(tracking_uri(config.paths.mlruns))

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        hc = config.get("hydra")
        if hc is not None and hc.get("sweep") is not None and hc.sweep.get("dir"):
            _redact_multirun_yaml(Path(hc.sweep.dir))

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        from hydra.core.utils import JobStatus
        from hydra.types import RunMode

        hc = config.get("hydra")
        if hc is None or hc.get("mode") != RunMode.MULTIRUN:
            return
        task = OmegaConf.create(OmegaConf.to_container(config, resolve=False))
        assert isinstance(task, DictConfig)
        with open_dict(task):
            del task["hydra"]
        try:
            where: str | None = str(run_dir(task))
        except Exception:  # an invalid config: the job failed before it had a run dir
            where = None
        status = job_return.status
        status_name = status.name if isinstance(status, JobStatus) else str(status)
        error = None
        if status_name == "COMPLETED":
            value = job_return.return_value
            if isinstance(value, JobFailed):
                status_name, error = "FAILED", value.error
        rec = {
            "num": int(hc.job.num),
            "overrides": [_recorded(o) for o in hc.overrides.task],
            "study": str(task.study.name),
            "experiment": experiment_name(task),
            "run_dir": where,
            "status": status_name,
            "error": None if error is None else redact_text(error),
            "config": redact_config(OmegaConf.to_container(task, resolve=True)),
            "ended_utc": utc_now(),
        }
        atomic_write_json(Path(hc.sweep.dir) / JOBS_DIR / f"{int(hc.job.num):04d}.json", rec)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        _redact_multirun_yaml(sweep_dir)
        records = job_records(sweep_dir)
        failed = [r for r in records if r["status"] != "COMPLETED"]
        try:
            combine(sweep_dir, records)
        except Exception:  # the jobs' own results stand; say what went wrong
            print("sweep: combining the jobs failed:\n" + traceback.format_exc())
        if config.mlflow.enabled:
            uri = tracking_uri(config.paths.mlruns)
            try:
                log_comparison(uri, sweep_dir, records)
            except Exception as e:  # the jobs' results and reports stand; each job said how to log it
                first = (str(e).strip().splitlines() or [""])[0]
                print(
                    f"warning: the sweep's comparison was not logged to {uri} "
                    f"({type(e).__name__}: {redact_text(first)[:300]})",
                    file=sys.stderr,
                )
        if config.mlflow.enabled:
            _say_unlogged(records)
        if failed:
            print(
                printable(
                    f"sweep: {len(failed)} of {len(records)} jobs failed: "
                    + "; ".join(f"[{_labels(records)[r['num']]}] {r.get('error') or 'error'}" for r in failed)
                )
            )
            raise SystemExit(1)
