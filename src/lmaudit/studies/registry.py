"""The studies the pipeline knows, by name. Each is a module exposing the study interface:

``NAME``, ``PLAN_KEYS`` (config groups its plan digest covers), ``default_run_name(cfg)``,
``plan(cfg)``, ``measure(cfg, cached, backend)``, ``analyze_rows(cfg, rows, source)``,
``write_report(path, *, results, plan, audit)``, ``headline(results)``, ``metrics(results)``,
``tags(results)``, ``summary(results)``; optionally ``COMPARE_COLUMNS`` (its columns in
``lmaudit compare``), ``needs_backend(cfg)``, ``results_template(cfg)`` (prediction checks at
freeze time) and ``combine_sweep(cfgs, run_dirs, out)`` (a ``-m`` sweep's jobs analysed
together). Studies never import each other.
"""

from __future__ import annotations

import importlib
from types import ModuleType

STUDIES: dict[str, str] = {
    "qq": "lmaudit.studies.qq.study",
    "draws": "lmaudit.studies.draws.study",
    "judge": "lmaudit.studies.judge.study",
}


def get_study(name: str) -> ModuleType:
    try:
        path = STUDIES[name]
    except KeyError:
        from lmaudit.provenance.io import InputError

        raise InputError(
            f"study: field 'name' = {name!r} is not a known study ({', '.join(sorted(STUDIES))})"
        ) from None
    return importlib.import_module(path)
