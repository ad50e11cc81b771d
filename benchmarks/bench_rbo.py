"""Vectorised all-pairs RBO over 1,000 shuffles against the PyPI ``rbo`` package, same run.

Workload (one choir question's signal-to-chance null): 9 models x 20-item ranked concept
lists drawn from a 60-concept pool with Zipf-like popularity (so models share defaults),
1,000 shuffles of concept assignments across models (:func:`shuffle_assignments`), and RBO_ext
(p = 0.9) for all 36 model pairs of every shuffle: 36,000 list pairs.

Compared on the same shuffled lists:

* vectorised: :func:`lmaudit.stats.rbo.rbo_all_pairs` on the ``(1000, 9, 20)`` id array
  (median of 5 runs after a warm-up);
* baseline: ``rbo.RankingSimilarity(a, b).rbo_ext(p=0.9)`` (PyPI ``rbo`` 0.1.3) pair by pair;
* scalar: :func:`lmaudit.stats.rbo.rbo_ext` (ours, tie-aware; strict rankings take a closed
  form) pair by pair, and its time per call against the package's.

Goals: the scalar at most the package's time per call; the vectorised at least 20x the
package's loop (both printed with the verdict).

Every vectorised value is checked against the package's within 1e-9 (all lists here are
strict and non-empty, where the package is right). Prints the ratio; writes it, with the
machine and its load, to ``benchmarks/results/rbo.json``. No assertion on absolute times.

    python benchmarks/bench_rbo.py [--models 9] [--depth 20] [--shuffles 1000] [--pool 60]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from host import host  # benchmarks/host.py (the script's own directory)
from lmaudit.stats.rbo import encode_lists, rbo_all_pairs, rbo_ext, shuffle_assignments

RESULTS = Path(__file__).resolve().parent / "results" / "rbo.json"


def make_lists(rng: np.random.Generator, models: int, depth: int, pool: int) -> list[list[str]]:
    weights = 1.0 / np.arange(1, pool + 1) ** 0.8
    weights /= weights.sum()
    return [[f"c{k}" for k in rng.choice(pool, size=depth, replace=False, p=weights)] for _ in range(models)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=int, default=9)
    ap.add_argument("--depth", type=int, default=20)
    ap.add_argument("--shuffles", type=int, default=1000)
    ap.add_argument("--pool", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    try:
        import rbo as pypi_rbo
    except ImportError:
        raise SystemExit("the PyPI rbo package is missing: pip install --no-deps rbo==0.1.3") from None

    lists = make_lists(np.random.default_rng(20261130), args.models, args.depth, args.pool)
    enc = encode_lists(lists)
    t0 = time.perf_counter()
    draws = shuffle_assignments(enc.ids, args.shuffles, rng=np.random.default_rng(1))
    t_shuffle = time.perf_counter() - t0

    fast = rbo_all_pairs(draws, 0.9)  # warm-up; then the median of --repeats runs
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        fast = rbo_all_pairs(draws, 0.9)
        times.append(time.perf_counter() - t0)
    t_fast = float(np.median(times))

    ii, jj = np.triu_indices(args.models, 1)
    rows = [[[int(x) for x in row if x >= 0] for row in d] for d in draws]  # plain lists for both loops
    t0 = time.perf_counter()
    theirs = np.array(
        [
            [pypi_rbo.RankingSimilarity(d[i], d[j]).rbo_ext(p=0.9) for i, j in zip(ii, jj, strict=True)]
            for d in rows
        ]
    )
    t_pkg = time.perf_counter() - t0
    t0 = time.perf_counter()
    ours = np.array([[rbo_ext(d[i], d[j], 0.9) for i, j in zip(ii, jj, strict=True)] for d in rows])
    t_scalar = time.perf_counter() - t0

    diff_pkg = float(np.abs(fast - theirs).max())
    diff_scalar = float(np.abs(fast - ours).max())
    if diff_pkg > 1e-9 or diff_scalar > 1e-9:
        raise SystemExit(f"results differ: vs rbo {diff_pkg:.2e}, vs scalar {diff_scalar:.2e}")
    pairs = fast.size
    out: dict[str, Any] = {
        "workload": {
            "models": args.models,
            "depth": args.depth,
            "shuffles": args.shuffles,
            "pool": args.pool,
            "list_pairs": pairs,
        },
        "vectorised_s": round(t_fast, 4),
        "pypi_rbo_s": round(t_pkg, 3),
        "scalar_rbo_ext_s": round(t_scalar, 3),
        "shuffle_s": round(t_shuffle, 3),
        "speedup_vs_pypi_rbo": round(t_pkg / t_fast, 1),
        "speedup_vs_scalar": round(t_scalar / t_fast, 1),
        "scalar_us_per_call": round(t_scalar / pairs * 1e6, 2),
        "pypi_rbo_us_per_call": round(t_pkg / pairs * 1e6, 2),
        "goal_scalar_not_slower": t_scalar <= t_pkg,
        "goal_vectorised_20x": t_pkg / t_fast >= 20.0,
        "max_abs_diff_vs_pypi_rbo": diff_pkg,
        "max_abs_diff_vs_scalar": diff_scalar,
        "machine": host(),
    }
    print(
        f"RBO_ext p=0.9, {args.models} models x {args.depth} items, {args.shuffles} shuffles = {pairs} list pairs: "
        f"vectorised {t_fast:.3f} s, PyPI rbo {t_pkg:.2f} s: speedup {t_pkg / t_fast:.0f}x "
        f"(max |diff| {diff_pkg:.1e})"
    )
    print(
        f"scalar rbo_ext {t_scalar / pairs * 1e6:.1f} us a call, PyPI rbo {t_pkg / pairs * 1e6:.1f} us "
        f"(goal: not slower: {'met' if t_scalar <= t_pkg else 'NOT met'}); vectorised at least 20x the "
        f"package: {'met' if t_pkg / t_fast >= 20 else 'NOT met'}"
    )
    print(
        f"our scalar rbo_ext {t_scalar:.2f} s ({t_scalar / t_fast:.0f}x the vectorised); drawing the "
        f"{args.shuffles} shuffles {t_shuffle:.2f} s (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
