"""Growth with the record count of the steps that were quadratic: the judge analysis
(per-item confidences), the draws import's prefix de-duplication and the draws grouped
diagnostic's Poisson-binomial tail; and the whole draws analysis, step by step.

Workloads (fixed seed):

* judge: N prompts x 4 conditions (P0, PA, PB, PAB) x 1 replicate, random winners and
  confidences, through :func:`lmaudit.studies.judge.disagreement.analyze`; the reference is the
  per-item scan the analysis used before (every judgment of a condition read once per item),
  run only where it finishes in reasonable time.
* draws: N sequences of 20 draws over 3 answers under one key (one family, condition, probe,
  replicate), a third of them prefixes of others, through
  :func:`lmaudit.studies.draws.importer.dedup_prefixes`; the reference is the pairwise check of
  each sequence against every kept one.
* grouped tail: the grouped diagnostic's p-value for one source of N sequences,
  :func:`lmaudit.stats.poisson_binomial.poisson_binomial_sf` on the fully-grouped
  probabilities ``K! prod c_k! / n!`` of N sequences of 20 draws over 2-4 answers (counts from
  Dirichlet(1) shares), at ``k`` = the mean + 10 standard deviations (a flagged source); the
  reference is the previous implementation (one Bernoulli at a time over the whole support, kept
  as the small-N path), run up to ``--tail-reference-max``.
* draws analysis: :func:`lmaudit.studies.draws.family.analyze_family` on N sequences of 20
  draws over 3 answers (persistence 0.3) from one source, with small Monte Carlo settings (9
  permutations, 2 datasets per rho: the registered 10,000 and 500 multiply the two Monte Carlo
  steps' linear cost), each step's seconds read by wrapping the functions the analysis calls.

For each N: seconds (best of ``--rounds``) and, over the sizes, the growth exponent (the
least-squares slope of log seconds on log N). The fast and reference outputs are compared where
both ran. No assertion on times. Writes ``benchmarks/results/scaling.json``.

    python benchmarks/bench_scaling.py [--sizes 1000 10000 100000] [--reference-max 10000]
        [--tail-sizes 1000 10000 100000 1000000] [--tail-reference-max 100000]
        [--analysis-sizes 10000 100000 1000000]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import gammaln

import lmaudit.studies.draws.family as draws_analysis
from host import host  # benchmarks/host.py (the script's own directory)
from lmaudit.stats import poisson_binomial
from lmaudit.studies.draws.importer import SequenceRecord, dedup_prefixes
from lmaudit.studies.judge.disagreement import Judgment, analyze

#: the functions the draws analysis calls, timed as its steps
ANALYSIS_STEPS = ("encode", "sequence_stats", "poisson_binomial_sf", "permutation_null", "persistence_null")

CONDITIONS = [
    {"id": "P0", "wrap": [], "swap": False},
    {"id": "PA", "wrap": ["A"], "swap": False},
    {"id": "PB", "wrap": ["B"], "swap": False},
    {"id": "PAB", "wrap": ["A", "B"], "swap": False},
]


def judgments(n: int, rng: random.Random) -> tuple[list[Judgment], list[str]]:
    items = [f"P{i:06d}" for i in range(n)]
    out = [
        Judgment(c["id"], item, 0, True, rng.choice("AB"), round(rng.random(), 2))
        for item in items
        for c in CONDITIONS
    ]
    rng.shuffle(out)  # the per-item grouping must not rely on the input order
    return out, items


def per_item_scan(js: Sequence[Judgment], items: Sequence[str]) -> dict[str, dict[str, list[float | None]]]:
    """The reference: each item's confidences per condition, by scanning every judgment of the
    condition once per item (what the analysis did before it grouped by item)."""
    by_cond = {c["id"]: [j for j in js if j.condition == c["id"]] for c in CONDITIONS}
    return {
        item: {
            cid: [j.confidence for j in sorted(cjs, key=lambda j: j.replicate) if j.item == item]
            for cid, cjs in by_cond.items()
        }
        for item in items
    }


def sequences(n: int, rng: random.Random) -> list[SequenceRecord]:
    full = [tuple(rng.choice("xyz") for _ in range(20)) for _ in range(n - n // 3)]
    prefixes = [s[: rng.randint(1, 20)] for s in rng.sample(full, n // 3)]
    draws = full + prefixes
    rng.shuffle(draws)
    return [SequenceRecord("fam", f"src{i % 3}", "cond", "probe", d, 0) for i, d in enumerate(draws)]


def pairwise_dedup(records: Sequence[SequenceRecord]) -> set[int]:
    """The reference: each sequence (longest first) against every kept one."""
    kept: list[tuple[Any, ...]] = []
    drop: set[int] = set()
    for i in sorted(range(len(records)), key=lambda i: (-len(records[i].draws), i)):
        d = records[i].draws
        if any(k[: len(d)] == d for k in kept):
            drop.add(i)
        else:
            kept.append(d)
    return drop


def grouped_probs(n: int, rng: np.random.Generator) -> np.ndarray:
    """Fully-grouped probabilities ``K! prod c_k! / n!`` of ``n`` sequences of 20 draws over
    2-4 answers (counts multinomial under Dirichlet(1) shares); one-answer sequences left out."""
    k_max = rng.integers(2, 5, size=n)
    shares = rng.dirichlet(np.ones(4), size=n) * (np.arange(4) < k_max[:, None])
    counts = rng.multinomial(20, shares / shares.sum(axis=1, keepdims=True))
    k = np.count_nonzero(counts, axis=1)
    log_p = gammaln(k + 1.0) + gammaln(counts + 1.0).sum(axis=1) - gammaln(21.0)
    return np.exp(log_p[k >= 2])


def persistent_sequences(n: int, rng: np.random.Generator) -> list[list[int]]:
    """``n`` sequences of 20 draws over 3 answers, each draw repeating the previous one with
    probability 0.3, else uniform."""
    x = rng.integers(0, 3, size=(n, 20))
    copy = rng.random((n, 20)) < 0.3
    for t in range(1, 20):
        x[:, t] = np.where(copy[:, t], x[:, t - 1], x[:, t])
    return x.tolist()


@contextmanager
def timed_steps(names: Sequence[str]) -> Iterator[dict[str, float]]:
    """CPU seconds spent in each named function of the draws analysis module while the block runs."""
    spent = dict.fromkeys(names, 0.0)
    originals = {name: getattr(draws_analysis, name) for name in names}

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] += time.process_time() - t0

        return timed

    for name, fn in originals.items():
        setattr(draws_analysis, name, wrap(name, fn))
    try:
        yield spent
    finally:
        for name, fn in originals.items():
            setattr(draws_analysis, name, fn)


def fmt(exponent: float | None) -> str:
    return "not measured" if exponent is None else f"{exponent:.2f}"


def best(fn: Callable[[], Any], rounds: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def best_cpu(fn: Callable[[], Any], rounds: int) -> tuple[float, float, Any]:
    """Best wall seconds and best CPU seconds of this process over ``rounds`` (the steps timed
    this way run on one thread, so on a shared machine their CPU time is the load-free figure)."""
    walls, cpus, out = [], [], None
    for _ in range(rounds):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return min(walls), min(cpus), out


def slope(ns: Sequence[int], secs: Sequence[float]) -> float | None:
    pts = [(math.log(n), math.log(s)) for n, s in zip(ns, secs, strict=True) if s > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)


def tail_rows(sizes: Sequence[int], reference_max: int, rounds: int) -> list[dict[str, Any]]:
    """The grouped diagnostic's tail at each size, and the previous implementation's up to ``reference_max``."""
    out: list[dict[str, Any]] = []
    poisson_binomial.poisson_binomial_sf(grouped_probs(5000, np.random.default_rng(0)), 3)  # scipy imports
    for n in sizes:
        probs = grouped_probs(n, np.random.default_rng(n))
        mean, sd = float(probs.sum()), math.sqrt(float((probs * (1 - probs)).sum()))
        k = math.ceil(mean + 10 * sd)
        secs, cpu, p = best_cpu(
            lambda probs=probs, k=k: poisson_binomial.poisson_binomial_sf(probs, k), rounds
        )
        row = {"n": n, "probabilities": int(probs.size), "k": k, "seconds": secs, "cpu_seconds": cpu, "p": p}
        if n <= reference_max:
            ref_secs, ref_cpu, ref_p = best_cpu(
                lambda probs=probs, k=k: poisson_binomial._sf_recursion(probs, k), rounds
            )
            row.update(
                reference_seconds=ref_secs,
                reference_cpu_seconds=ref_cpu,
                reference_p=ref_p,
                relative_difference=abs(p - ref_p) / ref_p,
            )
        out.append(row)
        print(
            f"grouped tail n={n}: {secs:.3f} s (CPU {cpu:.3f} s), p = {p:.6e}"
            + (
                f", reference {ref_secs:.3f} s (CPU {ref_cpu:.3f} s), relative difference"
                f" {row['relative_difference']:.1e}"
                if "reference_seconds" in row
                else ""
            )
        )
    return out


def analysis_rows(sizes: Sequence[int]) -> list[dict[str, Any]]:
    """The whole draws analysis at each size (small Monte Carlo settings), seconds per step."""
    out: list[dict[str, Any]] = []
    params = draws_analysis.AnalysisParams(n_perm=9, n_sims=2)
    draws_analysis.analyze_family(
        "warm", persistent_sequences(100, np.random.default_rng(0)), ["src"] * 100, params
    )
    for n in sizes:
        seqs = persistent_sequences(n, np.random.default_rng(n))
        sources = ["src"] * n
        with timed_steps(ANALYSIS_STEPS) as spent:
            secs, cpu, res = best_cpu(
                lambda seqs=seqs, sources=sources: draws_analysis.analyze_family(
                    "fam", seqs, sources, params
                ),
                1,
            )
        steps = {**spent, "rest": cpu - sum(spent.values())}
        out.append(
            {"n": n, "seconds": secs, "cpu_seconds": cpu, "steps": steps, "grouped_p": res.grouped[0].pvalue}
        )
        print(
            f"draws analysis n={n}: {secs:.2f} s (CPU {cpu:.2f} s; CPU by step: "
            + ", ".join(f"{k} {v:.2f}" for k, v in steps.items())
            + ")"
        )
        del seqs, res
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--reference-max", type=int, default=10000, help="largest N the references run at")
    ap.add_argument("--tail-sizes", type=int, nargs="+", default=[1000, 10000, 100000, 1000000])
    ap.add_argument(
        "--tail-reference-max", type=int, default=100000, help="largest N the previous tail runs at"
    )
    ap.add_argument("--analysis-sizes", type=int, nargs="+", default=[10000, 100000, 1000000])
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    rows: dict[str, list[dict[str, Any]]] = {
        "judge": [],
        "draws": [],
        "grouped_tail": [],
        "draws_analysis": [],
    }
    warm, warm_items = judgments(10, random.Random(0))  # first-call imports (scipy) are not timed
    analyze(warm, conditions=CONDITIONS, reference="P0", items=warm_items, alpha=0.05)
    for n in args.sizes:
        js, items = judgments(n, random.Random(n))
        secs, res = best(
            lambda js=js, items=items: analyze(
                js, conditions=CONDITIONS, reference="P0", items=items, alpha=0.05
            ),
            args.rounds,
        )
        row: dict[str, Any] = {"n": n, "judgments": len(js), "seconds": secs}
        if n <= args.reference_max:
            ref_secs, ref = best(lambda js=js, items=items: per_item_scan(js, items), args.rounds)
            got = {r["item"]: r["confidence"] for r in res["items"]}
            row.update(reference_seconds=ref_secs, equal=got == ref)
        rows["judge"].append(row)
        print(
            f"judge n={n}: {secs:.3f} s"
            + (f", reference {row['reference_seconds']:.3f} s" if "equal" in row else "")
        )

        recs = sequences(n, random.Random(n))
        secs, (_kept, dropped) = best(lambda recs=recs: dedup_prefixes(recs), args.rounds)
        row = {"n": n, "seconds": secs, "dropped": len(dropped)}
        if n <= args.reference_max:
            ref_secs, ref_drop = best(lambda recs=recs: pairwise_dedup(recs), args.rounds)
            ids = {id(r) for r in dropped}
            row.update(
                reference_seconds=ref_secs, equal={i for i, r in enumerate(recs) if id(r) in ids} == ref_drop
            )
        rows["draws"].append(row)
        print(
            f"draws n={n}: {secs:.3f} s"
            + (f", reference {row['reference_seconds']:.3f} s" if "equal" in row else "")
        )
    rows["grouped_tail"] = tail_rows(args.tail_sizes, args.tail_reference_max, args.rounds)
    rows["draws_analysis"] = analysis_rows(args.analysis_sizes)
    out: dict[str, Any] = {
        "host": host(),
        "sizes": args.sizes,
        "tail_sizes": args.tail_sizes,
        "analysis_sizes": args.analysis_sizes,
    }
    for k, rs in rows.items():
        ref = [r for r in rs if "reference_seconds" in r]
        out[k] = {
            "rows": rs,
            "exponent": slope([r["n"] for r in rs], [r["seconds"] for r in rs]),
            "reference_exponent": slope([r["n"] for r in ref], [r["reference_seconds"] for r in ref]),
        }
        if rs and "cpu_seconds" in rs[0]:
            out[k]["cpu_exponent"] = slope([r["n"] for r in rs], [r["cpu_seconds"] for r in rs])
            out[k]["reference_cpu_exponent"] = slope(
                [r["n"] for r in ref], [r["reference_cpu_seconds"] for r in ref]
            )
        if k == "draws_analysis":
            out[k]["step_exponents"] = {
                step: slope([r["n"] for r in rs], [r["steps"][step] for r in rs])
                for step in (*ANALYSIS_STEPS, "rest")
            }
        line = (
            f"{k}: growth exponent {fmt(out[k]['exponent'])} (reference {fmt(out[k]['reference_exponent'])})"
        )
        if "cpu_exponent" in out[k]:
            line += f"; in CPU time {fmt(out[k]['cpu_exponent'])} (reference {fmt(out[k]['reference_cpu_exponent'])})"
        print(line)
    path = Path(__file__).parent / "results" / "scaling.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
