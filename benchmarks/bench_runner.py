"""The Lightning runner against the in-process path, on the default audit's requests, one run.

Workload: the default run's label requests (``python run.py``: 186 prompts) and a sampling load
like gate G3's (``--sample-requests`` prompts x ``--draws`` single-token draws), on the model of
the config (the embedded Gemma 3 270M by default). Each path scores them cold (a fresh response
cache) through the same ``CachedBackend`` the pipeline uses:

* in-process: ``HFBackend`` in this process (torch's default threads), model loaded beforehand;
* lightning, for each ``--devices`` value: ``LightningRunner`` worker processes (on CPU each gets
  ``cores // devices`` threads), started and warmed up on one request beforehand (their start,
  model load included, is printed separately).

Printed: seconds and prompts (draws) per second of each path, the ratios lightning(devices=1) /
in-process (goal <= 1.10) and lightning(devices=d) / lightning(devices=1), and the largest label
probability difference and whether every draw is identical to in-process. Results go to
``results/runner.json``.

    python benchmarks/bench_runner.py [--devices 1 2] [--accelerator cpu|gpu] [--rounds 1] [override ...]

``--embed N`` times the choir study's MiniLM embedder instead (``study.embedder.runner``): N
distinct texts embedded cold through ``CachedEmbedder``, in-process (model loaded beforehand)
and by ``LightningEmbedder`` at each ``--devices`` (ranks started and warmed up beforehand); it
prints seconds and texts per second per path, the ratios to in-process and whether every vector
is identical. Results go to ``results/runner_embed.json``.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "runner.json"
sys.path.insert(0, str(REPO / "benchmarks"))


def _timed(backend: Any, labels: list[Any], samples: list[Any], top_k: int) -> tuple[float, float, Any, Any]:
    from lmaudit.backends.cached import CachedBackend
    from lmaudit.provenance.cache import ResponseCache

    with tempfile.TemporaryDirectory() as tmp:
        cached = CachedBackend(backend, ResponseCache(Path(tmp)), progress=False)
        t0 = time.perf_counter()
        got_labels = cached.label_logprobs(labels, top_k=top_k)
        t1 = time.perf_counter()
        got_draws = cached.sample(samples)
        t2 = time.perf_counter()
    return t1 - t0, t2 - t1, got_labels, got_draws


def bench_embed(n: int, devices: list[int], accelerator: str, out_path: Path) -> dict[str, Any]:
    import numpy as np

    from lmaudit.backends.embed.cached import CachedEmbedder
    from lmaudit.backends.registry import build_embedder
    from lmaudit.provenance.cache import ResponseCache

    rng = np.random.default_rng(0)
    words = [w for w in Path(__file__).read_text().split() if w.isalpha()]
    texts = list(dict.fromkeys(" ".join(rng.choice(words, size=int(rng.integers(2, 14)))) for _ in range(n)))
    base = {"kind": "minilm", "batch_size": 64}
    paths: dict[str, Any] = {"inprocess": build_embedder(base)}
    paths["inprocess"].embed(texts[:2])  # loads the model
    startup: dict[str, float] = {}
    for d in devices:
        t0 = time.perf_counter()
        paths[f"lightning-{d}"] = build_embedder(
            {**base, "runner": "lightning", "devices": d, "accelerator": accelerator}
        )
        paths[f"lightning-{d}"].embed(texts[:2])  # starts the ranks, loads the model in each
        startup[f"lightning-{d}"] = round(time.perf_counter() - t0, 2)
    summary: dict[str, Any] = {}
    ref: Any = None
    identical = True
    for name, backend in paths.items():
        with tempfile.TemporaryDirectory() as tmp:
            cached = CachedEmbedder(backend, ResponseCache(Path(tmp)), batch_size=64, progress=False)
            t0 = time.perf_counter()
            got = cached.embed(texts)
            secs = time.perf_counter() - t0
        ref = got if ref is None else ref
        identical &= bool(np.array_equal(got, ref))
        summary[name] = {"s": round(secs, 3), "texts_per_s": round(len(texts) / secs, 1)}
        summary[name]["startup_s"] = startup.get(name, 0.0)
        print(f"embed {name}: {secs:.2f} s", flush=True)
        if name != "inprocess":
            backend.close()
    out = {
        "workload": {"texts": len(texts), "batch_size": 64},
        "paths": summary,
        "ratios": {
            f"{k} / inprocess (time)": round(v["s"] / summary["inprocess"]["s"], 3)
            for k, v in summary.items()
        },
        "vectors_identical_to_inprocess": identical,
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }
    print(json.dumps(out, indent=2))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(out, indent=2) + "\n")
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--accelerator", default="cpu", choices=("cpu", "gpu"))
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--sample-requests", type=int, default=12)
    parser.add_argument("--draws", type=int, default=50)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--embed", type=int, default=0, help="time the MiniLM embedder on N texts instead")
    parser.add_argument("overrides", nargs="*", help="config overrides, as run.py takes them")
    args = parser.parse_args(argv)
    if args.embed:
        out = RESULTS.with_name("runner_embed.json") if args.out == RESULTS else args.out
        return bench_embed(args.embed, args.devices, args.accelerator, out)

    import torch
    from omegaconf import OmegaConf

    from bench_qq_measure import default_requests
    from lmaudit.backends.base import SampleRequest
    from lmaudit.backends.registry import build_backend

    cfg, labels, top_k = default_requests(args.overrides)
    samples = [
        SampleRequest(r.messages, n=args.draws, temperature=1.0, max_tokens=1, seed=i)
        for i, r in enumerate(labels[: args.sample_requests])
    ]
    model_cfg = OmegaConf.to_container(cfg.model, resolve=True)
    assert isinstance(model_cfg, dict)
    paths: dict[str, Any] = {"inprocess": build_backend(model_cfg)}
    if args.accelerator == "gpu":
        paths["inprocess"].device = "cuda"
    paths["inprocess"].model  # noqa: B018 (loaded before timing)
    startup: dict[str, float] = {}
    for d in args.devices:
        t0 = time.perf_counter()
        runner = build_backend(
            {**model_cfg, "runner": "lightning", "devices": d, "accelerator": args.accelerator}
        )
        runner.label_logprobs(labels[:1], top_k=top_k)  # starts the workers, loads the model
        startup[f"lightning-{d}"] = time.perf_counter() - t0
        paths[f"lightning-{d}"] = runner

    seconds: dict[str, list[tuple[float, float]]] = {name: [] for name in paths}
    ref: tuple[Any, Any] | None = None
    diff = 0.0
    same_draws = True
    for r in range(args.rounds):
        for name, backend in paths.items():
            t_lab, t_smp, got_labels, got_draws = _timed(backend, labels, samples, top_k)
            seconds[name].append((t_lab, t_smp))
            if ref is None:
                ref = (got_labels, got_draws)
            else:
                diff = max(
                    diff,
                    *(
                        abs(g.probs[k] - x.probs[k])
                        for g, x in zip(got_labels, ref[0], strict=True)
                        for k in x.probs
                    ),
                )
                same_draws &= [g.texts for g in got_draws] == [x.texts for x in ref[1]]
            print(f"round {r + 1} {name}: labels {t_lab:.2f} s, draws {t_smp:.2f} s", flush=True)
    for name, backend in paths.items():
        if name != "inprocess":
            backend.close()

    n_draws = sum(s.n for s in samples)
    summary: dict[str, Any] = {}
    for name, runs in seconds.items():
        lab = statistics.median(t for t, _ in runs)
        smp = statistics.median(t for _, t in runs)
        summary[name] = {
            "labels_s": round(lab, 3),
            "draws_s": round(smp, 3),
            "prompts_per_s": round(len(labels) / lab, 2),
            "draws_per_s": round(n_draws / smp, 1),
            "startup_s": round(startup.get(name, 0.0), 2),
        }

    def ratio(a: str, b: str) -> dict[str, float]:
        total = summary[a]["labels_s"] + summary[a]["draws_s"]
        base = summary[b]["labels_s"] + summary[b]["draws_s"]
        return {
            "labels": round(summary[a]["labels_s"] / summary[b]["labels_s"], 3),
            "draws": round(summary[a]["draws_s"] / summary[b]["draws_s"], 3),
            "total": round(total / base, 3),
        }

    ratios: dict[str, Any] = {}
    if "lightning-1" in summary:
        ratios["lightning-1 / inprocess (time)"] = ratio("lightning-1", "inprocess")
        for d in args.devices:
            if d != 1:
                ratios[f"lightning-{d} / lightning-1 (time)"] = ratio(f"lightning-{d}", "lightning-1")
    out = {
        "workload": {"label_prompts": len(labels), "sample_requests": len(samples), "draws": n_draws},
        "paths": summary,
        "ratios": ratios,
        "max_abs_label_prob_diff_vs_inprocess": diff,
        "draws_identical_to_inprocess": same_draws,
        "accelerator": args.accelerator,
        "torch_threads_inprocess": torch.get_num_threads(),
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "machine": platform.machine(),
        "rounds": args.rounds,
    }
    print(json.dumps(out, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    return out


if __name__ == "__main__":
    main()
