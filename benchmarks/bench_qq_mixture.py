"""QQ mixture estimand: the mixture's measurement against (components x) the plain estimand's, one run.

The workload is the default audit's design (``python run.py``: Track M with exemplars, both
label mappings, the 18 pilot items) measured by ``lmaudit.studies.qq.measure.position_rows`` through a
cold ``CachedBackend`` (a fresh response cache each round), on a random Gemma 3 checkpoint
built here with the tiny test tokenizer (``tests/backends/tiny_hf.py``; sizes set by
``--hidden`` and ``--layers``), so no registered model is measured under the mixture. Gate G3 is
off in both arms: what is timed is the estimand's own requests (and gate G1). One plain
measurement warms up the weights and allocators first. In every round, under the same machine
load, in this order:

* plain: ``estimand=logprob``;
* mixture: ``estimand=mixture`` (the option's grid: 11 personas x 3 temperatures = 33
  components over the log-prob estimand; any override changes it).

Printed: both times, the number of components K and of personas P, and the ratios
mixture / (K x plain) (what measuring each component on its own would cost: the temperature
components cost no model call, so about 1/3 here) and mixture / (P x plain) (each persona is
one more plain-sized set of prompts; the trie shares only the framing's system prompt across
personas), with the prompts' total and unique trie tokens and their ratio mixture / (P x plain).
No assertion on time.

    python benchmarks/bench_qq_mixture.py [--rounds 3] [--threads 2] [--hidden 256] [--layers 4] [override ...]
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from host import host  # benchmarks/host.py (the script's own directory)
from report_file import write_report

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "qq_mixture.json"
sys.path.insert(0, str(REPO / "tests" / "backends"))


def compose(overrides: list[str]) -> Any:
    """The config ``run.py`` composes from ``overrides`` (the items' and personas' paths absolute)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from lmaudit.config.overrides import canonical
    from lmaudit.config.store import register_configs

    register_configs()
    args, _ = canonical(overrides)
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return hydra_compose(
            config_name="config",
            overrides=[
                f"study.items.path={REPO / 'data/qq/items/pilot.json'}",
                "model=sim_projective",  # the composed model is not used: the random checkpoint is
                "study.gates.g3.enabled=false",
                *args,
            ],
        )


def random_checkpoint(path: Path, hidden: int, layers: int) -> Path:
    """A random Gemma 3 with the tiny test tokenizer, ``layers`` layers of width ``hidden``."""
    from tiny_hf import write_model, write_tokenizer

    tok = write_tokenizer(path)
    kinds = tuple("full_attention" if (i + 1) % 2 == 0 else "sliding_attention" for i in range(layers))
    write_model(
        path,
        "gemma3",
        len(tok),
        layer_types=kinds,
        hidden_size=hidden,
        intermediate_size=4 * hidden,
        head_dim=hidden // 4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        sliding_window=512,
    )
    return path


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=256, help="width of the random checkpoint")
    parser.add_argument("--layers", type=int, default=4, help="layers of the random checkpoint")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("overrides", nargs="*", help="config overrides, as run.py takes them")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    from lmaudit.backends.cached import CachedBackend
    from lmaudit.backends.hf.backend import HFBackend
    from lmaudit.backends.hf.packed.trie import pack_forest
    from lmaudit.provenance.cache import ResponseCache
    from lmaudit.studies.qq.measure import position_rows as measure
    from lmaudit.studies.qq.mixture.plan import components_of
    from lmaudit.studies.qq.planning import cells_for, mixture_cells

    personas = f"study.estimand.mixture.personas_path={REPO / 'data/qq/personas.jsonl'}"
    plain_cfg = compose(["estimand=logprob", *args.overrides])
    mix_cfg = compose(["estimand=mixture", personas, *args.overrides])
    comps = components_of(mix_cfg.study.estimand.mixture)
    n_personas = len({c.persona for c in comps})
    with tempfile.TemporaryDirectory() as ckpt_dir:
        backend = HFBackend(str(random_checkpoint(Path(ckpt_dir), args.hidden, args.layers)), progress=False)
        plain_cells, extra = cells_for(plain_cfg), mixture_cells(mix_cfg)
        ids_plain = [backend.encode(r.messages) for c in plain_cells for r in c.requests]
        ids_mix = ids_plain + [backend.encode(r.messages) for c in extra for r in c.requests]
        tokens = {
            "plain": {"prompts": len(ids_plain), "tokens": sum(map(len, ids_plain)),
                      "unique_trie_tokens": len(pack_forest(ids_plain, backend.min_shared_tokens).tokens)},
            "mixture": {"prompts": len(ids_mix), "tokens": sum(map(len, ids_mix)),
                        "unique_trie_tokens": len(pack_forest(ids_mix, backend.min_shared_tokens).tokens)},
        }  # fmt: skip
        with tempfile.TemporaryDirectory() as tmp:  # warm-up: first touch of the weights and allocators
            measure(plain_cfg, CachedBackend(backend, ResponseCache(Path(tmp)), progress=False))
        plain_s: list[float] = []
        mix_s: list[float] = []
        for r in range(args.rounds):
            for cfg, times in ((plain_cfg, plain_s), (mix_cfg, mix_s)):
                with tempfile.TemporaryDirectory() as tmp:
                    cached = CachedBackend(backend, ResponseCache(Path(tmp)), progress=False)
                    t0 = time.perf_counter()
                    measure(cfg, cached)
                    times.append(time.perf_counter() - t0)
            print(
                f"round {r + 1}/{args.rounds}: plain {plain_s[-1]:.2f} s, mixture {mix_s[-1]:.2f} s",
                flush=True,
            )
        identity = backend.identity
    plain, mix = statistics.median(plain_s), statistics.median(mix_s)
    paired = [m / p for m, p in zip(mix_s, plain_s, strict=True)]
    report: dict[str, Any] = {
        "workload": {
            "components": len(comps),
            "personas": n_personas,
            "temperatures": sorted({c.temperature for c in comps}),
            "model": {"hidden": args.hidden, "layers": args.layers},
            **tokens,
        },
        "plain": {"seconds_per_round": plain_s, "seconds": plain},
        "mixture": {"seconds_per_round": mix_s, "seconds": mix},
        "ratios": {
            "mixture_over_plain_median_per_round": statistics.median(paired),
            "mixture_over_components_x_plain": mix / (len(comps) * plain),
            "mixture_over_personas_x_plain": mix / (n_personas * plain),
            "unique_trie_tokens_mixture_over_personas_x_plain": tokens["mixture"]["unique_trie_tokens"]
            / (n_personas * tokens["plain"]["unique_trie_tokens"]),
        },
        "machine": {**host(), "threads": args.threads, "torch": torch.__version__},
        "backend": identity,
    }
    rat = report["ratios"]
    rows = [
        ("components (personas x temperatures)", f"{len(comps)} ({n_personas} x {len(report['workload']['temperatures'])})"),
        ("prompts plain / mixture", f"{tokens['plain']['prompts']} / {tokens['mixture']['prompts']}"),
        ("unique trie tokens plain / mixture", f"{tokens['plain']['unique_trie_tokens']} / {tokens['mixture']['unique_trie_tokens']}"),
        ("plain s (median of rounds)", f"{plain:.2f}  {[round(s, 2) for s in plain_s]}"),
        ("mixture s (median of rounds)", f"{mix:.2f}  {[round(s, 2) for s in mix_s]}"),
        ("mixture / plain (median of per-round ratios)", f"{rat['mixture_over_plain_median_per_round']:.2f}"),
        ("mixture / (components x plain)", f"{rat['mixture_over_components_x_plain']:.3f}"),
        ("mixture / (personas x plain)", f"{rat['mixture_over_personas_x_plain']:.3f}"),
        ("trie tokens: mixture / (personas x plain)", f"{rat['unique_trie_tokens_mixture_over_personas_x_plain']:.3f}"),
        ("threads, load avg", f"{args.threads}, {os.getloadavg()[0]:.1f}"),
    ]  # fmt: skip
    width = max(len(k) for k, _ in rows)
    print(f"QQ mixture measurement against the plain estimand ({args.rounds} rounds, random Gemma 3)")
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")
    write_report(report, args.out)
    return report


if __name__ == "__main__":
    main()
