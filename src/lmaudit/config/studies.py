"""The studies as the config layer reads them: the one module of ``lmaudit.config`` that asks
the study registry (:mod:`lmaudit.studies.registry`).

The checks, the help page, the short group spellings and the ConfigStore registration read a
study's name, schema and groups through the three functions below.
"""

from __future__ import annotations

from lmaudit.studies.base import Study
from lmaudit.studies.registry import all_studies, get_study


def known_studies() -> list[type[Study]]:
    """Every known study's class: built-in ones and those of installed packages, by name."""
    return all_studies()


def study_schemas(name: str) -> tuple[type, dict[str, type]]:
    """``(schema of cfg.study, {group: its schema})`` of the study ``name``; InputError when no
    study has that name."""
    study = get_study(name)
    return study.config, dict(study.groups)


def study_groups() -> dict[str, tuple[str, ...]]:
    """``{study: its own group names}`` for every known study."""
    return {s.name: tuple(s.groups) for s in all_studies()}
