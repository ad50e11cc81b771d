"""The default audit end to end (``python run.py``, cold), against its scoring, the import floor
and the same run on transformers' Gemma 3.

Each round runs, in fresh processes and under the same load:

* the default run, exactly as ``make run`` does (``python run.py``), with an empty response
  cache and run directory (an MLflow store that already exists, as after a first run); its
  wall time is taken from outside the process, start to exit (the embedded model's one-time
  conversion is done before the first round). The embedded model runs on
  lmaudit's own Gemma 3 (``implementation=auto``);
* the same run with ``+model.implementation=transformers``: transformers' model, tokenizer and
  chat-template rendering, the baseline a user would otherwise have (the measurements must be
  byte-identical to the default run's);
* the import floor: a process that only imports what the default run must import in its main
  process (torch, lmaudit's Gemma 3, Hydra) and loads the embedded
  model's tokenizer, as the run does, under the run's garbage-collector policy
  (:mod:`lmaudit.runtime`); nothing else. MLflow is imported by the run's MLflow worker
  (:mod:`lmaudit.tracking.worker`), in a second process, while the main process does this.

The two runs alternate in order from round to round. The default run's audit record gives its
scoring time (``measure.seconds.label_logprobs``: the 186 prompts' label probabilities, cache
writes included) and its gate G3 sampling time (``measure.seconds.sample``). Printed per round
and as medians: wall, scoring, G3, floor, the rest (lmaudit's own work: config, plan,
analysis, report, MLflow records, process start and exit), the ratio wall / scoring (the
performance issue's goal: at most 1.5), and the transformers run's wall and scoring. Every
run's measurements.jsonl must be byte-identical (same draws, same probabilities); the digests
are printed. Results go to ``results/default_run.json``. No assertion on times.

    python benchmarks/bench_default_run.py [--rounds 3] [override ...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from host import host  # benchmarks/host.py (the script's own directory)

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "default_run.json"
#: where runs whose measurements differ are kept (not versioned)
DIFFERS = REPO / "benchmarks" / "differs"

FLOOR = """
from lmaudit.runtime import long_lived, one_job_process
one_job_process()  # the run's own garbage-collector policy (lmaudit.runtime)
with long_lived():
    import hydra, omegaconf
    import torch
    import lmaudit.backends.gemma3
    from lmaudit.backends.embedded import ensure_embedded_model
    from lmaudit.backends.hf_load import tokenizer_engine
    from lmaudit.backends.hf_tokenizer import FastTokenizer
    path = str(ensure_embedded_model())
    FastTokenizer(path, engine=tokenizer_engine(path, embedded=True))
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
    return env


def _timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} ... failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return wall


def _run(work: Path, overrides: list[str], name: str) -> dict[str, Any]:
    out = work / name
    args = [
        f"paths.cache={out / 'cache'}",
        f"paths.results={out / 'results'}",
        f"paths.mlruns={work / 'mlruns'}",
        "progress=false",
        *overrides,
    ]
    wall = _timed([sys.executable, "run.py", *args])
    (record,) = (out / "results").glob("*/*/audit_record.json")
    measure = json.loads(record.read_text(encoding="utf-8"))["measure"]
    seconds = measure["seconds"]
    return {
        "wall": wall,
        "scoring": float(seconds["label_logprobs"]),
        "g3_sampling": float(seconds.get("sample", 0.0)),
        "implementation": measure["backend_identity"].get("implementation", "transformers"),
        "measurements_sha256": measure["measurements"]["sha256"],
        "run_dir": str(record.parent),
    }


def _without_dirs(row: dict[str, Any]) -> dict[str, Any]:
    """A round's record without its runs' temporary directories."""
    out = {k: v for k, v in row.items() if k != "run_dir"}
    if "transformers" in out:
        out["transformers"] = _without_dirs(out["transformers"])
    return out


def _round(work: Path, overrides: list[str], r: int) -> dict[str, Any]:
    runs: dict[str, dict[str, Any]] = {}
    order = ["lmaudit", "transformers"] if r % 2 == 0 else ["transformers", "lmaudit"]
    for name in order:
        extra = ["+model.implementation=transformers"] if name == "transformers" else []
        runs[name] = _run(work, [*overrides, *extra], f"round{r}-{name}")
    row = runs["lmaudit"]
    floor = _timed([sys.executable, "-c", FLOOR])
    return {
        **row,
        "floor": floor,
        "rest": row["wall"] - row["scoring"] - row["g3_sampling"] - floor,
        "wall_over_scoring": row["wall"] / row["scoring"],
        "transformers": runs["transformers"],
        "load_average": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args, overrides = parser.parse_known_args()
    with tempfile.TemporaryDirectory(prefix="lmaudit-bench-run-") as tmp:
        work = Path(tmp)
        # the MLflow store exists beforehand, as it does after a first run, and so does the
        # embedded model's one-time conversion (GGUF to safetensors, about a minute), which the
        # first run on a fresh machine would otherwise include
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from lmaudit.tracking.mlflow_log import ensure_experiment; "
                "ensure_experiment(sys.argv[1], 'lmaudit-warmup'); "
                "from lmaudit.backends.embedded import ensure_embedded_model; ensure_embedded_model()",
                str(work / "mlruns"),
            ],
            cwd=REPO,
            env=_env(),
            check=True,
        )
        rounds = []
        kept: dict[str, Path] = {}  # one run of each measurements digest, while they differ
        for r in range(args.rounds):
            row = _round(work, overrides, r)
            rounds.append(row)
            for run in (run for done in rounds for run in (done, done["transformers"])):
                kept.setdefault(run["measurements_sha256"], Path(run["run_dir"]))
            if len(kept) > 1:  # keep them (measurements, audit record, report) to compare
                for sha, run_dir in kept.items():
                    shutil.copytree(run_dir, DIFFERS / sha[:12], dirs_exist_ok=True)
                print(f"measurements differ: one run of each digest kept in {DIFFERS}", flush=True)
            tf = row["transformers"]
            print(
                f"round {r}: wall {row['wall']:.1f} s | scoring {row['scoring']:.1f} s | G3 {row['g3_sampling']:.1f} s"
                f" | import floor {row['floor']:.1f} s | rest {row['rest']:.1f} s"
                f" | wall/scoring {row['wall_over_scoring']:.2f}"
                f" || transformers: wall {tf['wall']:.1f} s, scoring {tf['scoring']:.1f} s"
                f" | load {row['load_average']:.1f}",
                flush=True,
            )
    med = {
        k: statistics.median(r[k] for r in rounds)
        for k in ("wall", "scoring", "g3_sampling", "floor", "rest")
    }
    tf_med = {
        k: statistics.median(r["transformers"][k] for r in rounds) for k in ("wall", "scoring", "g3_sampling")
    }
    ratio = statistics.median(r["wall_over_scoring"] for r in rounds)
    paired = statistics.median(r["transformers"]["wall"] / r["wall"] for r in rounds)
    implementations = sorted({r["implementation"] for r in rounds})
    digests = sorted(
        {r["measurements_sha256"] for r in rounds}
        | {r["transformers"]["measurements_sha256"] for r in rounds}
    )
    print(
        f"median ({', '.join(implementations)}): wall {med['wall']:.1f} s = scoring {med['scoring']:.1f}"
        f" + G3 {med['g3_sampling']:.1f} + import floor {med['floor']:.1f} + rest {med['rest']:.1f}"
    )
    print(f"wall / scoring: {ratio:.3f} (goal <= 1.5)")
    print(
        f"transformers' Gemma 3: wall {tf_med['wall']:.1f} s, scoring {tf_med['scoring']:.1f} s, G3"
        f" {tf_med['g3_sampling']:.1f} s; its wall / lmaudit's (median of rounds) {paired:.2f}"
    )
    print(f"measurements identical in every run: {len(digests) == 1} ({', '.join(d[:12] for d in digests)})")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "benchmark": "default_run",
                "overrides": overrides,
                "rounds": [_without_dirs(row) for row in rounds],
                "median": med,
                "wall_over_scoring": ratio,
                "transformers_median": tf_med,
                "transformers_wall_over_lmaudit_wall": paired,
                "measurements_identical": len(digests) == 1,
                "machine": host(),
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )


if __name__ == "__main__":
    main()
