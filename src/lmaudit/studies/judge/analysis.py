"""From measurement rows to results.json, and the views the pipeline logs (metrics, tags,
summary, figure data). ``analyze_rows`` is pure apart from reading the hidden mapping to unblind."""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from lmaudit.provenance.io import InputError
from lmaudit.studies.judge.disagreement import CLASSES, NOT_CLASSIFIABLE, Judgment, analyze
from lmaudit.studies.judge.length import length_section
from lmaudit.studies.judge.order_swap import order_swap
from lmaudit.studies.judge.packets import load_mapping
from lmaudit.studies.judge.report import order_swap as order_swap_report

__all__ = ["analyze_rows", "headline", "metrics", "plot_data", "summary", "tags"]

_JUDGMENT_FIELDS = (
    "condition",
    "item",
    "replicate",
    "attempt",
    "final",
    "valid",
    "winner_original",
    "confidence",
    "swap",
    "wrap",
)


def _config_conditions(cfg: DictConfig) -> tuple[list[dict[str, Any]], str]:
    node = cfg.study
    if node.get("condition") is None:
        return [], "P0"
    specs = OmegaConf.to_container(node.condition.conditions, resolve=True)
    assert isinstance(specs, list)
    out = [
        {"id": str(c["id"]), "wrap": sorted(c.get("wrap") or []), "swap": bool(c.get("swap"))} for c in specs
    ]
    return out, str(node.condition.reference)


def _check(row: dict[str, Any], where: str) -> None:
    missing = [f for f in _JUDGMENT_FIELDS if f not in row]
    if missing:
        raise InputError(f"{where}: missing field(s) {missing}")
    w = row["winner_original"]
    if row["valid"] and w not in ("A", "B", "TIE"):
        raise InputError(f"{where}: field 'winner_original' = {w!r} is not A, B or TIE on a valid judgment")
    if not row["valid"] and w is not None:
        raise InputError(
            f"{where}: an invalid judgment carries winner {w!r}; invalid judgments have no label"
        )


def _conditions(
    rows: list[dict[str, Any]], cfg_specs: list[dict[str, Any]], source: str
) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for r in rows:
        spec = {"id": r["condition"], "wrap": sorted(r["wrap"]), "swap": bool(r["swap"])}
        old = seen.setdefault(r["condition"], spec)
        if old != spec:
            raise InputError(f"{source}: condition {r['condition']!r} appears as {old} and as {spec}")
    for c in cfg_specs:
        if c["id"] in seen and seen[c["id"]] != c:
            raise InputError(
                f"{source}: condition {c['id']!r} was measured as {seen[c['id']]} but the "
                f"config defines it as {c}"
            )
    order = [c["id"] for c in cfg_specs if c["id"] in seen] + [
        k for k in seen if k not in {c["id"] for c in cfg_specs}
    ]
    return [seen[k] for k in order]


def _validity(judg_rows: list[dict[str, Any]], cids: list[str]) -> dict[str, Any]:
    by: dict[str, Any] = {}
    for cid in cids:
        rs = [r for r in judg_rows if r["condition"] == cid]
        finals = [r for r in rs if r["final"]]
        by[cid] = {
            "judgments": len(finals),
            "valid": sum(bool(r["valid"]) for r in finals),
            "invalid": sum(not r["valid"] for r in finals),
            "attempts": len(rs),
            "retries": sum(r["attempt"] > 0 for r in rs),
            "recovered_by_retry": sum(bool(r["valid"]) and r["attempt"] > 0 for r in finals),
            "errors": dict(Counter(str(r.get("error")) for r in rs if not r["valid"])),
        }
    total = {
        k: sum(v[k] for v in by.values())
        for k in ("judgments", "valid", "invalid", "attempts", "retries", "recovered_by_retry")
    }
    return {**total, "by_condition": by}


def _deviations(designs: list[dict[str, Any]], isolations: set[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for d in designs:
        out += list(d.get("deviations") or [])
    if "shared" in isolations and not any(x.get("id") == "shared_context" for x in out):
        note = next((d.get("execution", {}).get("note") for d in designs if d.get("execution")), None)
        out.append(
            {
                "id": "shared_context",
                "description": "judgments were made in a shared context, not a fresh "
                "context per judgment (recorded by the execution)" + (f": {note}" if note else ""),
            }
        )
    if "unknown" in isolations:
        out.append(
            {
                "id": "isolation_unknown",
                "description": "the execution does not record whether each judgment had a fresh context",
            }
        )
    return out


def analyze_rows(cfg: DictConfig, rows: list[dict[str, Any]], source: str) -> dict[str, Any]:
    """Pure: measurement rows + config in, results dict out (no model, no clock)."""
    designs, judg, readouts = [], [], []
    for i, r in enumerate(rows, start=1):
        kind = r.get("kind") if isinstance(r, dict) else None
        if kind == "design":
            designs.append(r)
        elif kind == "judgment":
            _check(r, f"{source}: record {i}")
            judg.append(r)
        elif kind == "readout":
            readouts.append(r)
        else:
            raise InputError(
                f"{source}: record {i}: field 'kind' = {kind!r} is not design, judgment or readout"
            )
    if not judg:
        raise InputError(f"{source}: no judgments to analyse")
    cfg_specs, reference = _config_conditions(cfg)
    conds = _conditions(judg, cfg_specs, source)
    cids = [c["id"] for c in conds]
    items = list(dict.fromkeys(r["item"] for r in judg))
    finals: list[Judgment] = []
    seen: set[tuple[str, str, int]] = set()
    n_attempts = Counter((r["condition"], r["item"], int(r["replicate"])) for r in judg)
    for r in judg:
        if not r["final"]:
            continue
        key = (r["condition"], r["item"], int(r["replicate"]))
        if key in seen:
            raise InputError(
                f"{source}: two final judgments for condition {key[0]} prompt {key[1]} replicate {key[2]}"
            )
        seen.add(key)
        attempts = n_attempts[key]
        finals.append(
            Judgment(
                condition=key[0],
                item=key[1],
                replicate=key[2],
                valid=bool(r["valid"]),
                winner=r["winner_original"],
                confidence=r["confidence"],
                reason=r.get("reason"),
                attempts=attempts,
                error=r.get("error"),
            )
        )
    mode = "import" if any(r.get("source") == "import" for r in judg) else "judge"
    study = cfg.study
    mapping_path = None
    folder = study.get("import_dir") or study.get("import_path")
    if mode == "import" and folder and Path(str(folder)).is_dir():
        p = Path(str(folder)) / "mapping.json"
        mapping_path = str(p) if p.exists() else None
    elif mode == "judge" and study.get("mapping_path"):
        mapping_path = str(study.mapping_path)
    mapping = load_mapping(mapping_path, items) if mapping_path else None
    if mapping is None and any(r.get("pair") for r in judg):  # imported pairs name their models
        mapping = {r["item"]: dict(r["pair"]["models"]) for r in judg if r.get("pair")}
    alpha = float(study.get("alpha", 0.05))
    result = analyze(
        finals,
        conditions=conds,
        reference=reference,
        items=items,
        alpha=alpha,
        mapping=mapping,
        readouts=readouts,
    )
    isolations = {str(r.get("isolation", "unknown")) for r in judg}
    design = {k: v for k, v in (designs[0] if designs else {}).items() if k != "kind"}
    design["isolation"] = sorted(isolations)[0] if len(isolations) == 1 else sorted(isolations)
    design["conditions"] = conds
    out = {
        "study": "judge",
        "mode": mode,
        "design": design,
        "deviations": _deviations(designs, isolations),
        "params": {"alpha": alpha, "reference": reference},
        "mapping": {"path": mapping_path} if mapping_path else None,
        "validity": _validity(judg, cids),
        **result,
    }
    swapped = order_swap(judg, alpha)  # only imports of pairs judged in both orders
    if swapped is not None:
        out["order_swap"] = swapped
    length = length_section(judg, alpha)  # only imports whose files hold the answers
    if length is not None:
        out["length"] = length
    return out


def _primary(results: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for d in results["disagreement"] if "repeat" not in d["comparison"]]


def headline(results: dict[str, Any]) -> float:
    """The pooled winner-label disagreement rate against the reference (NaN if no comparison)."""
    prim = _primary(results)
    n = sum(d["n"] for d in prim)
    return sum(d["changed"] for d in prim) / n if n else float("nan")


def _key(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-/ ]", "_", name)


def metrics(results: dict[str, Any]) -> dict[str, float]:
    v = results["validity"]
    out: dict[str, float] = {
        "n_prompts": results["n_prompts"],
        "k": results["k"],
        "n_judgments": v["judgments"],
        "n_invalid": v["invalid"],
        "n_retries": v["retries"],
    }
    h = headline(results)
    if not math.isnan(h):
        out["disagreement_rate"] = h
    for cid, s in results["conditions"].items():
        for lab, n in s["counts"].items():
            out[f"{_key(cid)}.n_{lab}"] = n
        for stat in ("mean", "median"):
            x = s["confidence"][stat]
            if x is not None:
                out[f"{_key(cid)}.confidence_{stat}"] = x
    for d in results["disagreement"]:
        k = "repeat" if "repeat" in d["comparison"] else _key(d["condition"])
        out[f"disagreement.{k}.changed"] = d["changed"]
        out[f"disagreement.{k}.n"] = d["n"]
        if d["rate"] is not None:
            out[f"disagreement.{k}.rate"] = d["rate"]
        out[f"disagreement.{k}.ci_high"] = d["ci"]["high"]
        out[f"disagreement.{k}.sign_p"] = d["sign_test"]["p"]
    cls = results["classification"]
    if cls.get("evaluable"):
        for c, n in cls["counts"].items():
            out[f"class.{c}"] = n
    pat = results.get("patterns") or {}
    if pat.get("evaluable"):
        out["pattern.n"] = pat["n"]
        out["pattern.n_both_decisive"] = pat["n_both_decisive"]
        for kind in ("attraction", "aversion"):
            out[f"pattern.{kind}"] = pat[kind]["count"]
    mw = results["model_wins"]
    if mw.get("evaluable"):
        for cid, w in mw["by_condition"].items():
            for m, n in w["wins"].items():
                out[f"wins.{_key(cid)}.{_key(m)}"] = n
    if "order_swap" in results:
        out.update(order_swap_report.metrics(results["order_swap"]))
    if "length" in results:
        out.update(order_swap_report.length_metrics(results["length"]))
    return out


def tags(results: dict[str, Any]) -> dict[str, str]:
    d = results["design"]
    iso = d.get("isolation")
    t = {
        "mode": str(results["mode"]),
        "isolation": iso if isinstance(iso, str) else ",".join(iso),
        "deviations": ",".join(x["id"] for x in results["deviations"]) or "none",
        "conditions": ",".join(results["conditions_analysed"]),
    }
    mw = results["model_wins"]
    if mw.get("evaluable"):
        t["ranking_changes"] = str(mw["ranking_changes"])
    fmt = results["design"].get("format")
    if fmt:
        t["import_format"] = str(fmt)
    return t


def summary(results: dict[str, Any]) -> str:
    parts = [f"{d['comparison']}: {d['changed']}/{d['n']}" for d in results["disagreement"]]
    cs = results["conditions"]
    counts = "; ".join(
        f"{cid} A {cs[cid]['counts']['A']} B {cs[cid]['counts']['B']} TIE {cs[cid]['counts']['TIE']} "
        f"invalid {cs[cid]['counts']['INVALID']}"
        for cid in results["conditions_analysed"]
    )
    cls = results["classification"]
    classes = (
        ", ".join(f"{c} {n}" for c, n in cls["counts"].items() if n)
        if cls.get("evaluable")
        else "classification needs P0, PA, PB and PAB"
    )
    pat = results.get("patterns") or {}
    if pat.get("evaluable"):
        classes += (
            f" | patterns: attraction {pat['attraction']['count']}, aversion {pat['aversion']['count']}"
            f" of {pat['n_both_decisive']} both decisive"
        )
    devs = ",".join(x["id"] for x in results["deviations"]) or "none"
    swap = f" | {order_swap_report.summary(results['order_swap'])}" if "order_swap" in results else ""
    if "length" in results:
        swap += f" | {order_swap_report.length_summary(results['length'])}"
    return (
        f"judge ({results['mode']}): {results['n_prompts']} prompts x k={results['k']} | "
        f"{'; '.join(parts) or 'no comparison (single condition)'} | {counts} | {classes} | "
        f"invalid {results['validity']['invalid']}/{results['validity']['judgments']} | deviations: {devs}"
        f"{swap}"
    )


def plot_data(results: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Figure data for ``dvc plots``: the condition grid, the disagreement table, confidences."""
    grid = []
    for it in results["items"]:
        for cid, labels in it["labels"].items():
            for r, lab in enumerate(labels):
                grid.append(
                    {"item": it["item"], "condition": cid, "replicate": r, "winner": lab or "INVALID"}
                )
    dis = [
        {
            "comparison": d["comparison"],
            "changed": d["changed"],
            "n": d["n"],
            "rate": d["rate"] if d["rate"] is not None else "",
            "ci_low": d["ci"]["low"],
            "ci_high": d["ci"]["high"],
            "sign_p": d["sign_test"]["p"],
        }
        for d in results["disagreement"]
    ]
    conf = [
        {"condition": cid, "confidence": x}
        for cid, s in results["conditions"].items()
        for x in s["confidence"]["values"]
    ]
    out = {"grid": grid, "disagreement": dis, "confidence": conf}
    if "order_swap" in results:
        out["order_swap"] = order_swap_report.plot_rows(results["order_swap"])
    return out


CLASS_NAMES = (*CLASSES, NOT_CLASSIFIABLE)
