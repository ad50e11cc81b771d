"""QQ measurement throughput of the ``hf`` backend on the embedded Gemma 3 270M.

Scores a realistic QQ workload (items x mappings x orders x positions; chat prompts with a
system prompt carrying the label legend) two ways in the same run, interleaved in rounds so
both see the same machine load:

* ``HFBackend.label_logprobs``: batched, prefix-sharing, ``logits_to_keep=1``, on every item;
* a naive baseline: one prompt at a time, full forward (logits at every position), no reuse,
  on the first item of each round (it is slow).

Prints prompts/s of both and their ratio (target >= 5x), the largest probability difference
between them, and the ratio of the achieved FLOP rate to this machine's measured fp32 matmul
rate. Writes the same numbers to ``benchmarks/results/qq_measure.json``. No absolute-time
assertions: the machine, its load and its thread count are recorded beside the numbers.

    python benchmarks/bench_qq_measure.py [--items 18] [--round-items 3] [--batch-size 32] [--threads N]
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from lmaudit.backends.base import LabelRequest
from lmaudit.backends.hf import HFBackend
from lmaudit.backends.hf_batching import ForwardStats

RESULTS = Path(__file__).resolve().parent / "results" / "qq_measure.json"

# 18 question pairs in the style of the QQ survey items (Moore 2002; Wang & Busemeyer 2013).
ITEMS: list[tuple[str, str]] = [
    (
        "Do you think Bill Clinton is honest and trustworthy?",
        "Do you think Al Gore is honest and trustworthy?",
    ),
    ("Do you think Newt Gingrich is honest?", "Do you think Bob Dole is honest?"),
    ("Is Pete Rose worthy of the Hall of Fame?", "Is Shoeless Joe Jackson worthy of the Hall of Fame?"),
    ("Do most white people dislike black people?", "Do most black people dislike white people?"),
    ("Should the government raise the minimum wage?", "Should the government cut payroll taxes?"),
    ("Is climate change mostly caused by human activity?", "Will climate change harm you personally?"),
    ("Should voting be compulsory?", "Should the voting age be lowered to sixteen?"),
    ("Is nuclear power safe?", "Should your country build more nuclear plants?"),
    ("Do you trust national newspapers?", "Do you trust television news?"),
    ("Is social media good for democracy?", "Is social media good for teenagers?"),
    ("Should college tuition be free?", "Should student debt be cancelled?"),
    ("Is the economy getting better?", "Is your own financial situation getting better?"),
    ("Should cities ban cars from their centres?", "Should public transport be free?"),
    ("Do you trust scientists?", "Do you trust doctors?"),
    ("Should the death penalty be abolished?", "Should life sentences be abolished?"),
    ("Is artificial intelligence a threat to jobs?", "Is artificial intelligence a threat to humanity?"),
    ("Should your country accept more refugees?", "Should your country accept more skilled migrants?"),
    ("Is working from home as productive as the office?", "Should employers allow a four-day week?"),
]
SYSTEM = (
    "You are a respondent in a public opinion survey. You will be asked a sequence of yes/no "
    "questions. Answer every question with exactly one letter and nothing else.\n"
    "Legend: {legend}.\nDo not explain your answer."
)
MAPPINGS = ({"A": "Yes", "B": "No"}, {"A": "No", "B": "Yes"})


def qq_workload(items: list[tuple[str, str]]) -> list[LabelRequest]:
    """Per item x mapping x order: position 1, and position 2 after each committed label."""
    out: list[LabelRequest] = []
    for q_a, q_b in items:
        for mapping in MAPPINGS:
            legend = ", ".join(f"{label} = {meaning}" for label, meaning in mapping.items())
            system = {"role": "system", "content": SYSTEM.format(legend=legend)}
            suffix = f"\nAnswer A or B ({legend})."
            for first, second in ((q_a, q_b), (q_b, q_a)):
                user1 = {"role": "user", "content": f"Question 1: {first}{suffix}"}
                out.append(LabelRequest((system, user1), ("A", "B")))
                for committed in ("A", "B"):
                    msgs = (
                        system,
                        user1,
                        {"role": "assistant", "content": committed},
                        {"role": "user", "content": f"Question 2: {second}{suffix}"},
                    )
                    out.append(LabelRequest(msgs, ("A", "B")))
    return out


def matmul_flops_per_s(n: int = 2048, repeats: int = 3) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)  # warm-up
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n**3 / best


@torch.inference_mode()
def naive_probs(backend: HFBackend, requests: list[LabelRequest]) -> tuple[list[torch.Tensor], int]:
    """The baseline: one prompt at a time, full-sequence logits, no cache reuse."""
    out, tokens = [], 0
    for req in requests:
        ids = backend.encode(req.messages)
        tokens += len(ids)
        logits = backend.model(input_ids=torch.tensor([ids])).logits  # [1, T, V]: every position
        out.append(torch.softmax(logits[0, -1].double(), dim=-1))
    return out, tokens


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=18, help="question pairs in the workload (max 18)")
    parser.add_argument("--round-items", type=int, default=3, help="items per round (see README)")
    parser.add_argument("--batch-size", type=int, default=None, help="default: the backend's")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    t0 = time.perf_counter()
    kwargs = {} if args.batch_size is None else {"batch_size": args.batch_size}
    backend = HFBackend(progress=False, **kwargs)
    model = backend.model
    load_s = time.perf_counter() - t0
    n_params = sum(p.numel() for p in model.parameters())
    n_embed = model.get_input_embeddings().weight.numel()
    head_params = model.get_output_embeddings().weight.numel()

    items = ITEMS[: max(1, min(args.items, len(ITEMS)))]
    backend.label_logprobs(qq_workload(items[:1])[:3])  # warm-up (allocator, kernels)
    backend.stats = ForwardStats()
    # Rounds interleave the two paths so both see the same machine load: per round, the
    # optimized path scores the round's items, the naive loop the round's first item.
    requests: list[LabelRequest] = []
    naive_requests: list[LabelRequest] = []
    fast_s = naive_s = 0.0
    max_diff = 0.0
    naive_tokens = 0
    matmul_rates = []
    for start in range(0, len(items), args.round_items):
        round_requests = qq_workload(items[start : start + args.round_items])
        t0 = time.perf_counter()
        results = backend.label_logprobs(round_requests)
        fast_s += time.perf_counter() - t0
        round_naive = qq_workload(items[start : start + 1])
        t0 = time.perf_counter()
        naive, tokens = naive_probs(backend, round_naive)
        naive_s += time.perf_counter() - t0
        max_diff = max(
            max_diff,
            *(
                abs(res.probs[label] - float(ref[tid]))
                for res, ref in zip(results, naive, strict=False)  # round_naive prefixes round_requests
                for label, tid in res.label_token_ids.items()
            ),
        )
        requests += round_requests
        naive_requests += round_naive
        naive_tokens += tokens
        matmul_rates.append(matmul_flops_per_s())
    stats = backend.stats.as_dict()
    prompt_tokens = sum(len(backend.encode(r.messages)) for r in requests)
    matmul = statistics.median(matmul_rates)
    useful_flops = 2.0 * (n_params - n_embed) * stats["tokens_real"] + 2.0 * head_params * len(requests)
    fast_rate, naive_rate = len(requests) / fast_s, len(naive_requests) / naive_s
    report: dict[str, Any] = {
        "workload": {
            "items": len(items),
            "round_items": args.round_items,
            "prompts": len(requests),
            "prompt_tokens": prompt_tokens,
            "naive_prompts": len(naive_requests),
            "naive_prompt_tokens": naive_tokens,
        },
        "optimized": {"seconds": fast_s, "prompts_per_s": fast_rate, **stats},
        "naive": {"seconds": naive_s, "prompts_per_s": naive_rate},
        "speedup": fast_rate / naive_rate,
        "max_abs_prob_diff_vs_naive": max_diff,
        "tokens_processed_fraction": stats["tokens_real"] / prompt_tokens,
        "achieved_flops_per_s": useful_flops / fast_s,
        "matmul_flops_per_s": matmul,
        "matmul_flops_per_s_per_round": matmul_rates,
        "flop_rate_vs_matmul": useful_flops / fast_s / matmul,
        "model": {
            "identity": backend.identity,
            "params": n_params,
            "non_embedding_params": n_params - n_embed,
        },
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "load_average_1m": os.getloadavg()[0],
            "torch": torch.__version__,
        },
        "load_seconds": load_s,
        "batch_size": backend.batch_size,
    }
    rows = [
        ("prompts scored (optimized / naive)", f"{len(requests)} / {len(naive_requests)}"),
        ("optimized prompts/s", f"{fast_rate:.2f}"),
        ("naive prompts/s", f"{naive_rate:.2f}"),
        ("speedup (target >= 5x)", f"{report['speedup']:.1f}x"),
        ("max |p - p_naive|", f"{max_diff:.2e}"),
        ("tokens run / prompt tokens", f"{stats['tokens_real']} / {prompt_tokens}"),
        ("padding overhead", f"{stats['tokens_padded'] / max(stats['tokens_real'], 1) - 1:.1%}"),
        ("forward calls", str(stats["forward_calls"])),
        ("achieved GFLOP/s", f"{useful_flops / fast_s / 1e9:.1f}"),
        ("fp32 matmul GFLOP/s", f"{matmul / 1e9:.1f}"),
        ("FLOP rate / matmul rate", f"{report['flop_rate_vs_matmul']:.2f}"),
        ("torch threads, load avg", f"{torch.get_num_threads()}, {os.getloadavg()[0]:.1f}"),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"QQ measure benchmark (embedded Gemma 3 270M, batch_size={backend.batch_size})")
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report, indent=2, sort_keys=True), encoding="utf-8")
    tmp.replace(args.out)
    print(f"  wrote {args.out}")
    return report


if __name__ == "__main__":
    main()
