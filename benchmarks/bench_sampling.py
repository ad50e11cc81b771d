"""Single-token sampling on the sampled estimand's requests: the hf backend's calls against one
prompt per call and against a per-prompt forward, one run.

Workload: ``python run.py estimand=sampled``'s sample requests (the default audit's 186 prompts,
200 single-token draws each at T = 1; ``--prompts`` takes the first N), on the embedded Gemma 3
270M, cold (a fresh response cache and prefill memo each round), through the ``CachedBackend``
the pipeline uses (calls of ``batch_size`` requests). Compared, in every round, under the same load:

* lmaudit: ``CachedBackend.sample`` as the pipeline calls it; each call's prompts prefilled
  message by message through the prefix memo (``backends/hf/prefill.py``: a shared system
  message or question is computed once), then one inverse-CDF draw per sample seed
  (``backends/hf/sampling.py``);
* one per call: the same requests, one ``sample`` call each; its draws must be identical;
* forward: what a user would write with transformers: one forward per prompt,
  ``logits_to_keep=1``, no prefix reuse, then the same inverse-CDF draws; its probabilities
  differ from lmaudit's at float rounding (segments computed apart), so it is compared by the
  largest next-token probability difference (within the 1e-5 of the determinism contract),
  and by the share of identical draws.

Printed: seconds of each (median over rounds), one-per-call / lmaudit and forward / lmaudit,
and the comparisons. Results go to ``results/sampling.json``. No assertion on times.

    python benchmarks/bench_sampling.py [--rounds 2] [--prompts 186] [override ...]
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
RESULTS = REPO / "benchmarks" / "results" / "sampling.json"
sys.path.insert(0, str(REPO / "benchmarks"))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=0, help="the first N requests (0: all)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("overrides", nargs="*", help="config overrides, as run.py takes them")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)

    from bench_qq_measure import default_requests
    from lmaudit.backends.cached import CachedBackend
    from lmaudit.backends.hf.prefill import PrefillMemo, segment_bounds
    from lmaudit.backends.hf.sampling import _generator, draw_tokens
    from lmaudit.backends.registry import build_backend
    from lmaudit.provenance.cache import ResponseCache
    from lmaudit.studies.qq.config import EstimandConfig
    from lmaudit.studies.qq.planning import _typed
    from lmaudit.studies.qq.positions import _sample_request, position_seed

    cfg, labels, _ = default_requests(["estimand=sampled", *args.overrides])
    est = _typed(cfg.study.estimand, EstimandConfig)
    requests = [
        _sample_request(r, est.n, est.temperature, est.top_p, position_seed(est.seed, r.meta, "estimand"))
        for r in labels
    ]
    requests = requests[: args.prompts] if args.prompts else requests
    backend = build_backend(cfg.model)
    model = backend.model
    batch_size = int(cfg.model.get("batch_size", 16))

    def lmaudit(mode: str) -> list[list[str]]:
        backend.prefill_memo = PrefillMemo()  # cold: no prefix computed before
        with tempfile.TemporaryDirectory() as tmp:
            cached = CachedBackend(backend, ResponseCache(Path(tmp)), batch_size=batch_size, progress=False)
            if mode == "one_per_call":
                return [cached.sample([r], progress=False)[0].texts for r in requests]
            return [res.texts for res in cached.sample(requests, progress=False)]

    @torch.inference_mode()
    def forward() -> tuple[list[list[str]], list[torch.Tensor]]:
        texts, probs = [], []
        for r in requests:
            ids = backend.encode(r.messages)
            logits = model(input_ids=torch.tensor([ids]), logits_to_keep=1).logits[0, -1]
            probs.append(torch.softmax(logits.double() / r.temperature, dim=-1))
            toks = draw_tokens(logits, r.temperature, r.top_p, [_generator(r.seed, i) for i in range(r.n)])
            texts.append(
                [
                    ""
                    if t in backend.stop_token_ids
                    else backend.tokenizer.decode([t], skip_special_tokens=True)
                    for t in toks
                ]
            )
        return texts, probs

    lmaudit("lmaudit")  # warm-up (first-touch of the weights, allocator)
    seconds: dict[str, list[float]] = {"lmaudit": [], "one_per_call": [], "forward": []}
    same_one = True
    ref: list[list[str]] = []
    naive: tuple[list[list[str]], list[torch.Tensor]] = ([], [])
    for r in range(args.rounds):
        order = (
            ["lmaudit", "one_per_call", "forward"] if r % 2 == 0 else ["forward", "one_per_call", "lmaudit"]
        )
        got: dict[str, Any] = {}
        for name in order:
            t0 = time.perf_counter()
            got[name] = forward() if name == "forward" else lmaudit(name)
            seconds[name].append(time.perf_counter() - t0)
        ref, naive = got["lmaudit"], got["forward"]
        same_one &= got["one_per_call"] == ref
        print(
            f"round {r + 1}/{args.rounds}: " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in seconds.items()),
            flush=True,
        )

    # lmaudit's next-token distributions, for the comparison with the per-prompt forward
    backend.prefill_memo = PrefillMemo()
    diff = 0.0
    for req, p in zip(requests, naive[1], strict=True):
        ids = backend.encode(req.messages)
        bounds = segment_bounds(backend.message_cuts(req.messages, ids), len(ids))
        logits, _ = backend.prefill_memo.prefill(model, ids, bounds)
        diff = max(diff, float((torch.softmax(logits.double() / req.temperature, dim=-1) - p).abs().max()))
    draws = sum(len(t) for t in ref)
    same = sum(a == b for x, y in zip(ref, naive[0], strict=True) for a, b in zip(x, y, strict=True))
    med = {k: statistics.median(v) for k, v in seconds.items()}
    out = {
        "workload": {
            "prompts": len(requests),
            "draws": draws,
            "batch_size": batch_size,
            "threads": args.threads,
        },
        "seconds": {k: round(v, 3) for k, v in med.items()},
        "seconds_per_round": {k: [round(x, 3) for x in v] for k, v in seconds.items()},
        "one_per_call / lmaudit": round(med["one_per_call"] / med["lmaudit"], 3),
        "forward / lmaudit": round(med["forward"] / med["lmaudit"], 3),
        "draws_identical_one_per_call": same_one,
        "max_abs_prob_diff_vs_forward": diff,
        "draws_identical_to_forward": f"{same} / {draws}",
        "load_average": os.getloadavg()[0],
        "machine": platform.machine(),
    }
    print(json.dumps(out, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    return out


if __name__ == "__main__":
    main()
