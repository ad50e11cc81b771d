"""The measured model: which model a run measured, as one typed record.

The pipeline writes it once into the run's audit record (section ``measured_model``) and carries
it in the run context (``RunContext.measured_model``) while the model answers;
:func:`read_measured_model` is the one way to read it back (the MLflow ``model`` tag, the audit
record's ``measured_under``, reports, the judge's identity, ``lmaudit compare``). Audit records
written before the section existed are read from the fields that named the model then.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lmaudit.errors import InputError
from lmaudit.provenance.io import read_json

#: the audit record's section holding the record
SECTION = "measured_model"


@dataclass(frozen=True)
class MeasuredModel:
    """Which model a run measured.

    ``name``: the model's configured name (``model.name`` of the run's plan config);
    ``backend``: the backend that serves it (``model.backend``: ``hf``, ``openai``, ``sim``,
    ``import`` ...); ``identity`` and ``digest``: the backend's resolved identity (model id,
    revision, files) and its digest, when a model answered in this run; ``imported``: the run's
    measurements came from elsewhere (no model answered)."""

    name: str
    backend: str | None = None
    identity: Mapping[str, Any] = field(default_factory=dict)
    digest: str | None = None
    imported: bool = False

    @property
    def tag(self) -> str:
        """The model as one word for tables and MLflow: its name, or ``imported``."""
        return "imported" if self.imported else self.name

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "identity": dict(self.identity)}

    @classmethod
    def from_json(cls, doc: Any, where: str) -> MeasuredModel:
        """The record from its JSON form; InputError naming ``where`` and the field when malformed."""
        if not isinstance(doc, Mapping):
            raise InputError(f"{where}: section {SECTION!r} is not a JSON object")
        if not isinstance(doc.get("name"), str):
            raise InputError(f"{where}: field '{SECTION}.name' is missing or not a string")
        identity = doc.get("identity") or {}
        if not isinstance(identity, Mapping):
            raise InputError(f"{where}: field '{SECTION}.identity' is not a JSON object")
        backend, digest = doc.get("backend"), doc.get("digest")
        return cls(
            name=doc["name"],
            backend=None if backend is None else str(backend),
            identity=dict(identity),
            digest=None if digest is None else str(digest),
            imported=bool(doc.get("imported", False)),
        )


def _at(doc: Any, *keys: str) -> Any:
    for k in keys:
        doc = doc.get(k) if isinstance(doc, Mapping) else None
    return doc


def read_measured_model(
    audit: Mapping[str, Any], plan: Mapping[str, Any] | None = None, *, where: str = "audit record"
) -> MeasuredModel:
    """The measured model of a run from its audit record (``plan``: its ``plan.json``, which
    names the model of records written before the ``measured_model`` section existed).
    InputError naming ``where`` when neither names a model."""
    if SECTION in audit:
        return MeasuredModel.from_json(audit[SECTION], where)
    # the older shape: the plan's (or the MLflow section's) model, the backend's identity
    measure = audit.get("measure") or {}
    identity = measure.get("backend_identity") if isinstance(measure, Mapping) else None
    identity = identity if isinstance(identity, Mapping) else {}
    model = _at(plan, "config", "model") or _at(audit, "mlflow", "params", "model")
    model = model if isinstance(model, Mapping) else {}
    name = model.get("name") or identity.get("model") or identity.get("agent")
    if name is None:
        raise InputError(
            f"{where}: no measured model recorded (no section {SECTION!r}, no plan config.model)"
        )
    digest = measure.get("backend_digest") if isinstance(measure, Mapping) else None
    return MeasuredModel(
        name=str(name),
        backend=None if model.get("backend") is None else str(model["backend"]),
        identity=dict(identity),
        digest=None if digest is None else str(digest),
        imported=bool(measure) and measure.get("backend") is None and not identity,
    )


def read_run_measured_model(run_dir: Path, plan: Mapping[str, Any] | None = None) -> MeasuredModel:
    """:func:`read_measured_model` of a run folder: its ``audit_record.json``, and ``plan`` (its
    ``plan.json``, read when not given)."""
    audit_path, plan_path = run_dir / "audit_record.json", run_dir / "plan.json"
    audit = read_json(audit_path) if audit_path.is_file() else {}
    if plan is None and plan_path.is_file():
        plan = read_json(plan_path)
    if not isinstance(audit, Mapping):
        raise InputError(f"{audit_path}: not a JSON object")
    return read_measured_model(audit, plan if isinstance(plan, Mapping) else None, where=str(audit_path))
