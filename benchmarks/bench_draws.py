"""The draws study's Monte Carlo engines against straightforward Python loops, in the same run.

Workload: the registered analysis of 3 families x 500 sequences x 20 draws (planted
independent answers, 4 possible answers with Dirichlet(1) shares per sequence):

* permutation null: ``B = 10,000`` joint permutations per family. Vectorised
  (:func:`permutation_null`: column-wise Fisher-Yates over many datasets at once) against a
  per-permutation loop (``for b: for sequence: rng.permutation``, repeats counted with numpy);
* persistence simulation (``rho_upper`` curve and power): 51 values of ``rho`` x 500 datasets
  per family. Vectorised (:func:`persistence_null`) against a per-dataset loop that draws each
  sequence draw by draw in Python;
* the whole registered analysis of the three families (:func:`analyze_records`, registered
  settings), timed end to end.

The loops are slow, so they run on a slice (``--naive-perms`` permutations, ``--naive-sims``
datasets at one ``rho``) and are compared per unit of work. Prints the ratios (target >= 20x)
and the end-to-end seconds (target < 60 s on this machine); writes them, with the machine
and its load, to ``benchmarks/results/draws.json``. No assertion on absolute times.

    python benchmarks/bench_draws.py [--families 3] [--sequences 500] [--draws 20] [--naive-perms 20]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from host import host  # benchmarks/host.py (the script's own directory)
from lmaudit.studies.draws.analysis import analyze_records
from lmaudit.studies.draws.family import AnalysisParams
from lmaudit.studies.draws.importer import SequenceRecord
from lmaudit.studies.draws.sequences import encode
from lmaudit.studies.draws.simulate import draw_persistent, permutation_null, persistence_null

RESULTS = Path(__file__).resolve().parent / "results" / "draws.json"


def make_family(rng: np.random.Generator, n_seq: int, n: int) -> list[list[int]]:
    shares = rng.dirichlet(np.ones(4), size=n_seq)
    return [x.tolist() for x in draw_persistent(shares, [n] * n_seq, 0.0, rng=rng)]


def naive_permutations(seqs: list[list[int]], n_perm: int, rng: np.random.Generator) -> np.ndarray:
    arrays = [np.asarray(s) for s in seqs]
    out = np.empty(n_perm)
    for b in range(n_perm):
        total = 0
        for x in arrays:
            p = rng.permutation(x)
            total += int(np.count_nonzero(p[1:] == p[:-1]))
        out[b] = total
    return out


def naive_simulation(seqs: list[list[int]], rho: float, n_sims: int, rng: np.random.Generator) -> np.ndarray:
    out = np.empty(n_sims)
    for d in range(n_sims):
        total = 0.0
        for s in seqs:
            x = [s[int(rng.integers(len(s)))]]
            for _ in range(1, len(s)):
                x.append(x[-1] if rng.random() < rho else s[int(rng.integers(len(s)))])
            counts: dict[int, int] = {}
            for a in x:
                counts[a] = counts.get(a, 0) + 1
            total += sum(a == b for a, b in itertools.pairwise(x)) - sum(
                c * (c - 1) for c in counts.values()
            ) / len(x)
        out[d] = total
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--families", type=int, default=3)
    ap.add_argument("--sequences", type=int, default=500)
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--naive-perms", type=int, default=20)
    ap.add_argument("--naive-sims", type=int, default=5)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    rng = np.random.default_rng(20261030)
    fams = [make_family(rng, args.sequences, args.draws) for _ in range(args.families)]
    params = AnalysisParams()  # the registered settings: B = 10,000, rho 0..0.5 by 0.01, 500 per step
    seqs = fams[0]
    sset = encode(seqs)

    t0 = time.perf_counter()
    permutation_null(sset, n_perm=params.n_perm, rng=np.random.default_rng(1))
    t_perm = time.perf_counter() - t0
    t0 = time.perf_counter()
    naive_permutations(seqs, args.naive_perms, np.random.default_rng(2))
    t_perm_naive = (time.perf_counter() - t0) / args.naive_perms * params.n_perm

    t0 = time.perf_counter()
    persistence_null(sset, params.rho_grid, n_sims=params.n_sims, rng=np.random.default_rng(3))
    t_sim = time.perf_counter() - t0
    t0 = time.perf_counter()
    naive_simulation(seqs, 0.3, args.naive_sims, np.random.default_rng(4))
    t_sim_naive = (time.perf_counter() - t0) / args.naive_sims * params.n_sims * len(params.rho_grid)

    records = [
        SequenceRecord(f"family-{f}", "bench", "c", f"p{i}", tuple(s), None)
        for f, fam in enumerate(fams)
        for i, s in enumerate(fam)
    ]
    t0 = time.perf_counter()
    results = analyze_records(records, params, exclude_patterns=[])
    t_all = time.perf_counter() - t0

    out: dict[str, Any] = {
        "workload": {
            "families": args.families,
            "sequences": args.sequences,
            "draws": args.draws,
            "B": params.n_perm,
            "rho_steps": len(params.rho_grid),
            "sims_per_step": params.n_sims,
        },
        "permutation_null": {
            "vectorised_s": round(t_perm, 3),
            "naive_s_extrapolated": round(t_perm_naive, 1),
            "speedup": round(t_perm_naive / t_perm, 1),
        },
        "persistence_simulation": {
            "vectorised_s": round(t_sim, 3),
            "naive_s_extrapolated": round(t_sim_naive, 1),
            "speedup": round(t_sim_naive / t_sim, 1),
        },
        "registered_analysis_s": round(t_all, 2),
        "families_rejected": results["n_rejected"],
        "machine": host(),
    }
    print(
        f"permutation null, one family, B={params.n_perm}: vectorised {t_perm:.2f} s, per-permutation loop "
        f"{t_perm_naive:.0f} s (extrapolated from {args.naive_perms}): speedup {t_perm_naive / t_perm:.0f}x"
    )
    print(
        f"persistence simulation, one family, {len(params.rho_grid)} x {params.n_sims}: vectorised {t_sim:.2f} s, "
        f"per-dataset loop {t_sim_naive:.0f} s (extrapolated from {args.naive_sims}): "
        f"speedup {t_sim_naive / t_sim:.0f}x"
    )
    print(
        f"whole registered analysis, {args.families} families x {args.sequences} x {args.draws}: {t_all:.1f} s "
        f"(target < 60 s; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
