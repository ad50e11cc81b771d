"""The one pipeline every study follows: plan -> measure -> analyze -> report (+ MLflow record).

``run.py`` composes the Hydra config and calls :func:`run`. Each stage reads what the
previous one wrote in the run directory, so stages can be run one at a time
(``stage=plan|measure|analyze|report``) or all together (``stage=all``).
"""

from __future__ import annotations

import datetime as _dt
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from lmaudit import __version__
from lmaudit.provenance import prereg
from lmaudit.provenance.digest import file_sha256, json_digest
from lmaudit.provenance.io import (
    InputError,
    atomic_write_json,
    atomic_write_jsonl,
    atomic_write_text,
    iter_jsonl,
    read_json,
)

STAGES = ("plan", "freeze", "measure", "analyze", "report", "all")


def _study(name: str) -> Any:
    from lmaudit.studies.registry import get_study

    return get_study(name)


def default_run_name(cfg: DictConfig) -> str:
    return str(_study(str(cfg.study.name)).default_run_name(cfg))


def run_name(cfg: DictConfig) -> str:
    if cfg.run_name:
        return str(cfg.run_name)
    if cfg.prereg is not None:
        return str(cfg.prereg.name)
    return default_run_name(cfg)


def run_dir(cfg: DictConfig) -> Path:
    if cfg.out_dir:
        return Path(cfg.out_dir)
    return Path(cfg.paths.results) / str(cfg.study.name) / run_name(cfg)


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _diff_keys(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b)):
            out += _diff_keys(a.get(k), b.get(k), f"{prefix}{k}.")
        return out
    return [] if a == b else [prefix.rstrip(".")]


class _Audit:
    """The run's audit record, updated section by section and rewritten atomically."""

    def __init__(self, path: Path, plan_digest: str | None):
        self.path = path
        self.data: dict[str, Any] = {}
        if path.exists():
            old = read_json(path)
            if isinstance(old, dict) and (plan_digest is None or old.get("plan_digest") == plan_digest):
                self.data = old
        self.data.setdefault("schema", 1)
        self.data.setdefault("lmaudit_version", __version__)
        if plan_digest:
            self.data["plan_digest"] = plan_digest

    def update(self, section: str, value: dict[str, Any]) -> None:
        self.data[section] = value
        atomic_write_json(self.path, self.data)


def _write_plan(plan: dict[str, Any], out: Path) -> dict[str, Any]:
    """Write plan.json. A run directory re-planned under a different config or inputs drops its
    now-stale downstream files (results, metrics, plots, report), so it never mixes two plans."""
    path = out / "plan.json"
    if path.exists():
        old = read_json(path)
        if old.get("plan_digest") != plan["plan_digest"]:
            diffs = _diff_keys(old.get("config", {}), plan["config"])
            if old.get("inputs") != plan["inputs"]:
                diffs.append("inputs")
            print(
                f"{path}: the plan changed ({', '.join(diffs) or 'rendered prompts'}); "
                "re-planning this run directory"
            )
            for stale in ("results.json", "metrics.json", "report.html"):
                (out / stale).unlink(missing_ok=True)
            shutil.rmtree(out / "plots", ignore_errors=True)
    atomic_write_json(path, plan)
    return plan


def _measure(cfg: DictConfig, study: Any, out: Path, plan: dict[str, Any], audit: _Audit) -> Path:
    from lmaudit.backends.cached import CachedBackend
    from lmaudit.backends.factory import build_backend
    from lmaudit.provenance.cache import ResponseCache

    t0 = time.perf_counter()
    cache = ResponseCache(Path(cfg.paths.cache))
    if hasattr(study, "needs_backend") and not study.needs_backend(cfg):
        # e.g. measurements imported from elsewhere: no model is loaded or recorded
        rows = study.measure(cfg, None, None)
        path = atomic_write_jsonl(out / "measurements.jsonl", rows)
        audit.update(
            "measure",
            {
                "finished_utc": _now(),
                "backend": None,
                "imported": True,
                "measurements": {"path": str(path), "sha256": file_sha256(path), "rows": len(rows)},
            },
        )
        return path
    backend = build_backend(cfg.model)
    t_load = time.perf_counter() - t0
    batch = int(cfg.model.get("batch_size", 16))
    cached = CachedBackend(backend, cache, batch_size=batch, progress=bool(cfg.progress))
    rows = study.measure(cfg, cached, backend)
    path = atomic_write_jsonl(out / "measurements.jsonl", rows)
    describe = backend.describe() if hasattr(backend, "describe") else {}
    label_ids = sorted({f"{k}={v}" for r in rows for k, v in (r.get("label_token_ids") or {}).items()})
    audit.update(
        "measure",
        {
            "finished_utc": _now(),
            "backend_identity": backend.identity,
            "backend_digest": cached.digest,
            "backend": describe,
            "label_token_ids": label_ids,
            "cache": {"dir": str(cache.root), **cache.stats.as_dict()},
            "seconds": {"load": round(t_load, 3), "total": round(time.perf_counter() - t0, 3)},
            "measurements": {"path": str(path), "sha256": file_sha256(path), "rows": len(rows)},
        },
    )
    return path


def _write_dvc_views(out: Path, study: Any, results: dict[str, Any]) -> None:
    """``metrics.json`` (headline numbers) and ``plots/*.csv`` (figure data) for ``dvc metrics``
    and ``dvc plots``; both are pure views of results.json."""
    import csv
    import io

    metrics = {**study.metrics(results), **_prediction_metrics(results)}
    atomic_write_json(out / "metrics.json", metrics)
    for name, rows in study.plot_data(results).items():
        buf = io.StringIO()
        if rows:
            w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
            w.writeheader()
            w.writerows(rows)
        atomic_write_text(out / "plots" / f"{name}.csv", buf.getvalue())


def _sweep_dir() -> Path | None:
    """The sweep directory, when this job is part of a ``-m`` sweep."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return None
    hc = HydraConfig.get()
    if hc.mode != RunMode.MULTIRUN:
        return None
    return Path(hc.sweep.dir)


def _prediction_tags(results: dict[str, Any]) -> dict[str, str]:
    return {f"prediction.{p['id']}": p["outcome"] for p in results.get("predictions", [])}


def _prediction_metrics(results: dict[str, Any]) -> dict[str, float]:
    out = {}
    for p in results.get("predictions", []):
        v = p.get("observed")
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[f"prediction.{p['id']}.observed"] = float(v)
    return out


def run(cfg: DictConfig, *, sweep_dir: Path | None = None) -> float | None:
    """Run the configured stage(s); returns the study's headline metric.

    ``sweep_dir``: the ``-m`` sweep this run belongs to (found from Hydra when not given); its
    MLflow run nests under the sweep's parent run.
    """
    stage = str(cfg.stage)
    if stage not in STAGES:
        raise InputError(f"stage={stage!r} is not one of {', '.join(STAGES)}")
    study = _study(str(cfg.study.name))
    if cfg.get("judge") is not None and study.NAME != "judge":
        raise InputError(
            f"judge/condition selects the judge study, but study={study.NAME} was given: "
            "drop one of the two (e.g. python run.py -m judge/condition=P0,PA,PB,PAB)"
        )
    reg = prereg.for_run(cfg, study, stage, __version__)
    if stage == "freeze":
        return None
    out = run_dir(cfg)
    # the plan validates every input: bad input is refused before the run directory exists
    planned = study.plan(cfg) if stage in ("plan", "measure", "all") else None
    out.mkdir(parents=True, exist_ok=True)
    print(f"lmaudit {study.NAME}: stage={stage} run dir {out}")

    plan: dict[str, Any] | None = None
    if planned is not None:
        plan = _write_plan(planned, out)
    elif (out / "plan.json").exists():
        plan = read_json(out / "plan.json")
    audit = _Audit(out / "audit_record.json", plan["plan_digest"] if plan else None)
    if plan is not None and stage in ("plan", "measure", "all"):
        audit.update(
            "plan",
            {
                "written_utc": _now(),
                "plan_digest": plan["plan_digest"],
                "inputs": plan["inputs"],
                "n_requests": plan["n_requests"],
                "git_commit": _git_commit(),
                "python": sys.version.split()[0],
                "platform": platform.platform(),
            },
        )
    if stage == "plan":
        return None

    if stage in ("measure", "all"):
        assert plan is not None
        _measure(cfg, study, out, plan, audit)
        if stage == "measure":
            return None

    results_path = out / "results.json"
    if stage in ("analyze", "all"):
        mpath = Path(cfg.measurements) if cfg.measurements else out / "measurements.jsonl"
        if not mpath.exists():
            raise InputError(
                f"{mpath}: no measurement file; run stage=measure first or pass measurements=<path>"
            )
        rows = [obj for _, obj in iter_jsonl(mpath)]
        results = study.analyze_rows(cfg, rows, str(mpath))
        results["source"] = {"measurements_sha256": file_sha256(mpath)}
        if reg is not None:
            doc, path = reg
            results["prereg"] = {
                "name": doc["name"],
                "path": str(path),
                "file_digest": doc["file_digest"],
                "frozen_utc": doc["frozen_utc"],
                "plan_digest": doc["plan_digest"],
            }
            if doc.get("data_keys"):  # an open registration: record the data these scores rest on
                results["prereg"]["data"] = "open"
                results["prereg"]["data_scored"] = {
                    "measurements_sha256": results["source"]["measurements_sha256"],
                    "plan_inputs": plan["inputs"] if plan else None,
                }
            results["predictions"] = prereg.score(
                prereg.parse_predictions(doc["predictions"], str(path)), results
            )
        atomic_write_json(results_path, results)
        _write_dvc_views(out, study, results)
        audit.update(
            "analyze",
            {
                "finished_utc": _now(),
                "measurements": str(mpath),
                "measurements_sha256": file_sha256(mpath),
                "results_sha256": file_sha256(results_path),
            },
        )
    elif not results_path.exists():
        raise InputError(f"{results_path}: no results; run stage=analyze first")
    results = read_json(results_path)

    experiment = cfg.mlflow.experiment or f"lmaudit-{study.NAME}"
    name = run_name(cfg)
    run_id: str | None = None
    if cfg.mlflow.enabled:
        from lmaudit.tracking.mlflow_log import start_job

        sweep = sweep_dir or _sweep_dir()
        parent = None
        if sweep is not None:
            from lmaudit.tracking.hydra_callback import sweep_parent

            parent = sweep_parent(sweep, cfg.paths.mlruns, experiment)
        run_id = start_job(
            mlruns=cfg.paths.mlruns, experiment=experiment, run_name=name, parent_run_id=parent
        )
        audit.data["mlflow"] = {
            "run_id": run_id,
            "experiment": experiment,
            "tracking_uri": f"sqlite:///{Path(cfg.paths.mlruns).resolve()}/mlflow.db",
        }
        atomic_write_json(audit.path, audit.data)

    try:
        report_path = study.write_report(out / "report.html", results=results, plan=plan, audit=audit.data)
        audit.update("report", {"written_utc": _now(), "report_sha256": file_sha256(report_path)})

        headline = study.headline(results)
        if run_id is not None:
            from lmaudit.tracking.mlflow_log import log_job

            log_job(
                mlruns=cfg.paths.mlruns,
                experiment=experiment,
                run_name=name,
                run_id=run_id,
                params={k: OmegaConf.to_container(cfg[k], resolve=True) for k in study.PLAN_KEYS},
                metrics={**study.metrics(results), **_prediction_metrics(results)},
                tags={
                    **study.tags(results),
                    **_prediction_tags(results),
                    "plan_digest": str(audit.data.get("plan_digest")),
                    "run_dir": str(out),
                    "study": study.NAME,
                },
                artifacts=[
                    out / n
                    for n in (
                        "plan.json",
                        "results.json",
                        "audit_record.json",
                        "report.html",
                        "measurements.jsonl",
                    )
                ]
                + ([reg[1]] if reg is not None else []),
            )
    except BaseException:  # the run's MLflow record says it failed rather than staying RUNNING
        if run_id is not None:
            from lmaudit.tracking.mlflow_log import fail_job

            fail_job(cfg.paths.mlruns, run_id)
        raise
    if run_id is not None:
        print(f"MLflow run {run_id} ({audit.data['mlflow']['tracking_uri']})")
    print(study.summary(results))
    names = ("plan.json", "measurements.jsonl", "results.json", "audit_record.json", "report.html")
    print(f"wrote {out}/{{{', '.join(n for n in names if (out / n).exists())}}}")
    return headline


__all__ = ["json_digest", "run"]
