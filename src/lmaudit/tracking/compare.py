"""Run comparison: a table of MLflow runs (verdict counts, gates, predictions) side by side.

``lmaudit compare`` prints it; ``--csv`` / ``--markdown`` write it. The same runs open in
``mlflow ui --backend-store-uri sqlite:///mlruns/mlflow.db``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from lmaudit.tracking.mlflow_log import client

# (column header, source) where source is "param:...", "metric:...", "tag:..." or "info:...";
# the common columns, then each study's own (``Study.compare_columns``), leaving out
# columns that are empty for every run shown
COMMON_COLUMNS: list[tuple[str, str]] = [
    ("run", "info:run_name"),
    ("status", "info:status"),  # FINISHED, FAILED, KILLED, or RUNNING (still running, or died unrecorded)
    ("study", "tag:study"),
    ("model", "param:model.name"),
]


def columns(studies: Sequence[str]) -> list[tuple[str, str]]:
    from lmaudit.studies.registry import get_study, study_names

    cols = list(COMMON_COLUMNS)
    known = set(study_names())
    for name in dict.fromkeys(studies):
        if name in known:
            cols += [c for c in get_study(name).compare_columns if c not in cols]
    return cols


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() else f"{v:.4g}"
    return str(v)


def fetch_runs(
    uri: str,
    experiments: Sequence[str] | None = None,
    parent_run_id: str | None = None,
    last: int | None = None,
) -> list[Any]:
    """Job runs of every status in the store at ``uri``, newest first; sweep parents are left out."""
    c = client(uri)
    if experiments:
        exps = [e for e in (c.get_experiment_by_name(n) for n in experiments) if e is not None]
        missing = sorted(set(experiments) - {e.name for e in exps})
        if missing:
            raise ValueError(f"no MLflow experiment named {', '.join(missing)} in {uri}")
    else:
        exps = [e for e in c.search_experiments() if e.name != "Default"]
    if not exps:
        return []
    filt = f"tags.mlflow.parentRunId = '{parent_run_id}'" if parent_run_id else ""
    runs = c.search_runs(
        [e.experiment_id for e in exps],
        filter_string=filt,
        order_by=["attributes.start_time DESC"],
        max_results=last or 1000,
    )
    return [r for r in runs if r.data.tags.get("lmaudit.kind") != "sweep"]


def _value(r: Any, src: str) -> Any:
    kind, key = src.split(":", 1)
    if kind == "info" and key == "status":
        return r.info.status
    if kind == "info":
        return r.data.tags.get("mlflow.runName") or r.info.run_id[:8]
    if kind == "param":
        return r.data.params.get(key)
    if kind == "metric":
        return r.data.metrics.get(key)
    return r.data.tags.get(key)


def table(runs: Sequence[Any]) -> tuple[list[str], list[list[str]]]:
    """Header and rows: common columns, the studies' own, then one column per prediction id."""
    pred_ids = sorted({k.split(".", 1)[1] for r in runs for k in r.data.tags if k.startswith("prediction.")})
    cols = columns([str(r.data.tags.get("study", "")) for r in runs])
    cells = [[_fmt(_value(r, src)) for _, src in cols] for r in runs]
    keep = [
        i
        for i, (_, src) in enumerate(cols)
        if src in dict(COMMON_COLUMNS).values() or any(c[i] for c in cells)
    ]
    header = [cols[i][0] for i in keep] + [f"pred {p}" for p in pred_ids]
    rows = []
    for r, c in zip(runs, cells, strict=True):
        row = [c[i] for i in keep]
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
