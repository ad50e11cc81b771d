"""The default audit end to end (``python run.py``, cold): its wall time and its parts.

Each round runs, in fresh processes and under the same load:

* the default run, exactly as ``make run`` does (``python run.py``), with an empty response
  cache and run directory, in an MLflow store that already exists (as after a first run); its
  wall time is taken from outside the process, start to exit. The embedded model's one-time
  conversion (GGUF to a transformers checkpoint) is done before the first round;
* the import floor: a process that only imports the libraries the default run must import
  (Hydra, torch, transformers' Gemma 3, MLflow's client, matplotlib, SciPy's special
  functions) and loads the embedded model's tokenizer, as the run does; nothing else.

The run's audit record gives its scoring time (``measure.seconds.label_logprobs``: the 186
prompts' label probabilities, loading the model on first use and cache writes included) and
its gate G3 sampling time (``measure.seconds.sample``). Printed per round and as medians: wall,
scoring, G3, floor and the rest (wall - scoring - G3 - floor: lmaudit's own work: config,
plan, G1, analysis, report and figures, MLflow records, process start and exit). No goal is
set on their ratio and nothing is asserted on times. The measurements' digests are printed
(informational: fresh probabilities are promised within 1e-5, not bit for bit). Results go to
``results/default_run.json``.

    python benchmarks/bench_default_run.py [--rounds 3] [override ...]
"""

from __future__ import annotations

import argparse
import json
import os
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
PARTS = ("wall", "scoring", "g3_sampling", "floor", "rest")

FLOOR = """
import hydra, omegaconf
import torch
import transformers.models.gemma3.modeling_gemma3
from transformers import AutoModelForCausalLM, AutoTokenizer
from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient
from matplotlib.figure import Figure
import scipy.special
from lmaudit.backends.hf.embedded import ensure_embedded_model
AutoTokenizer.from_pretrained(str(ensure_embedded_model()))
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


def _paths(work: Path, name: str) -> list[str]:
    """A run's own empty cache and results folders, and the store every run shares."""
    out = work / name
    return [
        f"paths.cache={out / 'cache'}",
        f"paths.results={out / 'results'}",
        f"paths.mlruns={work / 'mlruns'}",
        "progress=false",
    ]


def _run(work: Path, overrides: list[str], name: str) -> dict[str, Any]:
    wall = _timed([sys.executable, "run.py", *_paths(work, name), *overrides])
    (record,) = (work / name / "results").glob("*/*/audit_record.json")
    measure = json.loads(record.read_text(encoding="utf-8"))["measure"]
    seconds = measure["seconds"]
    return {
        "wall": wall,
        "scoring": float(seconds["label_logprobs"]),
        "g3_sampling": float(seconds.get("sample", 0.0)),
        "backend_build": float(seconds.get("load", 0.0)),
        "measure_total": float(seconds["total"]),
        "measurements_sha256": measure["measurements"]["sha256"],
    }


def _round(work: Path, overrides: list[str], r: int) -> dict[str, Any]:
    row = _run(work, overrides, f"round{r}")
    floor = _timed([sys.executable, "-c", FLOOR])
    return {
        **row,
        "floor": floor,
        "rest": row["wall"] - row["scoring"] - row["g3_sampling"] - floor,
        "load_average": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args, overrides = parser.parse_known_args()
    with tempfile.TemporaryDirectory(prefix="lmaudit-bench-run-") as tmp:
        work = Path(tmp)
        # the MLflow store exists beforehand, as it does after a first run (a simulated run of the
        # same study makes it), and so does the embedded model's one-time conversion, which the
        # first run on a fresh machine would include
        subprocess.run(
            [
                sys.executable,
                "-c",
                "from lmaudit.backends.hf.embedded import ensure_embedded_model; ensure_embedded_model()",
            ],
            cwd=REPO,
            env=_env(),
            check=True,
        )
        _timed([sys.executable, "run.py", *_paths(work, "warmup"), "model=sim_projective"])
        rounds = []
        for r in range(args.rounds):
            row = _round(work, overrides, r)
            rounds.append(row)
            print(
                f"round {r}: wall {row['wall']:.1f} s | scoring {row['scoring']:.1f} s"
                f" | G3 {row['g3_sampling']:.1f} s | import floor {row['floor']:.1f} s"
                f" | rest {row['rest']:.1f} s | load {row['load_average']:.1f}",
                flush=True,
            )
    med = {k: statistics.median(r[k] for r in rounds) for k in PARTS}
    digests = sorted({r["measurements_sha256"] for r in rounds})
    print(
        f"median of {len(rounds)} rounds: wall {med['wall']:.1f} s = scoring {med['scoring']:.1f}"
        f" + G3 {med['g3_sampling']:.1f} + import floor {med['floor']:.1f} + rest {med['rest']:.1f}"
    )
    print(f"measurements digests: {', '.join(d[:12] for d in digests)}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "benchmark": "default_run",
                "overrides": overrides,
                "rounds": rounds,
                "median": med,
                "measurements_sha256": digests,
                "machine": host(),
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )


if __name__ == "__main__":
    main()
