"""One judge verdict on the embedded model: a draw decoded alone, against the 8-row block and generate().

The ``hf`` backend decodes multi-token draws in blocks of ``sample_block`` rows (a draw's
arithmetic then does not depend on how many draws the request asks for). A judge verdict is
one draw of up to 32 tokens; with a block of 8 rows, seven of them are computed and dropped.
This compares the default block (1 row) with the 8-row block on the demo's real judge prompts
(P0 packets of ``data/judge/demo``), interleaved round by round so both see the same machine
load, each round cold (a fresh prefill memo), and checks that the verdict text is the same
either way. The baseline, in the same rounds, is transformers' own ``model.generate()`` on the
same model (sampling with the same temperature, top-p, token budget and stop tokens,
``top_k=0``); its draws come from another random stream, so its texts are compared only under
greedy decoding (first ``--greedy-check`` prompts, temperature 0 on both sides). Prints the
ratios; writes them, with the machine and its load, to ``benchmarks/results/judge_sampling.json``.
No assertion on absolute times.

    python benchmarks/bench_judge_sampling.py [--rounds 3] [--max-tokens 32] [--threads 2] [--prompts N]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from host import host  # benchmarks/host.py (the script's own directory)

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from hydra import compose, initialize_config_dir

from lmaudit.backends.base import SampleRequest
from lmaudit.backends.registry import build_backend
from lmaudit.config.store import register_configs

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "judge_sampling.json"


def _setup(max_tokens: int) -> tuple[dict[str, Any], list[SampleRequest]]:
    """The embedded model's config and the demo's P0 judge requests, built as the study builds them."""
    from omegaconf import OmegaConf

    from lmaudit.config.overrides import canonical
    from lmaudit.studies.judge.measure import _request, judgment_seed
    from lmaudit.studies.judge.packets import judge_messages, load_candidates
    from lmaudit.studies.judge.planning import conditions, judge_text, sampling, settings

    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=canonical(["judge/condition=P0", f"study.max_tokens={max_tokens}"])[0],
        )
    s = settings(cfg)
    (cond,), _ = conditions(cfg)
    text = judge_text(cfg)
    reqs = [
        _request(
            judge_messages(c, cond, text), sampling(s), judgment_seed(s.seed, cond.id, c.prompt_id, 0, 0), {}
        )
        for c in load_candidates(REPO / s.candidates_path)
    ]
    model = OmegaConf.to_container(cfg.model, resolve=True)
    assert isinstance(model, dict)
    return model, reqs


def _generate(backend: Any, req: SampleRequest, temperature: float) -> str:
    """One completion by transformers' ``generate()`` (the baseline), decoded as the backend decodes."""
    import torch

    ids = torch.tensor([backend.encode(req.messages)])
    sampling: dict[str, Any] = (
        {"do_sample": True, "temperature": temperature, "top_p": req.top_p, "top_k": 0}
        if temperature > 0
        else {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
    )
    torch.manual_seed(req.seed)
    with torch.inference_mode():
        out = backend.model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=req.max_tokens,
            eos_token_id=sorted(backend.stop_token_ids),
            pad_token_id=backend.pad_token_id,
            **sampling,
        )
    new = [int(t) for t in out[0, ids.shape[1] :] if int(t) not in backend.stop_token_ids]
    return str(backend.tokenizer.decode(new, skip_special_tokens=True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--prompts", type=int, default=0, help="the first N judge prompts only (0: all)")
    ap.add_argument("--greedy-check", type=int, default=3, help="prompts compared greedily with generate()")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from lmaudit.backends.hf.prefill import PrefillMemo

    model_cfg, reqs = _setup(args.max_tokens)
    reqs = reqs[: args.prompts] if args.prompts else reqs
    one = build_backend({**model_cfg, "sample_block": 1})
    eight = build_backend({**model_cfg, "sample_block": 8})
    gen = one  # generate() runs on the same transformers model
    one.sample(reqs[:1])  # load the model (each backend loads its own copy) and warm up
    eight.sample(reqs[:1])
    _generate(gen, reqs[0], reqs[0].temperature)
    t_one: list[float] = []
    t_eight: list[float] = []
    t_gen: list[float] = []
    same = True
    for _ in range(args.rounds):
        one.prefill_memo = eight.prefill_memo = PrefillMemo()  # cold: no prefill from an earlier round
        t0 = time.perf_counter()
        a = one.sample(reqs)
        t_one.append(time.perf_counter() - t0)
        eight.prefill_memo = PrefillMemo()
        t0 = time.perf_counter()
        b = eight.sample(reqs)
        t_eight.append(time.perf_counter() - t0)
        same &= [r.texts for r in a] == [r.texts for r in b]
        t0 = time.perf_counter()
        for req in reqs:
            _generate(gen, req, req.temperature)
        t_gen.append(time.perf_counter() - t0)
    greedy = [dataclasses.replace(r, temperature=0.0) for r in reqs[: args.greedy_check]]
    same_greedy = [r.texts[0] for r in one.sample(greedy)] == [_generate(gen, r, 0.0) for r in greedy]
    per_one = statistics.median(t_one) / len(reqs)
    per_eight = statistics.median(t_eight) / len(reqs)
    per_gen = statistics.median(t_gen) / len(reqs)
    out = {
        "workload": f"{len(reqs)} judge verdicts (demo P0 packets), n = 1, up to {args.max_tokens} tokens",
        "seconds_per_verdict": {"block_1": per_one, "block_8": per_eight, "generate": per_gen},
        "speedup_block_1_vs_8": per_eight / per_one,
        "speedup_block_1_vs_generate": per_gen / per_one,
        "same_verdict_texts": same,
        "same_greedy_texts_as_generate": same_greedy,
        "rounds": args.rounds,
        "torch_threads": torch.get_num_threads(),
        "machine": host(),
    }
    print(
        f"judge verdict, embedded model: block 1 {per_one:.2f} s, block 8 {per_eight:.2f} s, generate() "
        f"{per_gen:.2f} s per verdict -> {per_eight / per_one:.1f}x vs block 8, {per_gen / per_one:.1f}x vs "
        f"generate(); same texts (block 1 / 8): {same}; same greedy texts as generate(): {same_greedy}"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
