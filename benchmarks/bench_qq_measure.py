"""QQ label scoring on the default audit's prompts: lmaudit against two baselines, one run.

The workload is the default run's own requests (``python run.py``: its study config, few-shot
framing, counterbalanced mappings, the model config's batch size), scored cold (a fresh
response cache each round) through the same ``CachedBackend`` the pipeline uses. In every
round, under the same machine load, in this order:

* lmaudit: ``CachedBackend.label_logprobs`` on every request: transformers' Gemma 3 (the
  embedded model, converted from its GGUF by transformers), the prompts' prefix trie packed
  into chunks with block-sparse attention (``backends/hf/packed/``);
* llama.cpp: llama-cpp-python on the same token ids and the same GGUF the embedded model is
  converted from, prompts sorted, keeping the KV cache of the prefix shared with the previous
  prompt (what llama.cpp does by default); skipped, and said so, if it is not installed;
* naive: transformers' plain forward, one prompt at a time, ``logits_to_keep=1``, no cache
  reuse, on every ``rounds``-th request (round ``r`` takes requests ``r, r + R, ...``, so over
  the rounds it scores each request once and its total is a whole pass, not an extrapolation);
* the fp32 matmul rate (2048 x 2048 ``torch.mm``, best of 3).

The FLOP bound is the time the unique trie tokens need at the measured matmul rate:
``(2 x non-embedding params x unique tokens + 2 x head params x prompts) / rate``.
Printed ratios: lmaudit / llama.cpp time (goal <= 0.8), bound / lmaudit time (goal >= 0.5),
bound / llama.cpp time, naive / lmaudit time, and the largest probability differences. With
``--profile auto`` (the default) a goal missed is followed by one more cold scoring pass under
``torch.profiler``, whose operators by self CPU time are printed and written with the results.

    python benchmarks/bench_qq_measure.py [--rounds 3] [--threads 2] [--profile auto] [--prompts N] [override ...]
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from host import host  # benchmarks/host.py (the script's own directory)
from profiling import print_profile, torch_profile
from report_file import write_report

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "qq_measure.json"


def default_requests(overrides: list[str]) -> tuple[Any, list[Any], int]:
    """(config, the default run's label requests, its top_k), composed as ``run.py`` composes them."""
    from hydra import compose, initialize_config_dir

    from lmaudit.config.overrides import canonical
    from lmaudit.config.store import register_configs
    from lmaudit.studies.qq.planning import cells_for

    register_configs()
    args, _ = canonical(overrides)
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(
            config_name="config", overrides=[f"study.items.path={REPO / 'data/qq/items/pilot.json'}", *args]
        )
    requests = [r for cell in cells_for(cfg) for r in cell.requests]
    return cfg, requests, int(cfg.study.top_k)


def matmul_flops_per_s(n: int = 2048, repeats: int = 3) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n**3 / best


@torch.inference_mode()
def naive_probs(model: Any, ids: list[list[int]]) -> list[torch.Tensor]:
    """One prompt at a time, unpadded, no cache reuse, logits of the last position only."""
    return [
        torch.softmax(model(input_ids=torch.tensor([seq]), logits_to_keep=1).logits[0, -1].double(), dim=-1)
        for seq in ids
    ]


class LlamaCppScorer:
    """llama-cpp-python over token ids, keeping the KV cache of the prefix shared with the previous prompt."""

    def __init__(self, gguf: Path, threads: int, n_ctx: int) -> None:
        from llama_cpp import Llama

        self.llm = Llama(
            model_path=str(gguf),
            n_ctx=n_ctx,
            n_batch=512,
            n_threads=threads,
            n_threads_batch=threads,
            logits_all=False,
            verbose=False,
        )
        self.n_vocab = self.llm.n_vocab()

    def score(self, ids: list[list[int]]) -> tuple[dict[int, np.ndarray], int]:
        """Next-token log-probabilities per prompt (prompts taken in sorted order), tokens evaluated.

        As ``Llama.generate`` reuses a prompt's prefix: ``n_tokens`` set to the common prefix,
        then ``eval`` drops the KV cache past it and evaluates the rest."""
        import llama_cpp

        self.llm.reset()
        prev: list[int] = []
        evaluated = 0
        out: dict[int, np.ndarray] = {}
        for i in sorted(range(len(ids)), key=lambda k: ids[k]):
            seq = ids[i]
            lcp = 0
            while lcp < min(len(prev), len(seq)) and prev[lcp] == seq[lcp]:
                lcp += 1
            lcp = min(lcp, len(seq) - 1)  # at least one token is evaluated, to get its logits
            self.llm.n_tokens = lcp
            self.llm.eval(seq[lcp:])
            evaluated += len(seq) - lcp
            logits = np.ctypeslib.as_array(
                llama_cpp.llama_get_logits_ith(self.llm.ctx, -1), shape=(self.n_vocab,)
            ).astype(np.float64)
            out[i] = logits - np.logaddexp.reduce(logits)
            prev = seq
        return out, evaluated


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="torch and llama.cpp threads")
    parser.add_argument(
        "--prompts", type=int, default=0, help="the first N requests only (0: all; a smoke test)"
    )
    parser.add_argument(
        "--profile",
        choices=("auto", "always", "never"),
        default="auto",
        help="one more scoring pass under torch.profiler (auto: when a goal is missed)",
    )
    parser.add_argument(
        "--out", type=Path, help=f"default: {RESULTS} (the default model), qq_measure_<model>.json beside it"
    )
    parser.add_argument("overrides", nargs="*", help="config overrides, as run.py takes them")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    from lmaudit.backends.cached import CachedBackend
    from lmaudit.backends.hf.embedded import embedded_gguf_path
    from lmaudit.backends.hf.packed.forward import ForwardStats
    from lmaudit.backends.hf.packed.trie import pack_forest
    from lmaudit.backends.registry import build_backend
    from lmaudit.provenance.cache import ResponseCache

    cfg, requests, top_k = default_requests(args.overrides)
    requests = requests[: args.prompts] if args.prompts else requests
    backend = build_backend(cfg.model)
    model = backend.model
    batch_size = int(cfg.model.get("batch_size", 16))
    ids = [backend.encode(r.messages) for r in requests]
    unique = len(pack_forest(ids, backend.min_shared_tokens).tokens)
    n_params = sum(p.numel() for p in model.parameters())
    non_embed = n_params - model.get_input_embeddings().weight.numel()
    head = model.get_output_embeddings().weight.numel()
    bound_flops = 2.0 * non_embed * unique + 2.0 * head * len(requests)

    llama: LlamaCppScorer | None = None
    llama_note = ""
    served = str(cfg.model.get("model") or "")
    try:
        if not served.startswith("embedded:"):
            raise LookupError(f"{served!r} is not an embedded model: no GGUF file to give llama.cpp")
        # the same GGUF file the embedded model is converted from
        gguf = embedded_gguf_path(model=served)
        llama = LlamaCppScorer(gguf, args.threads, n_ctx=max(512, max(map(len, ids)) + 16))
    except ImportError as exc:
        llama_note = f"llama-cpp-python not installed ({exc}); run `make install-server`"
    except LookupError as exc:
        llama_note = str(exc)

    # warm-up of every path on one prompt (first touch of the weights, the allocators)
    naive_probs(model, ids[:1])
    backend.label_logprobs(requests[:1], top_k=top_k)
    if llama is not None:
        llama.score(ids[:1])
    ours_s: list[float] = []
    llama_s: list[float] = []
    naive_s = 0.0
    rates: list[float] = []
    diff_naive = diff_llama = 0.0
    llama_evaluated = 0
    for r in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            cached = CachedBackend(backend, ResponseCache(Path(tmp)), batch_size=batch_size, progress=False)
            backend.stats = ForwardStats()
            t0 = time.perf_counter()
            results = cached.label_logprobs(requests, top_k=top_k)
            ours_s.append(time.perf_counter() - t0)
        stats = backend.stats.as_dict()
        if llama is not None:
            t0 = time.perf_counter()
            ref, llama_evaluated = llama.score(ids)
            llama_s.append(time.perf_counter() - t0)
            diff_llama = max(
                diff_llama,
                *(
                    abs(res.probs[lab] - float(np.exp(ref[i][t])))
                    for i, res in enumerate(results)
                    for lab, t in res.label_token_ids.items()
                ),
            )
        part = list(range(r, len(requests), args.rounds))
        t0 = time.perf_counter()
        naive = naive_probs(model, [ids[i] for i in part])
        naive_s += time.perf_counter() - t0
        diff_naive = max(
            diff_naive,
            *(
                abs(results[i].probs[lab] - float(p[t]))
                for i, p in zip(part, naive, strict=True)
                for lab, t in results[i].label_token_ids.items()
            ),
        )
        rates.append(matmul_flops_per_s())
        print(
            f"round {r + 1}/{args.rounds}: lmaudit {ours_s[-1]:.1f} s, llama.cpp "
            f"{llama_s[-1] if llama_s else float('nan'):.1f} s, naive so far {naive_s:.1f} s, "
            f"matmul {rates[-1] / 1e9:.1f} GFLOP/s",
            flush=True,
        )
    ours, rate = statistics.median(ours_s), statistics.median(rates)
    bound_s = bound_flops / rate
    llama_med = statistics.median(llama_s) if llama_s else None
    missed = bound_s / ours < 0.5 or (llama_med is not None and ours / llama_med > 0.8)
    profiled: dict[str, Any] | None = None
    if args.profile == "always" or (args.profile == "auto" and missed):

        def one_pass() -> None:
            with tempfile.TemporaryDirectory() as tmp:
                cached = CachedBackend(
                    backend, ResponseCache(Path(tmp)), batch_size=batch_size, progress=False
                )
                cached.label_logprobs(requests, top_k=top_k)

        profiled = torch_profile(one_pass)
    report: dict[str, Any] = {
        "workload": {
            "prompts": len(requests),
            "prompt_tokens": sum(map(len, ids)),
            "unique_trie_tokens": unique,
            "batch_size": batch_size,
            "top_k": top_k,
            "model": cfg.model.name,
        },
        "lmaudit": {"seconds_per_round": ours_s, "seconds": ours, **stats},
        "llama_cpp_prefix_cache": {
            "seconds_per_round": llama_s,
            "seconds": llama_med,
            "tokens_evaluated": llama_evaluated,
            "note": llama_note,
        },
        "naive": {"seconds_all_prompts": naive_s, "prompts_per_round": f"every {args.rounds}th"},
        "matmul_flops_per_s": rate,
        "matmul_flops_per_s_per_round": rates,
        "flop_bound_seconds": bound_s,
        "ratios": {
            "lmaudit_over_llama_cpp": ours / llama_med if llama_med else None,
            # the two run back to back in each round, under the same load: the paired ratio
            "lmaudit_over_llama_cpp_per_round": [o / q for o, q in zip(ours_s, llama_s, strict=True)]
            if llama_s
            else None,
            "lmaudit_over_llama_cpp_median_per_round": float(
                np.median([o / q for o, q in zip(ours_s, llama_s, strict=True)])
            )
            if llama_s
            else None,
            "flop_bound_over_lmaudit": bound_s / ours,
            "flop_bound_over_llama_cpp": bound_s / llama_med if llama_med else None,
            "naive_over_lmaudit": naive_s / ours,
        },
        "max_abs_prob_diff": {"vs_naive": diff_naive, "vs_llama_cpp_q4_k_m": diff_llama if llama else None},
        "goal_missed": missed,
        "profile": profiled,
        "machine": {**host(), "threads": args.threads, "torch": torch.__version__},
        "backend": backend.identity,
    }
    rat = report["ratios"]
    rows = [
        (
            "prompts / prompt tokens / unique trie tokens",
            f"{len(requests)} / {sum(map(len, ids))} / {unique}",
        ),
        ("lmaudit s (median of rounds)", f"{ours:.2f}  {[round(s, 2) for s in ours_s]}"),
        (
            "llama.cpp prefix-cache s",
            f"{llama_med:.2f}  {[round(s, 2) for s in llama_s]}" if llama_med else llama_note,
        ),
        ("naive s (all prompts, over the rounds)", f"{naive_s:.2f}"),
        ("FLOP bound s", f"{bound_s:.2f}  (matmul {rate / 1e9:.1f} GFLOP/s)"),
        (
            "lmaudit / llama.cpp (goal <= 0.8)",
            f"{rat['lmaudit_over_llama_cpp']:.3f} (median of per-round ratios "
            f"{rat['lmaudit_over_llama_cpp_median_per_round']:.3f}: "
            f"{[round(r, 3) for r in rat['lmaudit_over_llama_cpp_per_round']]})"
            if llama_med
            else "-",
        ),
        # three decimals: a goal is read on the printed value (0.597 is not 0.60)
        ("FLOP bound / lmaudit (goal >= 0.5)", f"{rat['flop_bound_over_lmaudit']:.3f}"),
        ("FLOP bound / llama.cpp", f"{rat['flop_bound_over_llama_cpp']:.2f}" if llama_med else "-"),
        ("naive / lmaudit", f"{rat['naive_over_lmaudit']:.2f}"),
        (
            "lmaudit tokens run / padded / forwards",
            f"{stats['tokens_real']} / {stats['tokens_padded']} / {stats['forward_calls']}",
        ),
        ("max |p - p_naive|", f"{diff_naive:.1e}"),
        ("max |p - p_llama.cpp| (quantized GGUF, informational)", f"{diff_llama:.1e}" if llama else "-"),
        ("threads, load avg", f"{args.threads}, {os.getloadavg()[0]:.1f}"),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"QQ label scoring, default audit prompts ({cfg.model.name}, {args.rounds} rounds)")
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")
    if profiled is not None:
        print_profile("one more cold scoring pass under torch.profiler", profiled)
    if args.out is None:
        name = str(cfg.model.name)
        args.out = RESULTS if name == "gemma3-270m" else RESULTS.with_name(f"qq_measure_{name}.json")
    write_report(report, args.out)
    print(f"  wrote {args.out}")
    return report


if __name__ == "__main__":
    main()
