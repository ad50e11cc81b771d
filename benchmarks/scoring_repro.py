"""Is the scoring bit for bit the same from process to process? A diagnostic, not a benchmark.

Scores the first ``--prompts`` prompts of the default run's first scoring unit (the unit whose
96 prompts differed in the one kept run of ``benchmarks/differs/``) in ``--runs`` fresh
processes, ``--jobs`` at a time, and prints each process's digest of the label probabilities.
Each process records a digest of every module output of the model, forward by forward; when a
process's probabilities differ from the first process's, both records are kept under
``--out`` and the first module output that differs is printed, naming the op to look at.

    python benchmarks/scoring_repro.py [--runs 100] [--jobs 2] [--prompts 16] [--busy]

``--busy`` adds a process importing MLflow over and over (what the run's MLflow worker does at
the start of a run), the load under which the differing runs were seen. No assertion: it
prints what it found and exits 0; how often a difference appears is the result.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

CHILD = """
import hashlib, json, sys
sys.path.insert(0, {bench!r})
import torch
from bench_qq_measure import default_requests
from lmaudit.backends.factory import build_backend
from lmaudit.backends.hf_trie import scoring_units

cfg, requests, _ = default_requests([])
backend = build_backend(cfg.model)
ids = backend._encode_texts([backend.render(r.messages) for r in requests])
unit = scoring_units(ids, backend.unit_tokens)[0][: {prompts}]
outputs = []

def hook(name):
    def record(module, args, out):
        t = out[0] if isinstance(out, tuple) else out
        if isinstance(t, torch.Tensor):
            digest = hashlib.sha256(t.detach().contiguous().numpy().tobytes()).hexdigest()[:16]
            outputs.append([name, list(t.shape), digest])
    return record

for name, module in backend.model.named_modules():
    if name:
        module.register_forward_hook(hook(name))
results = backend.label_logprobs([requests[i] for i in unit], top_k=0, one_unit=True)
probs = [r.probs for r in results]
digest = hashlib.sha256(json.dumps(probs, sort_keys=True).encode()).hexdigest()[:12]
json.dump({{"digest": digest, "probs": probs, "outputs": outputs}}, open(sys.argv[1], "w"))
print(digest)
"""

BUSY = "import mlflow.store.tracking.sqlalchemy_store"


def _one(code: str, path: Path) -> dict[str, Any]:
    # this checkout's lmaudit, whatever is installed
    src = os.pathsep.join(p for p in (str(REPO / "src"), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": src}
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], cwd=REPO, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"a scoring process failed:\n{done.stderr[-3000:]}")
    record: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return record


def _first_difference(a: dict[str, Any], b: dict[str, Any]) -> str:
    for k, (x, y) in enumerate(zip(a["outputs"], b["outputs"], strict=False)):
        if x != y:
            return f"module output {k} ({x[0]}, shape {x[1]}): {x[2]} against {y[2]}"
    return "no module output differs (the difference is after the modules: heads or softmax)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--busy", action="store_true")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "differs" / "scoring_repro")
    args = parser.parse_args()
    code = CHILD.format(bench=str(REPO / "benchmarks"), prompts=args.prompts)
    busy = None
    t0 = time.monotonic()
    if args.busy:
        busy = subprocess.Popen(
            [
                sys.executable,
                "-c",
                f"import subprocess, sys\nwhile True: subprocess.run([sys.executable, '-c', {BUSY!r}])",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    digests: dict[str, int] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="lmaudit-repro-") as tmp:
            first = _one(code, Path(tmp) / "first.json")
            digests[first["digest"]] = 1
            print(f"run 1: {first['digest']}", flush=True)

            def run(k: int) -> tuple[int, dict[str, Any]]:
                return k, _one(code, Path(tmp) / f"run{k}.json")

            with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
                for k, rec in pool.map(run, range(2, args.runs + 1)):
                    digests[rec["digest"]] = digests.get(rec["digest"], 0) + 1
                    line = f"run {k}: {rec['digest']}"
                    if rec["digest"] != first["digest"]:
                        args.out.mkdir(parents=True, exist_ok=True)
                        for name, r in (("first", first), (f"run{k}", rec)):
                            (args.out / f"{name}.json").write_text(json.dumps(r), encoding="utf-8")
                        line += f" DIFFERS: {_first_difference(first, rec)}; kept in {args.out}"
                    print(line, flush=True)
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
    elapsed = time.monotonic() - t0
    print(f"{args.runs} processes in {elapsed:.0f} s; digests: {json.dumps(digests)}")


if __name__ == "__main__":
    main()
