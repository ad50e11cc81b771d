"""Everything before the first judgment: the judge study's settings, conditions, judge text,
run name and plan (packets and the analysis plan, or the import's digests)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from lmaudit.config.execution import without_execution
from lmaudit.errors import InputError
from lmaudit.provenance.digest import file_sha256, json_digest, sha256_text
from lmaudit.provenance.io import dumps_json
from lmaudit.provenance.redact import redact_config
from lmaudit.studies.base import (
    Plan,
)
from lmaudit.studies.judge import disagreement as an
from lmaudit.studies.judge.config import (
    JudgeStudyConfig,
)
from lmaudit.studies.judge.importer import (
    ImportSource,
    import_files,
    import_rows,
    import_source,
    read_execution,
)
from lmaudit.studies.judge.packets import (
    Condition,
    JudgeText,
    Sampling,
    build_packet,
    check_template,
    conditions_from,
    load_candidates,
    load_mapping,
    packet_digests,
)

GROUPS = ("condition", "rubric", "wrapper")  # the study's own config groups
ISOLATION = ("fresh", "shared")


def settings(cfg: DictConfig) -> JudgeStudyConfig:
    obj = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(JudgeStudyConfig), cfg.study))
    assert isinstance(obj, JudgeStudyConfig)
    return obj


def _judge_node(cfg: DictConfig) -> Any:
    if cfg.study.get("condition") is None:
        raise InputError("judge: no condition set selected (judge/condition=all, P0, PA, ...)")
    return cfg.study


def conditions(cfg: DictConfig) -> tuple[list[Condition], str]:
    node = _judge_node(cfg).condition
    specs = OmegaConf.to_container(node.conditions, resolve=True)
    assert isinstance(specs, list)
    return conditions_from(specs, f"judge/condition={node.name}"), str(node.reference)


def judge_text(cfg: DictConfig) -> JudgeText:
    j = _judge_node(cfg)
    text = JudgeText(
        rubric=str(j.rubric.text),
        template=str(j.rubric.template),
        prefix=str(j.wrapper.prefix),
        suffix=str(j.wrapper.suffix),
        readout_turn=str(j.rubric.readout_turn),
        system=None if j.rubric.system is None else str(j.rubric.system),
    )
    check_template(text, f"judge/rubric={j.rubric.name}")
    return text


def sampling(s: JudgeStudyConfig) -> Sampling:
    if s.k < 1 or s.max_tokens < 1 or s.retry.max_attempts < 1:
        raise InputError(
            f"study: k, max_tokens and retry.max_attempts must be >= 1, got "
            f"{s.k}, {s.max_tokens}, {s.retry.max_attempts}"
        )
    if s.isolation not in ISOLATION:
        raise InputError(f"study: field 'isolation' = {s.isolation!r} is not one of {', '.join(ISOLATION)}")
    if not 0.0 < s.alpha < 1.0:
        raise InputError(f"study: field 'alpha' must lie in (0, 1), got {s.alpha}")
    return Sampling(
        k=s.k,
        temperature=s.temperature,
        top_p=s.top_p,
        max_tokens=s.max_tokens,
        seed=s.seed,
        max_attempts=s.retry.max_attempts,
    )


def _judged_run_name(cfg: DictConfig) -> str:
    s = settings(cfg)
    conds = str(_judge_node(cfg).condition.name)
    if s.import_dir:
        return f"import-{Path(s.import_dir).name}-{conds}"
    return f"{conds}-k{s.k}-{s.isolation}-{cfg.model.name}"


def _pattern_endpoints(conds: list[Condition]) -> list[str]:
    """The seed's endpoints 4 and 5, where the set has the unilateral conditions PA and PB."""
    role = an.roles([c.to_json() for c in conds])
    if "PA" not in role or "PB" not in role:
        return []
    pa, pb = role["PA"], role["PB"]
    return [
        f"WRAPPER_ATTRACTION_PATTERN: {pa} and {pb} both decisive, {pa} chooses A and {pb} chooses B",
        f"WRAPPER_AVERSION_PATTERN: {pa} and {pb} both decisive, {pa} chooses B and {pb} chooses A",
    ]


def analysis_plan(cfg: DictConfig) -> dict[str, Any]:
    """The pre-judgment analysis plan (frozen with the packets)."""
    s = settings(cfg)
    conds, ref = conditions(cfg)
    return {
        "reference": ref,
        "conditions": [c.to_json() for c in conds],
        "primary_endpoints": [f"winner-label disagreement {c.id} vs {ref}" for c in conds if c.id != ref]
        + _pattern_endpoints(conds),
        "tie": "TIE is a winner label; a change to or from TIE is a disagreement",
        "orientation": "labels compared in the candidates' original A/B orientation (swapped conditions mapped back)",
        "classification_order": list(an.CLASSES),
        "classification_roles": "P0: unwrapped, PA: A wrapped, PB: B wrapped, PAB: both wrapped (none swapped)",
        "secondary_endpoints": [
            "A/B/TIE counts per condition",
            "mean and median confidence per condition",
            "model wins after unblinding",
            "prompt ids that change",
            "whether the aggregate model ranking changes across P0/PA/PB/PAB (all conditions "
            "where those roles are not all present)",
        ],
        "k": s.k,
        "pairing": "judgment r of a condition with judgment r of the reference; k >= 2 adds the reference's "
        "repeat baseline (r, r+1) for even r",
        "intervals": f"Clopper-Pearson, alpha = {s.alpha}",
        "tests": "exact two-sided sign test of the ordinal shift A > TIE > B against the reference "
        "(McNemar's exact test when there are no TIEs)",
        "invalid": f"kept raw, marked invalid, retried up to {s.retry.max_attempts} attempts in all, counted; "
        "never coerced; a pair with an invalid side is left out and counted",
        "isolation": s.isolation,
    }


def _groups_config(cfg: DictConfig) -> dict[str, Any]:
    """The plan's record of the config: the study's settings, the model, and the judge's
    presentation (its condition set, rubric and wrapper) under ``judge``."""
    study = OmegaConf.to_container(cfg.study, resolve=True)
    assert isinstance(study, dict)
    out = {
        "study": {k: v for k, v in study.items() if k not in GROUPS},
        "model": without_execution(OmegaConf.to_container(cfg.model, resolve=True)),
        "judge": {g: study.get(g) for g in GROUPS},
    }
    return dict(redact_config(out))


def _judged_plan(cfg: DictConfig) -> Plan:
    """The resolved plan: config, input digests, every condition's packet, the analysis plan."""
    s = settings(cfg)
    sampling(s)
    conds, ref = conditions(cfg)
    resolved = _groups_config(cfg)
    if s.import_dir:
        files = import_files(s.import_dir, conds)
        inputs: dict[str, Any] = {
            "import": {cid: {"path": str(p), "sha256": file_sha256(p)} for cid, p in files.items()}
        }
        for extra in ("execution.json", "mapping.json"):
            p = Path(s.import_dir) / extra
            if p.exists():
                inputs[extra.removesuffix(".json")] = {"path": str(p), "sha256": file_sha256(p)}
        body = {
            "study": "judge",
            "mode": "import",
            "config": resolved,
            "inputs": inputs,
            "execution": read_execution(s.import_dir),
        }
        return Plan.make(body, 0)
    text = judge_text(cfg)
    cands = load_candidates(s.candidates_path, s.prompt_ids)
    ids = [c.prompt_id for c in cands]
    inputs = {"candidates": {"path": s.candidates_path, "sha256": file_sha256(s.candidates_path)}}
    if s.mapping_path:
        load_mapping(s.mapping_path, ids)
        inputs["mapping"] = {"path": s.mapping_path, "sha256": file_sha256(s.mapping_path)}
    packets = {c.id: build_packet(c, cands, text) for c in conds}
    aplan = analysis_plan(cfg)
    inputs["rubric"] = {"sha256": text.rubric_sha256}
    inputs["analysis_plan"] = {"sha256": sha256_text(dumps_json(aplan))}  # = analysis_plan.json
    inputs["packets"] = packet_digests(packets)
    body = {
        "study": "judge",
        "mode": "judge",
        "config": resolved,
        "inputs": inputs,
        "reference": ref,
        "rubric": text.rubric,
        "analysis_plan": aplan,
        "packets": packets,
    }
    n = len(conds) * len(cands) * s.k
    return Plan.make(body, n)


# settings added after plans were first frozen: left out of the plan at their defaults, so
# every plan made before they existed (and every frozen registration) keeps its digest
_LATER_KEYS = {"import_path": None, "import_format": "auto", "answers_path": None}


def plan_config(cfg: DictConfig) -> dict[str, Any]:
    """The plan's record of the config (:func:`_groups_config`), without the import
    settings that hold their defaults."""
    out = _groups_config(cfg)
    study = out["study"]
    out["study"] = {k: v for k, v in study.items() if k not in _LATER_KEYS or v != _LATER_KEYS[k]}
    return out


def default_run_name(cfg: DictConfig) -> str:
    s = settings(cfg)
    if s.import_path:
        p = Path(s.import_path)
        return f"import-{p.name}-{cfg.study.condition.name}" if p.is_dir() else f"import-{p.stem}"
    return _judged_run_name(cfg)


def _foreign_plan(cfg: DictConfig, src: ImportSource) -> Plan:
    """The plan of a FastChat or AlpacaEval import: the file's digest, its format, and the
    whole file read once now, so bad input is refused before the run folder exists."""
    conds, _ = conditions(cfg)
    import_rows(src, conds)
    inputs: dict[str, Any] = {
        "import": {src.format: {"path": str(src.path), "sha256": file_sha256(src.path)}}
    }
    if src.answers is not None:
        from lmaudit.interop.fastchat import answer_files

        files = [{"path": str(f), "sha256": file_sha256(f)} for f in answer_files(src.answers)]
        inputs["answers"] = {"path": str(src.answers), "sha256": json_digest(files), "files": files}
    body = {
        "study": "judge",
        "mode": "import",
        "config": plan_config(cfg),
        "inputs": inputs,
        "import_format": src.format,
    }
    return Plan.make(body, 0)


def plan(cfg: DictConfig) -> Plan:
    """The resolved plan (:func:`_judged_plan`), its config recorded by :func:`plan_config`."""
    src = import_source(settings(cfg))
    if src is not None and src.format != "lmaudit":
        return _foreign_plan(cfg, src)
    base = cfg
    if src is not None and src.setting == "study.import_path":  # a folder: the import_dir plan
        base = copy.deepcopy(cfg)
        base.study.import_dir, base.study.import_path = str(src.path), None
    made = _judged_plan(base)
    body = {k: v for k, v in made.doc.items() if k not in ("n_requests", "plan_digest")}
    body["config"] = plan_config(cfg)
    return Plan.make(body, made.n_requests)
