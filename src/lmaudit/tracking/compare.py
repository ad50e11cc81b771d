"""Run comparison: MLflow runs side by side, one table per study, each column explained in a
legend under its table.

``lmaudit compare`` prints the tables; ``--markdown`` writes them (legends included) and
``--csv`` writes one machine-readable table of every run (a ``study`` column, the union of the
studies' columns). The same runs open in ``mlflow ui --backend-store-uri sqlite:///mlruns/mlflow.db``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lmaudit.terminal import printable
from lmaudit.tracking.mlflow_log import client

# (column header, source, meaning) where source is "param:...", "metric:...", "tag:...",
# "info:..." or "model"; the common columns, then each study's own (``Study.compare_columns``),
# leaving out study columns that are empty for every run shown
COMMON_COLUMNS: list[tuple[str, str, str]] = [
    ("run", "info:run_name", "the run's name (run_name=, its registration's, or the study's default)"),
    (
        "status",
        "info:status",
        "FINISHED; FAILED (its logging failed); KILLED (stopped by a signal); RUNNING (still "
        "running, or its process died unrecorded)",
    ),
    (
        "current",
        "tag:lmaudit.current",
        "yes: the run holds what its run folder holds now; no: a later run of the same folder "
        "superseded it (tag lmaudit.superseded_by); empty: logged before runs were marked",
    ),
    (
        "model",
        "model",
        "the model(s) measured: the run's model when it answered, an ensemble's members, the "
        "families of imported draws ('imported': the data name none)",
    ),
]
_ALWAYS = ("run", "status", "model")
_PRED = "the registered prediction's outcome (its observed value)"


@dataclass(frozen=True)
class Table:
    """One study's runs: header, rows and the legend (column, meaning) printed under them."""

    study: str
    header: list[str]
    rows: list[list[str]]
    legend: list[tuple[str, str]]


def columns(studies: Sequence[str]) -> list[tuple[str, str, str]]:
    from lmaudit.studies.registry import get_study, study_names

    cols = list(COMMON_COLUMNS)
    known = set(study_names())
    for name in dict.fromkeys(studies):
        if name in known:
            for col in get_study(name).compare_columns:
                header, src = col[0], col[1]
                meaning = col[2] if len(col) > 2 else f"{src.split(':', 1)[0]} {src.split(':', 1)[-1]}"
                if header not in {c[0] for c in cols}:
                    cols.append((header, src, meaning))
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
    tags = r.data.tags
    if src == "model":  # runs logged before the model tag: an ensemble's tag, else the param
        return tags.get("model") or tags.get("models") or r.data.params.get("model.name")
    kind, key = src.split(":", 1)
    if kind == "info" and key == "status":
        return r.info.status
    if kind == "info":
        return tags.get("mlflow.runName") or r.info.run_id[:8]
    if kind == "param":
        return r.data.params.get(key)
    if kind == "metric":
        return r.data.metrics.get(key)
    if key == "lmaudit.current" and key in tags:
        return "yes" if tags[key] == "true" else "no"
    return tags.get(key)


def _build(runs: Sequence[Any], cols: list[tuple[str, str, str]]) -> Table:
    pred_ids = sorted({k.split(".", 1)[1] for r in runs for k in r.data.tags if k.startswith("prediction.")})
    cells = [[_fmt(_value(r, src)) for _, src, _ in cols] for r in runs]
    keep = [i for i, (h, _, _) in enumerate(cols) if h in _ALWAYS or any(c[i] for c in cells)]
    header = [cols[i][0] for i in keep] + [f"pred {p}" for p in pred_ids]
    rows = []
    for r, c in zip(runs, cells, strict=True):
        row = [c[i] for i in keep]
        for p in pred_ids:
            outcome = r.data.tags.get(f"prediction.{p}", "")
            obs = r.data.metrics.get(f"prediction.{p}.observed")
            row.append(f"{outcome} ({_fmt(obs)})" if outcome and obs is not None else outcome)
        rows.append(row)
    legend = [(cols[i][0], cols[i][2]) for i in keep] + [(f"pred {p}", _PRED) for p in pred_ids]
    return Table("", header, rows, legend)


def _study(r: Any) -> str:
    return str(r.data.tags.get("study", ""))


def table(runs: Sequence[Any]) -> tuple[list[str], list[list[str]]]:
    """Every run in one table (the CSV): the common columns, ``study``, the studies' own
    columns, then one column per prediction id."""
    study_col = ("study", "tag:study", "the run's study")
    cols = columns([_study(r) for r in runs])
    cols.insert(2, study_col)
    t = _build(runs, cols)
    return t.header, t.rows


def tables(runs: Sequence[Any]) -> list[Table]:
    """One table per study, in the order the studies first appear in ``runs``."""
    out = []
    for study in dict.fromkeys(_study(r) for r in runs):
        t = _build([r for r in runs if _study(r) == study], columns([study]))
        out.append(Table(study or "(no study tag)", t.header, t.rows, t.legend))
    return out


def aligned(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return out


def to_text(ts: Sequence[Table]) -> str:
    if not ts:
        return "no runs\n"
    out: list[str] = []
    for t in ts:
        rows = [[printable(c) for c in r] for r in t.rows]  # run names, models: controls escaped
        out += [f"{t.study} ({len(t.rows)} runs)", *aligned(t.header, rows), "columns:"]
        out += [f"  {h}: {m}" for h, m in t.legend] + [""]
    return "\n".join(out)


def to_markdown(ts: Sequence[Table]) -> str:
    def esc(c: str) -> str:
        return c.replace("|", "\\|")

    out: list[str] = []
    for t in ts:
        out += [f"### {t.study}", ""]
        out += ["| " + " | ".join(esc(h) for h in t.header) + " |", "|" + "---|" * len(t.header)]
        out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in t.rows]
        out += ["", *(f"- **{esc(h)}**: {m}" for h, m in t.legend), ""]
    return "\n".join(out)


def to_csv(header: list[str], rows: list[list[str]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()
