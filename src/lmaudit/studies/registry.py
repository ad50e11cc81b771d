"""The studies the pipeline knows, by name.

Two ways in, one contract (:class:`lmaudit.studies.base.Study`):

- built-in studies: the module named in :data:`BUILTIN` defines a ``Study`` subclass decorated
  with :func:`register_study` (adding a built-in study is one line here);
- studies in other installed packages: an entry point in the group ``lmaudit.studies`` whose
  name is the study's name and whose object is the ``Study`` subclass, e.g. in the package's
  ``pyproject.toml``::

      [project.entry-points."lmaudit.studies"]
      mystudy = "mypackage.study:MyStudy"

Studies never import each other.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import TypeVar

from lmaudit.errors import InputError
from lmaudit.studies.base import Study
from lmaudit.studies.envelope import StudyResults

ENTRY_POINT_GROUP = "lmaudit.studies"

BUILTIN: dict[str, str] = {
    "qq": "lmaudit.studies.qq.study",
    "draws": "lmaudit.studies.draws.study",
    "judge": "lmaudit.studies.judge.study",
    "choir": "lmaudit.studies.choir.study",
}

_REGISTERED: dict[str, type[Study]] = {}
_INSTANCES: dict[str, Study] = {}

S = TypeVar("S", bound=type[Study])


def register_study(cls: S) -> S:
    """Class decorator: make a :class:`Study` subclass known under its ``name``."""
    if not (isinstance(cls, type) and issubclass(cls, Study)):
        raise TypeError(f"{cls!r} is not a lmaudit.studies.Study subclass")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name.isidentifier():
        raise TypeError(f"{cls.__name__}.name must be an identifier, got {name!r}")
    typed = getattr(cls, "result_type", None)
    if not (isinstance(typed, type) and issubclass(typed, StudyResults)):
        raise TypeError(
            f"{cls.__name__}.result_type must be its typed results, a lmaudit.studies.StudyResults "
            f"subclass, got {typed!r}"
        )
    known = _REGISTERED.get(name)
    if known is not None and known is not cls and known.__qualname__ != cls.__qualname__:
        raise TypeError(f"two studies are named {name!r}: {known.__module__} and {cls.__module__}")
    _REGISTERED[name] = cls
    return cls


def _entry_points() -> dict[str, object]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def study_names() -> list[str]:
    """Every known study: built-in ones and those of installed packages."""
    return sorted({*BUILTIN, *_entry_points(), *_REGISTERED})


def study_class(name: str) -> type[Study]:
    if name not in _REGISTERED:
        if name in BUILTIN:
            importlib.import_module(BUILTIN[name])
        else:
            ep = _entry_points().get(name)
            if ep is not None:
                obj = ep.load()  # type: ignore[attr-defined]
                if isinstance(obj, type) and issubclass(obj, Study):
                    register_study(obj)
    cls = _REGISTERED.get(name)
    if cls is None:
        raise InputError(
            f"study: field 'name' = {name!r} is not a known study ({', '.join(study_names())}); "
            f"studies from other packages register an entry point in the group {ENTRY_POINT_GROUP!r}"
        )
    return cls


def get_study(name: str) -> Study:
    """The study named ``name`` (one instance per process)."""
    if name not in _INSTANCES:
        _INSTANCES[name] = study_class(name)()
    return _INSTANCES[name]


def all_studies() -> list[type[Study]]:
    return [study_class(n) for n in study_names()]
