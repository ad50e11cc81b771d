"""Run comparison: a table of MLflow runs (verdict counts, gates, predictions) side by side.

``lmaudit compare`` prints it; ``--csv`` / ``--markdown`` write it. The same runs open in
``mlflow ui --backend-store-uri sqlite:///mlruns/mlflow.db``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lmaudit.tracking.mlflow_log import _mlflow

# (column header, source) where source is "param:...", "metric:...", "tag:..." or "info:..."
COLUMNS: list[tuple[str, str]] = [
    ("run", "info:run_name"),
    ("study", "tag:study"),
    ("model", "param:model.name"),
    ("framing", "param:framing.name"),
    ("mapping", "param:mapping.name"),
    ("estimand", "param:estimand.kind"),
    ("items", "metric:n_items"),
    ("SAT", "metric:n_satisfied"),
    ("VIOL", "metric:n_violated"),
    ("IND", "metric:n_indeterminate"),
    ("NC", "metric:n_gamma_noncontextual"),
    ("CTX", "metric:n_gamma_contextual"),
    ("saturated", "metric:n_saturated"),
    ("G1", "tag:gate.G1"),
    ("G2", "tag:gate.G2"),
    ("G3", "tag:gate.G3"),
]


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() else f"{v:.4g}"
    return str(v)


def fetch_runs(
    mlruns: str | Path,
    experiments: Sequence[str] | None = None,
    parent_run_id: str | None = None,
    last: int | None = None,
) -> list[Any]:
    """Finished (or failed) job runs, newest first; sweep parents are left out."""
    mlflow = _mlflow(mlruns)
    client = mlflow.tracking.MlflowClient()
    if experiments:
        exps = [e for e in (client.get_experiment_by_name(n) for n in experiments) if e is not None]
        missing = sorted(set(experiments) - {e.name for e in exps})
        if missing:
            raise ValueError(f"no MLflow experiment named {', '.join(missing)} in {mlruns}")
    else:
        exps = [e for e in client.search_experiments() if e.name != "Default"]
    if not exps:
        return []
    filt = f"tags.mlflow.parentRunId = '{parent_run_id}'" if parent_run_id else ""
    runs = client.search_runs(
        [e.experiment_id for e in exps],
        filter_string=filt,
        order_by=["attributes.start_time DESC"],
        max_results=last or 1000,
    )
    return [r for r in runs if r.data.tags.get("lmaudit.kind") != "sweep"]


def table(runs: Sequence[Any]) -> tuple[list[str], list[list[str]]]:
    """Header and rows: fixed columns, then one column per registered prediction id."""
    pred_ids = sorted({k.split(".", 1)[1] for r in runs for k in r.data.tags if k.startswith("prediction.")})
    header = [h for h, _ in COLUMNS] + [f"pred {p}" for p in pred_ids]
    rows = []
    for r in runs:
        row = []
        for _, src in COLUMNS:
            kind, key = src.split(":", 1)
            if kind == "info":
                v: Any = r.data.tags.get("mlflow.runName") or r.info.run_id[:8]
            elif kind == "param":
                v = r.data.params.get(key)
            elif kind == "metric":
                v = r.data.metrics.get(key)
            else:
                v = r.data.tags.get(key)
            row.append(_fmt(v))
        for p in pred_ids:
            outcome = r.data.tags.get(f"prediction.{p}", "")
            obs = r.data.metrics.get(f"prediction.{p}.observed")
            row.append(f"{outcome} ({_fmt(obs)})" if outcome and obs is not None else outcome)
        rows.append(row)
    return header, rows


def to_text(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out) + "\n"


def to_markdown(header: list[str], rows: list[list[str]]) -> str:
    def esc(c: str) -> str:
        return c.replace("|", "\\|")

    out = ["| " + " | ".join(esc(h) for h in header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def to_csv(header: list[str], rows: list[list[str]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()
