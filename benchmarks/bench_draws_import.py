"""The draws study's import as the record count grows: streamed against every row held.

Workload: generated import files of 10^3, 10^4 and 10^5 sequences (``--sizes``), 20 draws each
over 4 answers, 3 families x 2 sources x 3 conditions x 500 probes (fixed seed). Two stages,
as the pipeline runs them:

* measure: the import file validated and written as ``measurements.jsonl``. Streamed:
  ``atomic_write_jsonl(out, read_import(path))`` (validated whole, then read again row by
  row as it is written); held: the same with ``list(read_import(path))``, every row in memory
  at once.
* analyze: the measurement file through ``DrawsStudy.analyze`` with small Monte Carlo
  settings (``--permutations`` 9, ``--sims`` 2 per rho step: the registered 10,000 and 500 are
  ``bench_draws.py``'s subject and take minutes at 10^5). Streamed: the rows read one at a
  time, each sequence kept as a record of shared answers; held: the rows read into a list first.

For each size and path: seconds (best of ``--rounds``, without tracing) and peak traced memory
(``tracemalloc``, one more pass). The two outputs are compared byte for byte. No assertion on
times. Writes ``benchmarks/results/draws_import.json``.

    python benchmarks/bench_draws_import.py [--sizes 1000 10000 100000] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir

from host import host  # benchmarks/host.py (the script's own directory)
from lmaudit.config.overrides import canonical
from lmaudit.config.store import register_configs
from lmaudit.provenance.io import atomic_write_jsonl, iter_jsonl
from lmaudit.studies.base import Measurements
from lmaudit.studies.draws.importer import read_import
from lmaudit.studies.draws.study import DrawsStudy

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "draws_import.json"


def write_import(path: Path, n: int) -> Path:
    rng = random.Random(36017)
    with path.open("w") as fh:
        for i in range(n):
            row = {
                "family": f"family-{i % 3}",
                "source": f"exp-{(i // 3) % 2}",
                "condition": ("baseline", "persona", "pred-1")[(i // 6) % 3],
                "probe": f"p{(i // 18) % 500:03d}",
                "replicate": i // 9000,
                "draws": [rng.choice("ABCD"[: rng.randint(1, 4)]) for _ in range(20)],
            }
            fh.write(json.dumps(row) + "\n")
    return path


def paths(study: DrawsStudy, cfg: Any, src: Path, root: Path) -> dict[str, Callable[[], Any]]:
    """The four paths of one size: measure and analyze, streamed and held."""
    streamed, held = root / "streamed.jsonl", root / "held.jsonl"
    return {
        "measure streamed": lambda: atomic_write_jsonl(streamed, read_import(src)),
        "measure held": lambda: atomic_write_jsonl(held, list(read_import(src))),
        "analyze streamed": lambda: study.analyze(cfg, Measurements(source=str(streamed), path=streamed)),
        "analyze held": lambda: study.analyze(cfg, Measurements([o for _, o in iter_jsonl(held)], str(held))),
    }


def run(work: Callable[[], Any], rounds: int) -> tuple[float, int]:
    """Best seconds over ``rounds`` untraced passes, then the peak traced bytes of one more."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - t0)
    tracemalloc.start()
    try:
        work()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return best, peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--permutations", type=int, default=9)
    ap.add_argument("--sims", type=int, default=2)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    register_configs()
    overrides, _ = canonical(
        ["study=draws", f"study.permutations={args.permutations}", f"study.sims_per_step={args.sims}"]
    )
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    study = DrawsStudy()
    sizes: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-draws-import-") as tmp:
        root = Path(tmp)
        src = write_import(root / "warm.jsonl", 200)
        study.analyze(cfg, Measurements(source=str(src), path=src))  # imports SciPy, fills caches
        for n in args.sizes:
            src = write_import(root / f"import-{n}.jsonl", n)
            row: dict[str, Any] = {"rows": n, "bytes": src.stat().st_size}
            results = []
            for name, work in paths(study, cfg, src, root).items():
                s, peak = run(work, args.rounds)
                row[name] = {"seconds": round(s, 3), "peak_mb": round(peak / 1e6, 2)}
                print(f"{n:>7,} rows  {name:<17} {s:7.2f} s  peak {peak / 1e6:8.2f} MB", flush=True)
                if name.startswith("analyze"):
                    results.append(json.dumps(work().results, sort_keys=True))
            row["same_bytes"] = (root / "streamed.jsonl").read_bytes() == (root / "held.jsonl").read_bytes()
            row["same_results"] = results[0] == results[1]
            print(
                f"{n:>7,} rows  identical measurements: {row['same_bytes']}, results: {row['same_results']}"
            )
            sizes.append(row)
    out = {
        "workload": {
            "draws": 20,
            "answers": 4,
            "permutations": args.permutations,
            "sims_per_step": args.sims,
        },
        "sizes": sizes,
        "machine": host(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
