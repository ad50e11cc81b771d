"""Error bars for the scores another tool's log reports (docs/interop.md): per model and task,
the mean score with the standard error that treats every score as independent, the one
clustered by sample (Miller 2024, arXiv 2411.00640), the design effect, ICC(1), and the stderr
the log reports, said in one sentence.

The readers keep each log file's primary scores in its ``log_audit`` row (``scores``:
``scorer``, ``clusters`` sample -> scores in epoch order, ``log`` with what the tool reported);
:func:`error_bars_section` is a pure function of those rows. Scores of one model and task are
pooled over its log files, clustered by sample id.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from lmaudit.errors import InputError
from lmaudit.interop.sections import ErrorBar
from lmaudit.stats.clustered import clustered_mean

__all__ = ["AGREES", "check_scores", "error_bars_metrics", "error_bars_section", "sentence"]

#: a log's stderr within this factor of the clustered one is said to account for the clustering
AGREES = 1.1


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def check_scores(scores: Any, where: str) -> dict[str, Any]:
    """The ``scores`` of a ``log_audit`` row, or InputError naming the first field it has wrong."""
    if not isinstance(scores, dict) or not isinstance(scores.get("scorer"), str):
        raise InputError(f"{where}: field 'scores.scorer' of a log_audit row must be a string")
    clusters = scores.get("clusters")
    if not isinstance(clusters, dict) or not clusters:
        raise InputError(f"{where}: field 'scores.clusters' must be a non-empty object (sample -> scores)")
    for sid, values in clusters.items():
        if not isinstance(values, list) or not values or not all(_number(v) for v in values):
            raise InputError(
                f"{where}: field 'scores.clusters.{sid}' must be a non-empty list of finite numbers"
            )
    log = scores.get("log")
    if not isinstance(log, dict):
        raise InputError(f"{where}: field 'scores.log' must be an object")
    for key in ("accuracy", "stderr"):
        if log.get(key) is not None and not _number(log[key]):
            raise InputError(f"{where}: field 'scores.log.{key}' must be a finite number or null")
    return scores


def _times(x: float) -> str:
    return f"x{x:.2f}" if x < 1.0 else f"x{x:.1f}"


def sentence(entry: Mapping[str, Any]) -> str:
    """What the clustered standard error does to the log's own, in one plain sentence."""
    clustered, naive, log = entry["se_clustered"], entry["se_naive"], entry["log_stderr"]
    independent = (
        f"treating the {entry['n']} scores as independent gives {naive:.3f}"
        + (f" (design effect {entry['design_effect']:.2f})" if entry["design_effect"] is not None else "")
        if naive is not None
        else f"the {entry['n']} score(s) give no naive standard error"
    )
    if log is None:
        return f"the log reports no stderr; clustered by sample it is {clustered:.3f}; {independent}"
    if log == 0.0 or clustered / log > AGREES:
        ratio = f" ({_times(clustered / log)})" if log else ""
        return (
            f"the log's stderr {log:.3f} understates the uncertainty; clustered by sample it is "
            f"{clustered:.3f}{ratio}; {independent}"
        )
    if clustered / log < 1.0 / AGREES:
        return (
            f"the log's stderr {log:.3f} overstates the uncertainty; clustered by sample it is "
            f"{clustered:.3f} ({_times(clustered / log)}); {independent}"
        )
    return (
        f"the log's stderr {log:.3f} accounts for the clustering (clustered by sample it is {clustered:.3f}, "
        f"{_times(clustered / log)}); {independent}"
    )


def error_bars_section(
    rows: Iterable[Mapping[str, Any]], source: str = "<log_audit rows>"
) -> dict[str, dict[str, ErrorBar]]:
    """``{model: {task: error bar}}`` of the ``log_audit`` rows that carry scores (pure); the
    study's own question beside each (``epochs_persist``) is left for it to fill in."""
    pooled: dict[tuple[str, str], dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: (str(r["family"]), str(r["source"]), list(r["files"]))):
        scores = r.get("scores")
        if not scores:
            continue
        task = str((r.get("facts") or {}).get("task") or r["source"])
        cell = pooled.setdefault(
            (str(r["family"]), task),
            {"format": r["format"], "scorers": [], "clusters": {}, "logs": []},
        )
        if scores["scorer"] not in cell["scorers"]:
            cell["scorers"].append(scores["scorer"])
        for sid, values in scores["clusters"].items():
            cell["clusters"].setdefault(str(sid), []).extend(float(v) for v in values)
        cell["logs"].append({"files": list(r["files"]), **scores["log"]})
    out: dict[str, dict[str, ErrorBar]] = {}
    for (family, task), cell in sorted(pooled.items()):
        groups = [cell["clusters"][sid] for sid in sorted(cell["clusters"])]
        cm = clustered_mean(groups)
        one = cell["logs"][0] if len(cell["logs"]) == 1 else None
        entry = {
            "format": cell["format"],
            "scorer": ",".join(cell["scorers"]),
            "n": cm.n,
            "clusters": cm.clusters,
            "accuracy": cm.mean,
            "binary": cm.binary,
            "se_naive": cm.se_naive,
            "se_clustered": cm.se_clustered,
            "design_effect": cm.design_effect,
            "icc": cm.icc,
            # several logs pooled: each reports its own stderr (in "logs"), none is the pool's
            "log_stderr": one["stderr"] if one is not None else None,
            "log_accuracy": one["accuracy"] if one is not None else None,
            "logs": cell["logs"],
        }
        entry["sentence"] = sentence(entry)
        out.setdefault(family, {})[task] = ErrorBar.from_json({**entry, "epochs_persist": None}, source)
    return out


def error_bars_metrics(section: Mapping[str, Mapping[str, ErrorBar]], key: Any) -> dict[str, float]:
    """MLflow metrics ``error_bars.<model key>.<task key>.<number>`` (``key``: a name as a metric
    key takes it),
    and over every model and task the largest design effect and the largest ratio of the
    clustered standard error to the log's own (``error_bars.max_design_effect``,
    ``error_bars.max_clustered_over_log``)."""
    out: dict[str, float] = {}
    entries = [e for tasks in section.values() for e in tasks.values()]
    effects = [e.design_effect for e in entries if e.design_effect is not None]
    ratios = [r for e in entries if (r := e.clustered_over_log) is not None]
    if effects:
        out["error_bars.max_design_effect"] = max(effects)
    if ratios:
        out["error_bars.max_clustered_over_log"] = max(ratios)
    for family, tasks in section.items():
        for task, e in tasks.items():
            base = f"error_bars.{key(family)}.{key(task)}"
            for name in (
                "n",
                "clusters",
                "accuracy",
                "se_naive",
                "se_clustered",
                "design_effect",
                "icc",
                "log_stderr",
            ):
                if (v := getattr(e, name)) is not None:
                    out[f"{base}.{name}"] = float(v)
    return out
