"""Config keys and group options that do not exist, refused in our own words.

Two checks, one rule (a key must be declared by its schema; an option must be a config of
its group), each with a did-you-mean:

- :func:`check_overrides`, on the command line before Hydra composes anything: a group
  option that does not exist (listing the group's real options, never the ``_<schema>``
  entries of the ConfigStore), and a field the schema does not declare, with or without ``+``;
- :func:`undeclared`, on a composed config: every key that is not a field of its schema.
  Hydra's ``+key=value`` adds a key even to a structured config, so this is what keeps a
  misspelt ``+study.epsilonn=0.1`` out of a plan, whatever composed it.

Free-form nodes stay open: a field typed ``Any`` or ``dict`` (``model.params``,
``model.chat_template_kwargs``, an ensemble's member configs) takes any key, and
``+hydra...`` is Hydra's own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import typing
from collections.abc import Sequence
from pathlib import Path

import yaml
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig

from lmaudit.backends.registry import backend_schema
from lmaudit.config.ranges import _dataclasses_in
from lmaudit.config.schema import RootConfig
from lmaudit.config.studies import study_schemas
from lmaudit.config.suggest import did_you_mean, suggestions
from lmaudit.errors import InputError
from lmaudit.provenance.redact import redact_text

__all__ = ["check_overrides", "group_options", "undeclared"]

DEFAULT_MODEL = "gemma3_270m"  # conf/config.yaml's default


def _paths(schema: type, groups: dict[str, type], prefix: str = "") -> list[str]:
    """Every key below a schema, as dotted paths (``estimand.n``, ``gates.g3.n``): its fields,
    its groups, and theirs in turn (not into lists)."""
    out: list[str] = []
    children = {f.name: _child(schema, f.name, {})[1] for f in dataclasses.fields(schema)}
    children.update(groups)
    for name, inner in children.items():
        path = f"{prefix}{name}"
        out.append(path)
        if inner is not None:
            out += _paths(inner, {}, path + ".")
    return out


def no_such_key(where: str, name: str, schema: type, groups: dict[str, type], *, listed: bool) -> str:
    """``'<where>' has no key '<name>'`` with, when ``listed``, the keys it has, and the closest
    real key anywhere below ``where`` (its full path: ``study.n_draws`` -> ``study.estimand.n``)."""
    keys = [f.name for f in dataclasses.fields(schema)] + [g for g in groups if g not in _fields(schema)]
    close = suggestions(name, keys) or suggestions(name, [p for p in _paths(schema, groups) if "." in p])
    head = f"{_what(where)} has no key {name!r}"
    if listed:
        head += f" (keys: {', '.join(keys)})"
    return head + (
        f"; did you mean {' or '.join(f'{where}.{c}' if where else c for c in close)}?" if close else ""
    )


def _fields(schema: type) -> set[str]:
    return {f.name for f in dataclasses.fields(schema)}


def group_options(conf: Path, group: str) -> list[str]:
    """The options of a config group: its YAML files and ConfigStore entries, without the
    ``_<name>`` schema entries (which only YAML files build on)."""
    found = {p.stem for p in (conf / group).glob("*.yaml")} if (conf / group).is_dir() else set()
    with contextlib.suppress(OSError):  # OSError: not a ConfigStore group
        found |= {n[:-5] for n in ConfigStore.instance().list(group) if n.endswith(".yaml")}
    return sorted(n for n in found if not n.startswith("_"))


def _study_schemas(study: str) -> tuple[type, dict[str, type]] | None:
    try:
        return study_schemas(study)
    except InputError:
        return None


def _child(schema: type, name: str, groups: dict[str, type]) -> tuple[bool, type | None]:
    """(whether ``name`` is declared by ``schema``, the schema of its value: None when free-form)."""
    if name in groups:
        return True, groups[name]
    fields = {f.name for f in dataclasses.fields(schema)}
    if name not in fields:
        return False, None
    inner, is_list = _dataclasses_in(typing.get_type_hints(schema).get(name))
    return True, (None if is_list else inner)


def _walk(node: DictConfig, schema: type, where: str, groups: dict[str, type]) -> list[str]:
    problems: list[str] = []
    for k in node:
        key = str(k)
        path = f"{where}.{key}" if where else key
        declared, inner = _child(schema, key, groups)
        if not declared:
            problems.append(f"{path} ({no_such_key(where, key, schema, groups, listed=False)})")
            continue
        child = node._get_node(key)
        if inner is not None and isinstance(child, DictConfig) and not child._is_none():
            problems += _walk(child, inner, path, {})
    return problems


def _what(where: str) -> str:
    return f"'{where}'" if where else "the root config"


def undeclared(cfg: DictConfig) -> list[str]:
    """Every key of a composed config that its schema does not declare (root, model by its
    backend, the study with its groups), each with a did-you-mean."""
    problems: list[str] = []
    for k in cfg:
        key = str(k)
        child = cfg._get_node(key)
        if key not in {f.name for f in dataclasses.fields(RootConfig)}:
            problems.append(f"{key} ({no_such_key('', key, RootConfig, {}, listed=False)})")
        elif key == "model" and isinstance(child, DictConfig) and "backend" in child:
            schema = backend_schema(str(child.get("backend")))
            if schema is not None:
                problems += _walk(child, schema, "model", {})
        elif key == "study" and isinstance(child, DictConfig) and "name" in child:
            found = _study_schemas(str(child.get("name")))
            if found is not None:
                problems += _walk(child, found[0], "study", found[1])
        elif key in ("paths", "mlflow", "prereg") and isinstance(child, DictConfig) and not child._is_none():
            _, inner = _child(RootConfig, key, {})
            if inner is not None:
                problems += _walk(child, inner, key, {})
    return problems


# --- the command line, before Hydra ------------------------------------------------------


def _split(arg: str) -> tuple[str, str, str]:
    stripped = arg.lstrip("+~")
    key, _, value = stripped.partition("=")
    return arg[: len(arg) - len(stripped)], key, value


def _values(value: str) -> list[str] | None:
    """The options a group override names (a sweep's too); None for Hydra's sweep functions."""
    if any(c in value for c in "()[]{}$"):
        return None
    return [v.strip() for v in value.split(",")]


def _registration_defaults(conf: Path, name: str) -> dict[str, str]:
    """``{group: option}`` a registration selects (``override /<group>: <option>``)."""
    try:
        doc = yaml.safe_load((conf / "prereg" / f"{name}.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return {}
    out: dict[str, str] = {}
    for entry in doc.get("defaults") or []:
        if isinstance(entry, dict):
            for k, v in entry.items():
                if str(k).startswith("override /"):
                    out[str(k).removeprefix("override /")] = str(v)
    return out


def _model_schema(conf: Path, option: str) -> type | None:
    try:
        doc = yaml.safe_load((conf / "model" / f"{option}.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return None
    for entry in doc.get("defaults") or []:
        if isinstance(entry, str) and entry.startswith("_"):
            return backend_schema(entry[1:])
    return None


def _group_problem(conf: Path, key: str, value: str, shown: str) -> str | None:
    group = key.partition("@")[0]
    if group.startswith("hydra") or "." in group:
        return None
    options = group_options(conf, group)
    if not options:
        return None  # not a group: a root field such as stage= or run_name=
    values = _values(value)
    for v in values or []:
        if v in options or (v == "null" and group == "prereg"):
            continue
        parts = group.split("/")
        what = f"the {parts[1]} study's {parts[2]} group" if len(parts) == 3 else f"the {group} group"
        return (
            f"{shown}: {what} has no option {v!r} (options: {', '.join(options)}){did_you_mean(v, options)}"
        )
    return None


def _value_problem(schema: type, name: str, path: str, value: str, shown: str) -> str | None:
    """A value that is none of the field's declared choices (``stage=analyse``), with the
    choices and the closest; None for a value it takes, a sweep's function or an interpolation."""
    rule = next((f.metadata.get("range") for f in dataclasses.fields(schema) if f.name == name), None)
    if rule is None or rule.choices is None:
        return None
    options = [str(c) for c in rule.choices]
    for v in _values(value) or []:
        v = v.strip("'\"")
        if v in options or v == "null":
            continue
        return (
            f"{shown}: '{path}' has no option {v!r} (options: {', '.join(options)}){did_you_mean(v, options)}"
        )
    return None


def _key_problem(
    key: str, value: str, shown: str, schemas: dict[str, tuple[type, dict[str, type]] | None]
) -> str | None:
    parts = key.split(".")
    head = parts[0]
    if head not in _fields(RootConfig):
        return f"{shown}: {no_such_key('', head, RootConfig, {}, listed=True)}"
    if len(parts) == 1:
        return _value_problem(RootConfig, head, head, value, shown)
    found = schemas.get(head) if head in ("study", "model") else (_child(RootConfig, head, {})[1], {})
    if found is None or found[0] is None:
        return None  # free-form or not known before composition
    schema: type | None = found[0]
    groups = found[1]
    where = head
    for i, name in enumerate(parts[1:], start=2):
        if schema is None:
            return None
        declared, inner = _child(schema, name, groups)
        if not declared:
            return f"{shown}: {no_such_key(where, name, schema, groups, listed=True)}"
        if i == len(parts) and name not in groups:
            return _value_problem(schema, name, f"{where}.{name}", value, shown)
        schema, groups, where = inner, {}, f"{where}.{name}"
    return None


def check_overrides(args: Sequence[str], conf: Path, study: str | None, given: Sequence[str] = ()) -> None:
    """Refuse (:class:`InputError`, one line) a group option that does not exist and a key no
    schema declares, ``+key`` included. ``args``: overrides in Hydra's spelling; ``study``:
    the study they select (None: a sweep over studies); ``given``: ``args`` as typed (messages
    quote them)."""
    from lmaudit.config.overrides import display

    typed = {a: g for a, g in zip(args, given, strict=False)}
    overrides = [a for a in args if "=" in a and not a.startswith("-")]
    choices = {_split(a)[1]: _split(a)[2] for a in overrides}
    chosen = dict(choices)
    if choices.get("prereg") and _values(choices["prereg"]) == [choices["prereg"]]:
        picked = _registration_defaults(conf, choices["prereg"])
        chosen = {**picked, **{k: v for k, v in choices.items() if k not in picked}}
        study = picked.get("study", study)
    schemas: dict[str, tuple[type, dict[str, type]] | None] = {}
    schemas["study"] = _study_schemas(study) if study else None
    model = chosen.get("model", DEFAULT_MODEL)
    one_model = _values(model) == [model] and "model.backend" not in choices
    model_schema = _model_schema(conf, model) if one_model else None
    schemas["model"] = (model_schema, {}) if model_schema is not None else None
    for a in overrides:
        prefix, key, value = _split(a)
        if "~" in prefix or key.startswith("hydra"):
            continue
        shown = redact_text(typed.get(a) or display(a))  # quoted in the message: credentials masked
        problem = _group_problem(conf, key, value, shown)
        if problem is None and "/" not in key and "@" not in key and not group_options(conf, key):
            problem = _key_problem(key, value, shown, schemas)
        if problem:
            raise InputError(problem)
