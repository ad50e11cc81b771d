"""Command-line overrides that imply a study.

The judge study's groups (``judge/condition``, ``judge/rubric``, ``judge/wrapper``) exist only
for it, so naming one selects it: ``python run.py -m judge/condition=P0,PA,PB,PAB`` is the
judge study. The condition configs say so in their defaults list, which covers single runs;
a sweep, though, is first composed *without* its swept values, so its base config would still
be the default study and reject ``study.k=...``. Adding ``study=judge`` to the command line
when a judge group (or ``judge.*`` key) is named and no study is makes both agree.
"""

from __future__ import annotations

from collections.abc import Sequence

IMPLIED_STUDY = {"judge/": "judge", "judge.": "judge"}


def _key(arg: str) -> str:
    return arg.lstrip("+~").split("=", 1)[0].split("@", 1)[0]


def with_implied_study(argv: Sequence[str]) -> list[str]:
    """``argv`` plus ``study=<name>`` when an override names a study's own group and none
    names the study; unchanged otherwise (flags such as ``-m`` and ``--cfg`` are kept)."""
    args = list(argv)
    overrides = [a for a in args[1:] if "=" in a and not a.startswith("-")]
    if any(_key(a) == "study" for a in overrides):
        return args
    for a in overrides:
        for prefix, study in IMPLIED_STUDY.items():
            if _key(a).startswith(prefix):
                return [*args, f"study={study}"]
    return args
