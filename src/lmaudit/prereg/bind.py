"""What the pipeline calls: freeze a registration, refuse a run whose plan differs from its
frozen one, and score the registered predictions after analysis.

``name`` is the registration's name (``prereg.name``), already checked by the pipeline as one
path component."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from lmaudit import __version__
from lmaudit.errors import PreregError
from lmaudit.prereg.files import (
    build_registration,
    load_registration,
    prereg_path,
    verify,
    without_data,
    write_registration,
)
from lmaudit.prereg.predictions import parse_predictions, unknown_metrics
from lmaudit.prereg.predictions import score as score_predictions
from lmaudit.provenance.digest import file_sha256
from lmaudit.studies.base import Plan, Study, StudyResult


class Registration(NamedTuple):
    """A frozen registration as a run uses it: the frozen document, its path, and the
    registration file as it is now (path and sha256)."""

    doc: dict[str, Any]
    path: Path
    file: dict[str, str]


def _registrations_folder(cfg: DictConfig) -> Path:
    """Where Hydra read the registration from: the ``prereg/`` folder of its primary config
    source when run by ``run.py``; ``paths.registrations`` when composed without Hydra's main
    (the compose API of tests and notebooks)."""
    if HydraConfig.initialized():
        for source in HydraConfig.get().runtime.config_sources:
            if source.provider == "main" and source.schema == "file":
                return Path(source.path) / "prereg"
    return Path(cfg.paths.registrations)


def registration_file(cfg: DictConfig, name: str) -> dict[str, str]:
    """The registration's own file (``<conf>/prereg/<name>.yaml``): its path (relative to the
    working directory when below it, so records agree across clones) and the sha256 of its bytes."""
    path = _registrations_folder(cfg) / f"{name}.yaml"
    if not path.is_file():
        raise PreregError(
            f"{path}: registration {name!r} has no file here; a frozen registration seals its file"
        )
    shown = path.resolve()
    if Path.cwd() in shown.parents:
        shown = shown.relative_to(Path.cwd())
    return {"path": str(shown), "sha256": file_sha256(path)}


def _check_file(doc: dict[str, Any], current: dict[str, str], path: Path) -> None:
    """Refuse a registration file edited since it was frozen; a registration frozen before
    files were sealed is used with a warning (its file's digest goes into the results)."""
    sealed = doc.get("registration_file")
    if sealed is None:
        print(
            f"{path}: frozen before registration files were sealed; scoring it against "
            f"{current['path']} as it is now (sha256 {current['sha256'][:12]}, recorded in the results)"
        )
    elif sealed.get("sha256") != current["sha256"]:
        raise PreregError(
            f"{path}: refusing to run: {current['path']} was edited after it was frozen (sha256 "
            f"{current['sha256'][:12]}, frozen {str(sealed.get('sha256'))[:12]}); restore the file, "
            "or freeze the new design under a new prereg name"
        )


def data_keys(cfg: DictConfig, study: Study) -> tuple[str, ...]:
    """The plan keys an open registration leaves out (none for a bound one)."""
    name = str(cfg.prereg.name)
    data = str(cfg.prereg.get("data") or "bound")
    if data not in ("bound", "open"):
        raise PreregError(f"conf/prereg/{name}: field 'data' = {data!r} is not bound or open")
    if data == "open" and not study.data_keys:
        raise PreregError(f"conf/prereg/{name}: data: open, but the {study.name} study declares no data keys")
    return study.data_keys if data == "open" else ()


def freeze(cfg: DictConfig, study: Study, plan: Plan, name: str) -> Path:
    """``stage=freeze``: write ``prereg/<study>/<name>.json`` (never over a different one)."""
    source = f"conf/prereg/{name}"
    preds = parse_predictions(OmegaConf.to_container(cfg.prereg.predictions, resolve=True), source)
    keys = data_keys(cfg, study)
    bound = without_data(plan.doc, keys)
    template = study.results_template(cfg) if not keys else None
    if template is not None:
        bad = unknown_metrics(preds, template)
        if bad:
            raise PreregError(
                f"{source}: predictions name metrics that {study.name} results do not have: "
                + "; ".join(bad)
                + ". Use dotted paths into results.json (e.g. counts.saturated)."
            )
    rules = study.plan_config(cfg)["study"]
    doc = build_registration(
        study=study.name,
        name=name,
        plan=bound,
        decision_rules=without_data({"config": {"study": rules}}, keys)["config"]["study"],
        predictions=preds,
        lmaudit_version=__version__,
        data_keys=keys,
        registration_file=registration_file(cfg, name),
    )
    path = prereg_path(cfg.paths.prereg, study.name, name)
    if write_registration(path, doc):
        print(f"froze {path} (plan digest {bound['plan_digest'][:12]}, {len(preds)} predictions)")
    else:
        print(f"{path} already holds this registration; nothing written")
    return path


def check(cfg: DictConfig, study: Study, plan: Plan, name: str) -> Registration:
    """Load the frozen registration ``name`` and refuse to go on when the plan or the
    predictions differ from it. Happens before any model call."""
    preds = parse_predictions(
        OmegaConf.to_container(cfg.prereg.predictions, resolve=True), f"conf/prereg/{name}"
    )
    keys = data_keys(cfg, study)
    path = prereg_path(cfg.paths.prereg, study.name, name)
    doc = load_registration(path)
    if list(doc.get("data_keys", [])) != list(keys):
        raise PreregError(
            f"{path}: frozen with data keys {doc.get('data_keys', [])}, but conf/prereg/{name} says "
            f"{list(keys)}; restore the registration's config"
        )
    verify(doc, without_data(plan.doc, keys), preds, path)
    current = registration_file(cfg, name)
    _check_file(doc, current, path)
    return Registration(doc, path, current)


def score_results(
    result: StudyResult, reg: Registration, plan: Plan | None, measurements_sha256: str
) -> dict[str, Any]:
    """The results body with the registration's identity and every prediction scored."""
    doc, path = reg.doc, reg.path
    results = result.doc
    results["prereg"] = {
        "name": doc["name"],
        "path": str(path),
        "file_digest": doc["file_digest"],
        "frozen_utc": doc["frozen_utc"],
        "plan_digest": doc["plan_digest"],
        # the registration file scored under, and whether the frozen registration seals it
        "registration_file": {**reg.file, "sealed": "registration_file" in doc},
    }
    if doc.get("data_keys"):  # an open registration: record the data these scores rest on
        results["prereg"]["data"] = "open"
        results["prereg"]["data_scored"] = {
            "measurements_sha256": measurements_sha256,
            "plan_inputs": plan.inputs if plan is not None else None,
        }
    results["predictions"] = score_predictions(
        parse_predictions(doc["predictions"], str(path)), {**result.scoreable, **results}
    )
    return results


def prediction_tags(result: StudyResult) -> dict[str, str]:
    """Each scored prediction's outcome, as MLflow tags."""
    return {f"prediction.{p.id}": p.outcome for p in result.predictions}


def prediction_metrics(result: StudyResult) -> dict[str, float]:
    """Each scored prediction's numeric observed value, as MLflow metrics."""
    out = {}
    for p in result.predictions:
        v = p.observed
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[f"prediction.{p.id}.observed"] = float(v)
    return out
