"""Short spellings of a study's own config groups on the command line.

A study's groups live in ``conf/study/<name>/<group>/`` and at ``cfg.study.<group>``; Hydra's
own spelling of such a choice is ``study/<name>/<group>@study.<group>=<option>``. These are
accepted as well, for every study alike (declared by :attr:`Study.groups`):

- ``<group>=<option>`` and ``<group>.<field>=<value>`` for a group of the selected study
  (``study=...``; the default study when none is named): ``framing=track_p``,
  ``estimand.n=200``;
- ``<study>/<group>=<option>`` and ``<study>.<group>.<field>=<value>``, which also select that
  study: ``judge/condition=P0``, ``judge.wrapper.prefix=...``. A ``-m`` sweep is composed
  first without its swept values, so the study such an override names is added to the
  command line (``study=judge``) for the whole sweep to agree.

A group that belongs to another study than the selected one is refused with a message naming
both, before anything is composed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lmaudit.config.studies import study_groups
from lmaudit.errors import InputError

DEFAULT_STUDY = "qq"  # conf/config.yaml's default (a test checks they agree)


def _split(arg: str) -> tuple[str, str, str]:
    """``(prefix, key, rest)`` of an override: ``+``/``~`` prefix, the key, ``=value``."""
    stripped = arg.lstrip("+~")
    prefix = arg[: len(arg) - len(stripped)]
    key, eq, value = stripped.partition("=")
    return prefix, key, eq + value


def _owner(name: str, groups: Mapping[str, tuple[str, ...]]) -> list[str]:
    return sorted(s for s, gs in groups.items() if name in gs)


def canonical(
    argv: Sequence[str], groups: Mapping[str, tuple[str, ...]] | None = None
) -> tuple[list[str], str | None]:
    """Hydra's spelling of every override in ``argv`` (flags such as ``-m`` and ``--cfg``
    kept as they are), and the study the command line selects (None for a sweep over studies).

    ``argv`` holds overrides only (no program name). Raises :class:`InputError` for a group
    of another study than the selected one."""
    groups = study_groups() if groups is None else groups
    args = list(argv)
    overrides = [(i, a) for i, a in enumerate(args) if "=" in a and not a.startswith("-")]
    named = [a.split("=", 1)[1] for _, a in overrides if _split(a)[1] == "study"]
    implied: dict[str, str] = {}  # study -> the override that implies it
    for _, a in overrides:
        key = _split(a)[1].split("@", 1)[0]
        head, _, tail = key.partition("/") if "/" in key else key.partition(".")
        first = tail.split(".", 1)[0]
        if head in groups and first in groups[head] and key != f"study/{head}":
            implied.setdefault(head, a)
    if named:
        study: str | None = named[-1] if "," not in named[-1] else None
    elif implied:
        if len(implied) > 1:
            raise InputError(
                "the overrides " + ", ".join(implied.values()) + " select different studies; name one"
            )
        study = next(iter(implied))
    else:
        study = DEFAULT_STUDY
    for s, a in implied.items():
        if named and s != study:
            raise InputError(
                f"{a.split('=', 1)[0]} selects the {s} study, but study={named[-1]} was given: "
                f"drop one of the two (e.g. python run.py -m {s}/<group>=...)"
            )
    for i, a in overrides:
        prefix, key, rest = _split(a)
        if key == "study" or key.startswith(("study/", "study.", "hydra", "model", "prereg", "paths")):
            continue
        base, at, _ = key.partition("@")
        if "/" in base:  # <study>/<group>
            s, _, g = base.partition("/")
            if s in groups and g in groups[s]:
                args[i] = f"{prefix}study/{s}/{g}@study.{g}{rest}"
            continue
        parts = base.split(".")
        if parts[0] in groups and len(parts) > 2 and parts[1] in groups[parts[0]]:  # judge.wrapper.x
            args[i] = f"{prefix}study.{'.'.join(parts[1:])}{rest}"
            continue
        g = parts[0]
        if at or not _owner(g, groups):
            continue
        if study is None or g not in groups.get(study, ()):
            owners = _owner(g, groups)
            where = f"study={study}" if study else "a sweep over studies"
            raise InputError(
                f"{key}: '{g}' is a config group of the {' and '.join(owners)} "
                f"{'study' if len(owners) == 1 else 'studies'}, not of {where}; "
                f"write {owners[0]}/{g}=... (which selects the {owners[0]} study) or drop it"
            )
        if len(parts) == 1:
            args[i] = f"{prefix}study/{study}/{g}@study.{g}{rest}"
        else:
            args[i] = f"{prefix}study.{base}{rest}"
    if not named and implied and study is not None:
        args.append(f"study={study}")
    return args, study


def with_canonical_overrides(argv: Sequence[str]) -> list[str]:
    """``sys.argv`` (program name first) with its overrides in Hydra's spelling."""
    args, _ = canonical(list(argv[1:]))
    return [argv[0], *args]


def display(override: str) -> str:
    """The short spelling of an override in Hydra's spelling (for job labels and records)."""
    prefix, key, rest = _split(override)
    base, _, package = key.partition("@")
    parts = base.split("/")
    if len(parts) == 3 and parts[0] == "study" and package == f"study.{parts[2]}":
        study, group = parts[1], parts[2]
        return f"{prefix}{group if study == DEFAULT_STUDY else f'{study}/{group}'}{rest}"
    return override
