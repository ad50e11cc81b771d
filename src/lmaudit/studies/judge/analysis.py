"""From measurement rows to results.json (:func:`analyze_rows`), the audit record's judge
section (:func:`audit_section`) and a results body of a plan's shape for checking a
registration's predictions (:func:`results_template`). ``analyze_rows`` is pure apart from
reading the hidden mapping to unblind; the views the pipeline logs are in :mod:`.views`."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from lmaudit.errors import InputError
from lmaudit.studies.judge.disagreement import CLASSES, NOT_CLASSIFIABLE, Judgment, analyze
from lmaudit.studies.judge.importer import import_rows, import_source
from lmaudit.studies.judge.length import length_section
from lmaudit.studies.judge.order_swap import order_swap
from lmaudit.studies.judge.packets import load_candidates, load_mapping
from lmaudit.studies.judge.planning import conditions, settings
from lmaudit.studies.judge.results import CombinedDesign, Deviation, JudgeResults, MappingFile, Params
from lmaudit.studies.judge.sections import ConditionValidity, Validity

__all__ = ["analyze_rows", "audit_section", "results_template"]

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


def _validity(judg_rows: list[dict[str, Any]], cids: list[str]) -> Validity:
    by: dict[str, ConditionValidity] = {}
    for cid in cids:
        rs = [r for r in judg_rows if r["condition"] == cid]
        finals = [r for r in rs if r["final"]]
        by[cid] = ConditionValidity(
            judgments=len(finals),
            valid=sum(bool(r["valid"]) for r in finals),
            invalid=sum(not r["valid"] for r in finals),
            attempts=len(rs),
            retries=sum(r["attempt"] > 0 for r in rs),
            recovered_by_retry=sum(bool(r["valid"]) and r["attempt"] > 0 for r in finals),
            errors=dict(Counter(str(r.get("error")) for r in rs if not r["valid"])),
        )
    total = {
        k: sum(getattr(v, k) for v in by.values())
        for k in ("judgments", "valid", "invalid", "attempts", "retries", "recovered_by_retry")
    }
    return Validity(**total, by_condition=by)


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


def analyze_rows(cfg: DictConfig, rows: list[dict[str, Any]], source: str) -> JudgeResults:
    """Pure: measurement rows + config in, typed results out (no model, no clock)."""
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
    deviations = _deviations(designs, isolations)
    return JudgeResults(
        study="judge",
        mode=mode,
        # the measurement's design record, read as the typed record it is (with the conditions
        # and the isolation the judgments carry)
        design=CombinedDesign.of(design, f"{source}: design record"),
        deviations=tuple(Deviation(id=str(d["id"]), description=str(d["description"])) for d in deviations),
        params=Params(alpha=alpha, reference=reference),
        mapping=MappingFile(path=mapping_path) if mapping_path else None,
        validity=_validity(judg, cids),
        n_prompts=result.n_prompts,
        k=result.k,
        conditions_analysed=result.conditions_analysed,
        reference=result.reference,
        conditions=result.conditions,
        disagreement=result.disagreement,
        classification=result.classification,
        patterns=result.patterns,
        items=result.items,
        model_wins=result.model_wins,
        readout=result.readout,
        order_swap=order_swap(judg, alpha),  # only imports of pairs judged in both orders
        length=length_section(judg, alpha),  # only imports whose files hold the answers
    )


CLASS_NAMES = (*CLASSES, NOT_CLASSIFIABLE)


def audit_section(results: JudgeResults) -> dict[str, Any]:
    """The audit record's ``judge`` section: judge identity, rubric digest, isolation, seeds,
    deviations."""
    d = results.design
    return {
        "judge": d.judge.to_json() if d.judge else None,
        "rubric_sha256": d.rubric_sha256,
        "isolation": list(d.isolation) if isinstance(d.isolation, tuple) else d.isolation,
        "deviations": [x.to_json() for x in results.deviations],
        "seed": d.seed,
        "seed_rule": d.seed_rule,
        "k": d.k,
        "mode": results.mode,
        "invalid": results.validity.invalid,
    }


def results_template(cfg: DictConfig) -> dict[str, Any]:
    """A results dict of this plan's shape (every judgment a valid 'A'), to check at freeze
    time that predictions name real metrics."""
    s = settings(cfg)
    conds, _ = conditions(cfg)
    src = import_source(s)
    if src is not None:
        return analyze_rows(cfg, import_rows(src, conds), "<template>").to_json()
    ids = [c.prompt_id for c in load_candidates(s.candidates_path, s.prompt_ids)]
    rows: list[dict[str, Any]] = [{"kind": "design", "source": "judged", "isolation": s.isolation}]
    for c in conds:
        for pid in ids:
            for r in range(s.k):
                rows.append(
                    {
                        "kind": "judgment",
                        "source": "judged",
                        "condition": c.id,
                        "item": pid,
                        "replicate": r,
                        "attempt": 0,
                        "final": True,
                        "swap": c.swap,
                        "wrap": sorted(c.wrap),
                        "valid": True,
                        "winner": "A",
                        "winner_original": "B" if c.swap else "A",
                        "confidence": 1.0,
                        "reason": "-",
                    }
                )
    return analyze_rows(cfg, rows, "<template>").to_json()
