"""The check of a composed config against its schemas, before anything runs.

:func:`validate` walks a composed config against its schemas (the root, the model's by its
backend, the selected study's with its groups, nested dataclasses and lists of them; the ranges
are declared with :func:`lmaudit.config.ranges.ranged`) and raises one :class:`ConfigRangeError`
whose single line names every field out of range and the range it must lie in. The pipeline
calls it first thing, before a plan is built or a run directory exists.
"""

from __future__ import annotations

import dataclasses

from omegaconf import DictConfig, OmegaConf

from lmaudit.backends.registry import backend_names, backend_schema
from lmaudit.config.keys import undeclared
from lmaudit.config.ranges import validate_node
from lmaudit.config.schema import RootConfig
from lmaudit.config.studies import study_schemas
from lmaudit.errors import ConfigRangeError, UndeclaredKeyError

__all__ = ["validate"]


def validate(cfg: DictConfig) -> None:
    """Check every ranged field of a composed config: the root, the model (by its backend's
    schema), the registration, and the selected study with its groups. Raises
    :class:`ConfigRangeError` naming each field out of range and the range it must lie in;
    first, :class:`UndeclaredKeyError` for a key no schema declares."""
    unknown = undeclared(cfg)
    if unknown:
        raise UndeclaredKeyError(
            "config keys no schema declares: " + "; ".join(unknown) + " (a '+' override adds a key "
            "only to a free-form field such as model.params or model.chat_template_kwargs)"
        )
    problems = validate_node(cfg, RootConfig, "")
    model = cfg.get("model")
    if isinstance(model, DictConfig) and not OmegaConf.is_missing(model, "backend"):
        backend = str(model.backend)
        schema = backend_schema(backend)
        if schema is None:
            problems.append(f"model.backend = {backend!r}: must be one of {', '.join(backend_names())}")
        else:
            problems += validate_node(model, schema, "model")
    study = cfg.get("study")
    if isinstance(study, DictConfig) and "name" in study:
        config, groups = study_schemas(str(study.name))
        problems += validate_node(study, config, "study")
        fields_ = {f.name for f in dataclasses.fields(config)}
        for group, schema in groups.items():
            if group not in fields_:  # a group the study's schema does not declare as a field
                problems += validate_node(study.get(group), schema, f"study.{group}")
    if problems:
        raise ConfigRangeError("config out of range: " + "; ".join(problems))
