"""Each study's pairing of two runs item by item (differences B - A), read from the run
folders through the small readers below.

* qq: per item ``|q|``, OSS and verdict; the exact sign-flip test of ``sum(|q_B| - |q_A|)``.
* judge: per prompt and condition, whether the verdict flipped against the reference; the
  exact McNemar test of the two runs' flip indicators.
* draws: per family, ``rho_hat`` of the shared sequences in each run and its difference with a
  seeded paired bootstrap interval.
* choir: per question ``R_q``; the exact sign-flip test of ``sum(R_q,B - R_q,A)``.

:func:`compare_runs` (``lmaudit compare``) checks that two run folders can be paired
(:mod:`lmaudit.tracking.paired`) and applies their study's pairing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lmaudit.errors import InputError
from lmaudit.stats.paired import mcnemar_exact, paired_ratio_bootstrap, sign_flip_real
from lmaudit.tracking.design import design_table
from lmaudit.tracking.paired import (
    Paired,
    PairedReport,
    PairedTable,
    RunFolder,
    design_difference,
    load_run,
)

if TYPE_CHECKING:
    from lmaudit.studies.judge.results import JudgeResults

#: the paired bootstrap of the draws study: resamples, level and seed (stated in the output)
BOOT_RESAMPLES = 2000
BOOT_LEVEL = 0.95
BOOT_SEED = 0
#: the sign-flip test is exact up to this many items, a Monte Carlo of MC_RESAMPLES beyond
EXACT_MAX = 20
MC_RESAMPLES = 100_000
MC_SEED = 0
#: the judge's McNemar p-values are Holm-adjusted over its conditions (family-wise level)
HOLM_ALPHA = 0.05


def _shared(a: Mapping[str, Any], b: Mapping[str, Any], what: str, ra: RunFolder, rb: RunFolder) -> list[str]:
    """The keys both runs hold, in A's order; InputError when there is none."""
    keys = [k for k in a if k in b]
    if not keys:
        raise InputError(f"cannot pair {ra.path} with {rb.path}: they share no {what}")
    return keys


def _sign_flip_summary(diffs: Sequence[float], what: str) -> tuple[dict[str, Any], str]:
    test = sign_flip_real(diffs, exact_max=EXACT_MAX, n_resamples=MC_RESAMPLES, seed=MC_SEED)
    err = "" if test.method == "exact" else f" +/- {test.mc_se:.2g} (Monte Carlo, seed {MC_SEED})"
    line = (
        f"sum of {what} differences {test.statistic:.4g} over {len(diffs)} items; two-sided "
        f"sign-flip p = {test.p_value:.4g}{err} ({test.method}, {test.n_patterns} sign patterns)"
    )
    return test.to_json(), line


def _num(v: float | None) -> str:
    return "undefined" if v is None else f"{v:.4g}"


# --- qq ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class QQItem:
    abs_q: float
    oss: float
    verdict: str


def _qq_items(r: RunFolder) -> dict[str, QQItem]:
    return {it.item: QQItem(abs(it.q), it.oss, it.verdict) for it in r.typed().items}


def pair_qq(a: RunFolder, b: RunFolder) -> Paired:
    ia, ib = _qq_items(a), _qq_items(b)
    rows: list[dict[str, Any]] = []
    diffs: list[float] = []
    changed = 0
    for k in _shared(ia, ib, "item", a, b):
        x, y = ia[k], ib[k]
        diff = y.abs_q - x.abs_q
        diffs.append(diff)
        changed += x.verdict != y.verdict
        oss = y.oss - x.oss
        rows.append(
            {
                "item": k,
                "a": x.abs_q,
                "b": y.abs_q,
                "diff": diff,
                "oss_a": x.oss,
                "oss_b": y.oss,
                "oss_diff": oss,
                "verdict_a": x.verdict,
                "verdict_b": y.verdict,
                "verdict_changed": x.verdict != y.verdict,
            }
        )
    if not diffs:
        raise InputError(f"cannot pair {a.path} with {b.path}: no shared item has q in both runs")
    test, line = _sign_flip_summary(diffs, "|q|")
    data = {
        "items": rows,
        "n_items": len(diffs),
        "n_undefined": len(rows) - len(diffs),
        "p_value": test["p_value"],
        "test": test,
        "verdict_changes": changed,
    }
    legend = {
        "item": "the item both runs measured",
        "a": "|q| in run A (the QQ violation's size)",
        "b": "|q| in run B",
        "diff": "b - a (positive: B violates QQ more on this item)",
        "oss_a": "OSS (order-effect size) in run A",
        "oss_b": "OSS in run B",
        "verdict_a": "run A's verdict",
        "verdict_b": "run B's verdict",
    }
    table = PairedTable("qq, per item", tuple(legend), rows, legend)
    summary = [line, f"verdicts changed on {changed} of {len(rows)} items"]
    if data["n_undefined"]:
        summary.append(f"{data['n_undefined']} items without q in one run are left out of the test")
    return Paired(data, [table], summary)


# --- judge ------------------------------------------------------------------------------


def _measurement_rows(r: RunFolder, why: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, row) of the run's ``measurements.jsonl``; InputError naming file and line."""
    path = r.path / "measurements.jsonl"
    if not path.is_file():
        raise InputError(f"{path}: not found ({why})")
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"{path}: line {n}: not valid JSON ({e})") from None
            if isinstance(row, dict):
                yield n, row


def _judge_free_ids(r: RunFolder) -> dict[str, str]:
    """An imported run's prompt ids with the judge's name taken out (FastChat's end in
    ``|<judge>/<prompt>``, AlpacaEval's start with ``<annotator>|``), so that two judges of one
    file's pairs meet; empty for a run that is not an import, or when ids would collide."""
    if r.plan.get("mode") != "import":
        return {}
    out: dict[str, str] = {}
    for _, row in _measurement_rows(r, "an imported judge run pairs prompts by its judgment rows"):
        item, pair = row.get("item"), row.get("pair")
        judge = pair.get("judge_prompt") if isinstance(pair, dict) else None
        if row.get("kind") != "judgment" or not isinstance(item, str) or not isinstance(judge, str):
            continue
        if item.endswith(f"|{judge}"):
            out[item] = f"{item[: -len(judge)]}{judge.split('/', 1)[-1]}"
        elif item.startswith(f"{judge}|"):
            out[item] = item[len(judge) + 1 :]
    return out if len(set(out.values())) == len(out) else {}


def _judge_flips(r: RunFolder) -> dict[str, dict[str, bool]]:
    """condition -> prompt -> the verdict changed against the reference (in any replicate);
    prompts without a valid pair of verdicts (``n`` 0) are left out."""
    rename = _judge_free_ids(r)
    results: JudgeResults = r.typed()
    return {
        d.id: {rename.get(k, k): v.changed > 0 for k, v in d.per_item.items() if v.n > 0}
        for d in results.disagreement
    }


def pair_judge(a: RunFolder, b: RunFolder) -> Paired:
    from lmaudit.stats.multiplicity import holm

    fa, fb = _judge_flips(a), _judge_flips(b)
    conditions = _shared(fa, fb, "condition compared with the reference", a, b)
    reference = a.typed().reference
    out: list[dict[str, Any]] = []
    tables = []
    for c in conditions:
        prompts = [k for k in fa[c] if k in fb[c]]
        if not prompts:
            raise InputError(f"cannot pair {a.path} with {b.path}: they share no prompt under {c}")
        flips_a, flips_b = [fa[c][k] for k in prompts], [fb[c][k] for k in prompts]
        rows = [{"item": k, "a": x, "b": y} for k, x, y in zip(prompts, flips_a, flips_b, strict=True)]
        test = mcnemar_exact(flips_a, flips_b).to_json()
        out.append({"condition": c, "items": rows, "mcnemar": test, "p_value": test["p_value"]})
        legend = {
            "item": "the prompt both runs judged",
            "a": f"run A's verdict under {c} differs from its verdict under {reference}",
            "b": "the same in run B",
        }
        tables.append(PairedTable(f"judge, {c} vs {reference}, per prompt", tuple(legend), rows, legend))
    adjusted = holm([c["p_value"] for c in out], HOLM_ALPHA).adjusted
    summary = []
    for entry, h in zip(out, adjusted, strict=True):
        entry["holm_p"] = float(h)
        t = entry["mcnemar"]
        summary.append(
            f"{entry['condition']} vs {reference}: flipped in A only {t['only_a']}, in B only {t['only_b']}, "
            f"in both {t['both']} of {t['n']} prompts; exact McNemar p = {t['p_value']:.4g} "
            f"(Holm over the {len(out)} conditions: {entry['holm_p']:.4g})"
        )
    return Paired({"reference": reference, "conditions": out}, tables, summary)


# --- draws ------------------------------------------------------------------------------

# condition, probe, replicate, and which of the sequences sharing those it is (0, 1, ... in the
# order the run holds them); not the source, which names the log or run a sequence came from
SeqKey = tuple[str, str, int | None, int]


def _draws_sequences(r: RunFolder) -> dict[str, dict[SeqKey, tuple[float, float]]]:
    """family -> sequence -> (R - E0, n - 1 - E0), both 0 for an uninformative sequence: the
    terms of ``rho_hat = sum (R - E0) / sum (n - 1 - E0)``, after the run's exclusions and
    prefix de-duplication."""
    from lmaudit.studies.draws.importer import dedup_prefixes, exclude, validate_record
    from lmaudit.studies.draws.sequences import encode, sequence_stats

    records = [
        validate_record(
            {k: v for k, v in row.items() if k != "kind"}, f"{r.path / 'measurements.jsonl'}: line {n}"
        )
        for n, row in _measurement_rows(r, "the draws comparison pairs the sequences")
        if row.get("kind", "sequence") == "sequence"
    ]
    kept, _ = exclude(records, r.typed().params.exclude_patterns)
    kept, _ = dedup_prefixes(kept)
    out: dict[str, dict[SeqKey, tuple[float, float]]] = {}
    if not kept:
        return out
    st = sequence_stats(encode([x.draws for x in kept]))
    t = np.where(st.informative, st.repeats - st.e0, 0.0)
    room = np.where(st.informative, st.room, 0.0)
    seen: dict[tuple[str, str, str, int | None], int] = {}
    for i, x in enumerate(kept):
        name = (x.family, x.condition, x.probe, x.replicate)
        seen[name] = seen.get(name, -1) + 1
        key = (x.condition, x.probe, x.replicate, seen[name])
        out.setdefault(x.family, {})[key] = (float(t[i]), float(room[i]))
    return out


def _family_pairs(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Families of one name in both runs; one family in each run pair whatever their names."""
    if len(a) == 1 and len(b) == 1:
        return [(next(iter(a)), next(iter(b)))]
    return [(f, f) for f in a if f in b]


def pair_draws(a: RunFolder, b: RunFolder) -> Paired:
    sa, sb = _draws_sequences(a), _draws_sequences(b)
    pairs = _family_pairs(sa, sb)
    if not pairs:
        raise InputError(f"cannot pair {a.path} with {b.path}: they share no family")
    families, rows, summary = [], [], []
    for fam_a, fam_b in pairs:
        keys = [k for k in sa[fam_a] if k in sb[fam_b]]
        if not keys:
            raise InputError(
                f"cannot pair {a.path} with {b.path}: families {fam_a} and {fam_b} share no sequence"
            )
        ta, ra = zip(*(sa[fam_a][k] for k in keys), strict=True)
        tb, rb = zip(*(sb[fam_b][k] for k in keys), strict=True)
        boot = paired_ratio_bootstrap(
            ta, ra, tb, rb, level=BOOT_LEVEL, n_resamples=BOOT_RESAMPLES, seed=BOOT_SEED
        )
        item = "same" if fam_a == fam_b else f"{fam_a} / {fam_b}"
        families.append(
            {"family_a": fam_a, "family_b": fam_b, "n_sequences": len(keys), "rho_hat": boot.to_json()}
        )
        rows.append(
            {"family": item, "n": len(keys), "a": boot.a, "b": boot.b, "diff": boot.diff}
            | {"low": boot.low, "high": boot.high}
        )
        summary.append(
            f"{item}: rho_hat {_num(boot.a)} in A, {_num(boot.b)} in B over {len(keys)} shared "
            f"sequences; difference {_num(boot.diff)}, {int(BOOT_LEVEL * 100)}% interval "
            f"[{_num(boot.low)}, {_num(boot.high)}] (percentile bootstrap over sequences, "
            f"{BOOT_RESAMPLES} resamples, seed {BOOT_SEED})"
        )
    legend = {
        "family": "the family (run A's / run B's when their names differ)",
        "n": "sequences both runs hold (condition, probe, replicate; the k-th of equal ones)",
        "a": "rho_hat of those sequences in run A",
        "b": "rho_hat in run B",
        "diff": "b - a",
        "low": f"the paired bootstrap interval's low end ({int(BOOT_LEVEL * 100)}%)",
        "high": "its high end",
    }
    return Paired(
        {"families": families}, [PairedTable("draws, per family", tuple(legend), rows, legend)], summary
    )


# --- choir ------------------------------------------------------------------------------


def _choir_rq(r: RunFolder) -> dict[str, float | None]:
    """Per question, ``R_q`` of the run's typed choir results (None: undefined)."""
    return {q: v.R_q for q, v in r.typed().questions.items()}


def pair_choir(a: RunFolder, b: RunFolder) -> Paired:
    qa, qb = _choir_rq(a), _choir_rq(b)
    rows: list[dict[str, Any]] = []
    tested: list[float] = []
    for q in _shared(qa, qb, "question", a, b):
        x, y = qa[q], qb[q]
        diff = None if x is None or y is None else y - x
        if diff is not None:
            tested.append(diff)
        rows.append({"item": q, "a": x, "b": y, "diff": diff})
    if not tested:
        raise InputError(f"cannot pair {a.path} with {b.path}: no shared question has R_q in both runs")
    test, line = _sign_flip_summary(tested, "R_q")
    legend = {
        "item": "the question both runs asked",
        "a": "R_q in run A (mean cross-member RBO of the unconditioned rankings)",
        "b": "R_q in run B",
        "diff": "b - a (positive: B's members agree more)",
    }
    data = {"items": rows, "n_items": len(tested), "p_value": test["p_value"], "test": test}
    return Paired(data, [PairedTable("choir, per question", tuple(legend), rows, legend)], [line])


PAIRINGS: dict[str, Callable[[RunFolder, RunFolder], Paired]] = {
    "qq": pair_qq,
    "judge": pair_judge,
    "draws": pair_draws,
    "choir": pair_choir,
}


def compare_runs(path_a: str | Path, path_b: str | Path) -> PairedReport:
    """The paired comparison of two run folders (B - A), or InputError with the reason the
    pair is refused."""
    a, b = load_run(path_a), load_run(path_b)
    if a.study != b.study:
        raise InputError(f"cannot pair {a.path} ({a.study}) with {b.path} ({b.study}): different studies")
    why = design_difference(a, b)
    if why:
        raise InputError(
            f"cannot pair {a.path} with {b.path}: their designs differ beyond the model ({why}); "
            f"every difference: lmaudit compare --design {a.path} {b.path}"
        )
    pair: Callable[[RunFolder, RunFolder], Paired] | None = PAIRINGS.get(a.study)
    if pair is None:
        raise InputError(f"{a.path}: study {a.study!r} has no paired comparison")
    return PairedReport(a.study, a, b, pair(a, b), design_table(a.plan, b.plan))
