"""``python run.py --help``: the studies, the stages and every group's options, read from the
configs and the study registry when the help is asked for (Hydra's app help template,
``hydra.help.template: ${lmaudit.help:}`` in ``conf/config.yaml``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from lmaudit.config.keys import group_options
from lmaudit.config.schema import RootConfig
from lmaudit.config.studies import known_studies

#: what each stage does (the stages themselves come from the schema's ``stage`` choices)
STAGE_HELP = {
    "plan": "validate every input, render every prompt, write plan.json (no model call)",
    "freeze": "with prereg=<name>: freeze the registration under prereg/<study>/",
    "measure": "ask the model through the response cache, write measurements.jsonl",
    "analyze": "analyse measurements (measurements=<file> for any file), write results.json",
    "report": "write report.html and the audit record, log the MLflow run",
    "all": "plan, measure, analyze and report (the default)",
}

RUN_SETTINGS = (
    ("out_dir=<dir>", "where the run's files go (default results/<study>/<run name>)"),
    ("run_name=<name>", "the run's name (default: the registration's, else the study's)"),
    ("measurements=<file>", "with stage=analyze: the measurement file to (re-)analyse"),
    ("overwrite=true", "replace a run folder's plan or results made under another config"),
    ("mlflow.enabled=false", "write no MLflow run"),
)


def _conf() -> Path:
    """The primary config folder Hydra reads (conf/ beside run.py)."""
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        for source in HydraConfig.get().runtime.config_sources:
            if source.provider == "main" and source.schema == "file":
                return Path(source.path)
    return Path(__file__).resolve().parents[3] / "conf"


def _defaults(path: Path) -> dict[str, str]:
    """``{group: option}`` of a config file's defaults list (``group@package: option``)."""
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return {}
    out = {}
    for entry in doc.get("defaults") or []:
        if isinstance(entry, dict):
            for k, v in entry.items():
                out[str(k).split("@", 1)[0]] = str(v)
    return out


def _options(conf: Path, group: str, default: str | None) -> str:
    return ", ".join(f"{o} (default)" if o == default else o for o in group_options(conf, group))


def help_text(conf: Path | None = None) -> str:
    """The help page (plain text)."""
    conf = conf or _conf()
    root = _defaults(conf / "config.yaml")
    studies = sorted(known_studies(), key=lambda s: (s.name != root.get("study"), s.name))
    width = max(len(s.name) for s in studies) + 12
    lines = [
        "lmaudit: declared, pre-registered audits of language models.",
        "",
        "usage: python run.py [study=<name>] [<group>=<option> ...] [<key>=<value> ...] [stage=<stage>]",
        "       python run.py -m <group>=<a>,<b> ...    (a sweep: one run per combination)",
        "",
        "== Studies (study=<name>) ==",
    ]
    for s in studies:
        name = f"{s.name} (default)" if s.name == root.get("study") else s.name
        lines.append(f"  {name:<{width}}{(s.__doc__ or '').strip().splitlines()[0] if s.__doc__ else ''}")
    lines += ["", "== Stages (stage=<stage>) =="]
    stage = next(f for f in dataclasses.fields(RootConfig) if f.name == "stage")
    for name in stage.metadata["range"].choices:
        lines.append(f"  {name:<10}{STAGE_HELP.get(name, '')}")
    lines += ["", "== Groups (<group>=<option>) =="]
    for group in ("model", "prereg"):
        lines.append(f"  {group}: {_options(conf, group, root.get(group))}")
    for s in studies:
        if not s.groups:
            lines.append(f"  study={s.name}: no groups of its own (study.<key>=<value>)")
            continue
        chosen = _defaults(conf / "study" / f"{s.name}.yaml")
        lines.append(f"  study={s.name}:")
        for g in s.groups:
            lines.append(f"    {g}: {_options(conf, f'study/{s.name}/{g}', chosen.get(f'{s.name}/{g}'))}")
    lines += [
        "  A group of the selected study is named by itself (framing=track_p, estimand.n=200), or",
        "  as <study>/<group>=<option>, which also selects that study (judge/condition=P0).",
        "",
        "== Run settings ==",
        *(f"  {k:<22}{v}" for k, v in RUN_SETTINGS),
        "",
        "The composed config: python run.py [overrides] --cfg job.  More: README.md, docs/cli.md.",
    ]
    return "\n".join(lines)


def register_help() -> None:
    """The ``${lmaudit.help:}`` resolver (Hydra's help template, ``$`` escaped for it)."""
    from omegaconf import OmegaConf

    def template() -> str:
        return help_text().replace("$", "$$") + "\nHydra's own flags (--cfg, --info, -m ...): --hydra-help.\n"

    OmegaConf.register_new_resolver("lmaudit.help", template, replace=True, use_cache=False)
