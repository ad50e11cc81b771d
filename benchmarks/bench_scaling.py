"""Growth with the record count of the two steps that were quadratic: the judge analysis
(per-item confidences) and the draws import's prefix de-duplication.

Workloads (fixed seed):

* judge: N prompts x 4 conditions (P0, PA, PB, PAB) x 1 replicate, random winners and
  confidences, through :func:`lmaudit.studies.judge.analysis.analyze`; the reference is the
  per-item scan the analysis used before (every judgment of a condition read once per item),
  run only where it finishes in reasonable time.
* draws: N sequences of 20 draws over 3 answers under one key (one family, condition, probe,
  replicate), a third of them prefixes of others, through
  :func:`lmaudit.studies.draws.importer.dedup_prefixes`; the reference is the pairwise check of
  each sequence against every kept one.

For each N: seconds (best of ``--rounds``) and, over the sizes, the growth exponent (the
least-squares slope of log seconds on log N). The fast and reference outputs are compared where
both ran. No assertion on times. Writes ``benchmarks/results/scaling.json``.

    python benchmarks/bench_scaling.py [--sizes 1000 10000 100000] [--reference-max 10000]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from host import host  # benchmarks/host.py (the script's own directory)
from lmaudit.studies.draws.importer import SequenceRecord, dedup_prefixes
from lmaudit.studies.judge.analysis import Judgment, analyze

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


def best(fn: Callable[[], Any], rounds: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def slope(ns: Sequence[int], secs: Sequence[float]) -> float | None:
    pts = [(math.log(n), math.log(s)) for n, s in zip(ns, secs, strict=True) if s > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--reference-max", type=int, default=10000, help="largest N the references run at")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    rows: dict[str, list[dict[str, Any]]] = {"judge": [], "draws": []}
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
    out: dict[str, Any] = {"host": host(), "sizes": args.sizes}
    for k, rs in rows.items():
        ref = [r for r in rs if "reference_seconds" in r]
        out[k] = {
            "rows": rs,
            "exponent": slope([r["n"] for r in rs], [r["seconds"] for r in rs]),
            "reference_exponent": slope([r["n"] for r in ref], [r["reference_seconds"] for r in ref]),
        }
        print(f"{k}: growth exponent {out[k]['exponent']:.2f} (reference {out[k]['reference_exponent']:.2f})")
    path = Path(__file__).parent / "results" / "scaling.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
