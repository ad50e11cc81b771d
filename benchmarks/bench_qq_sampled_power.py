"""QQ sampled estimand: false-positive rate and power per number of draws, the decision over the
sampling region against the frequencies read as exact probabilities, in one run.

The workload is the pilot bank's 18 items (Track M, both label mappings, the default run's
cells) on two ``sim`` ground-truth agents, whose label probabilities are the truth:

* ``sim_projective``: satisfies QQ exactly (``q = 0``, ``Gamma <= 0`` at every item), so every
  VIOLATED or CONTEXTUAL is a false positive;
* ``sim_mixture``: polarity-dependent repetition, ``q = -0.6 (u - v)``: 17 items violate QQ
  beyond the margin (``|q| > 0.02``), one does not.

Each replicate draws every position's ``n`` answers as one multinomial with the agent's
probabilities (the distribution the sim backend samples at temperature 1) and analyses them as a
sampled run does (:func:`lmaudit.studies.qq.calibration.calibrate`). The baseline, on the same
replicates: the same decision rules with the frequencies read as exact probabilities (the sampled
estimand's decision before it carried sampling error).

Printed per ``n``: the false-positive rate (share of (QQ-satisfying item, replicate) pairs
certified VIOLATED) and the largest per-item CONTEXTUAL rate on ``sim_projective``, the largest
per-item miss rate of the region and its mean over items, beside the largest exact per-item
miss probability (:func:`~lmaudit.studies.qq.calibration.miss_probability`; nominal level: alpha), and the power on ``sim_mixture`` (share
of (violating item, replicate) pairs certified VIOLATED), each for the region and the exact
reading, and the share of the projective agent's items certified SATISFIED (the region's price:
SATISFIED needs the whole q range within epsilon). Written to ``benchmarks/results/qq_sampled_power.json``.

    python benchmarks/bench_qq_sampled_power.py [--reps 200] [--ns 20,50,200,1000,5000,20000] [--seed 20260701]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from host import host  # benchmarks/host.py (the script's own directory)
from report_file import write_report

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "qq_sampled_power.json"
AGENTS = ("sim_projective", "sim_mixture")


def truth(model: str) -> list[Any]:
    """The agent's label probabilities at every position of the default run's cells."""
    from hydra import compose, initialize_config_dir

    from lmaudit.backends.sim import build_sim_backend
    from lmaudit.config.overrides import canonical
    from lmaudit.config.store import register_configs
    from lmaudit.studies.qq.measure import agent_rows
    from lmaudit.studies.qq.planning import cells_for
    from lmaudit.studies.qq.records import Measurement

    register_configs()
    args, _ = canonical([f"model={model}", f"study.items.path={REPO / 'data/qq/items/pilot.json'}"])
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=args)
    rows = agent_rows(cells_for(cfg), build_sim_backend(cfg.model), "logprob", {})
    return [Measurement.from_json({k: v for k, v in r.items() if k != "kind"}) for r in rows]


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:5.1f}%"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--reps", type=int, default=200, help="replicates per n and agent")
    parser.add_argument(
        "--ns", default="20,50,200,1000,5000,20000", help="draws per position, comma-separated"
    )
    parser.add_argument("--seed", type=int, default=20260701)
    parser.add_argument(
        "--alpha", type=float, default=None, help="family-wise level per item (default: the config's)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    from lmaudit.studies.qq.calibration import calibrate, miss_probability
    from lmaudit.studies.qq.result import QQParams

    params = QQParams() if args.alpha is None else QQParams(sampled_alpha=args.alpha)
    ns = [int(x) for x in args.ns.split(",")]
    start = time.perf_counter()
    truths = {model: truth(model) for model in AGENTS}
    points = {
        model: calibrate(truths[model], ns, args.reps, params, args.seed, with_exact=True) for model in AGENTS
    }
    exact_miss = {
        n: max(miss_probability(truths["sim_projective"], n, params.sampled_alpha).values()) for n in ns
    }
    seconds = time.perf_counter() - start
    rows = []
    for i, n in enumerate(ns):
        fp, pw = points["sim_projective"][i].to_json(), points["sim_mixture"][i].to_json()
        rows.append(
            {
                "n": n,
                "false_positive_rate": fp["false_positive_rate"],
                "false_positive_rate_exact": fp["exact_reading"]["false_positive_rate"],
                "max_false_contextual_rate": fp["max_false_contextual_rate"],
                "max_false_contextual_rate_exact": fp["exact_reading"]["max_false_contextual_rate"],
                "satisfied_rate": fp["satisfied_rate"],
                "miss_rate": fp["miss_rate"],
                "max_miss_rate": fp["max_miss_rate"],
                "max_miss_probability": exact_miss[n],
                "power": pw["power"],
                "power_exact": pw["exact_reading"]["power"],
                "false_positive_rate_violating_agent": pw["false_positive_rate"],
                "false_positive_rate_violating_agent_exact": pw["exact_reading"]["false_positive_rate"],
            }
        )
    report = {
        "benchmark": "qq_sampled_power",
        "alpha": params.sampled_alpha,
        "epsilon": params.epsilon,
        "reps": args.reps,
        "seed": args.seed,
        "satisfying_items": {m: points[m][0].to_json()["n_satisfying_items"] for m in AGENTS},
        "rows": rows,
        "seconds": seconds,
        "machine": host(),
    }
    print(
        f"QQ sampled estimand: {args.reps} replicates per n, alpha = {params.sampled_alpha} per item, "
        f"epsilon = {params.epsilon} (region | frequencies read as exact)"
    )
    print(
        f"  {'n':>5}  {'false VIOLATED (projective)':>28}  {'max CONTEXTUAL rate':>20}  "
        f"{'miss (mean, max; exact max)':>26}  {'power (sim_mixture)':>20}  {'SATISFIED (projective)':>22}"
    )
    for r in rows:
        print(
            f"  {r['n']:>5}  {_pct(r['false_positive_rate']):>13} | {_pct(r['false_positive_rate_exact']):<12}  "
            f"{_pct(r['max_false_contextual_rate']):>9} | {_pct(r['max_false_contextual_rate_exact']):<8}  "
            f"{_pct(r['miss_rate'])}, {_pct(r['max_miss_rate'])}; {_pct(r['max_miss_probability'])}  {_pct(r['power']):>9} | {_pct(r['power_exact']):<8}  "
            f"{_pct(r['satisfied_rate']):>22}"
        )
    print(f"  ({seconds:.0f} s)")
    write_report(report, args.out)
    return report


if __name__ == "__main__":
    main()
