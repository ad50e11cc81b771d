"""choir benchmarks, each against its baseline in the same run.

1. ``analysis``: the whole choir analysis (codebooks, salience, RBO, signal-to-chance with
   1,000 shuffles, echo, permutation tests, recoverability with bootstrap and null) of an
   Infinity-Chat-scale design: 100 questions x 9 members x 6 conditions (2 templates + 4
   personas... as configured below) x 5 generations x 20 items, lists from the freelist sim
   generator, sim embeddings. Target: under 3 minutes on 2 cores. Reports the wall time and
   the share spent in HDBSCAN.
2. ``embed``: lmaudit's cached MiniLM embedder (cold cache, identical strings once) against
   plain ``SentenceTransformer.encode`` on the same distinct texts, three paired repetitions;
   vectors compared. Target: at most 1.2x.

    python benchmarks/bench_choir.py [--part analysis|embed|all] [--questions 100]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np

from lmaudit.backends.base import SampleRequest
from lmaudit.backends.sim.embed import SimEmbedder
from lmaudit.backends.sim.freelist import FreeListSampler
from lmaudit.studies.choir import codebook
from lmaudit.studies.choir.config import ChoirStudyConfig
from lmaudit.studies.choir.extract import extract_items
from lmaudit.studies.choir.lists import ListRecord, analyze_lists
from lmaudit.text import question_words

CACHE_ROOT = Path(__file__).resolve().parents[1] / ".cache" / "bench"
PERSONAS = ["archivist", "promoter", "nurse", "trader", "composer"]


def _design(n_questions: int) -> tuple[list[ListRecord], dict[str, list[str]]]:
    members = [FreeListSampler(signature=i + 1, widths={}) for i in range(9)]
    conds = [("A", "none"), *[("A", p) for p in PERSONAS]]  # 6 conditions
    recs, vocab = [], {}
    for qi in range(n_questions):
        q, text = f"Q{qi:03d}", f"Question number {qi} about topic{qi} and theme{qi % 7}"
        vocab[q] = question_words(text)
        for m_i, m in enumerate(members):
            for cond, persona in conds:
                req = SampleRequest(
                    messages=({"role": "user", "content": text},),
                    n=5,
                    temperature=0.7,
                    seed=qi * 100 + len(cond),
                    meta={"question": q, "question_text": text, "persona": persona, "items": 20},
                )
                for g, raw in enumerate(m.sample([req])[0].texts):
                    items = tuple(i.text for i in extract_items(raw, 20).items)
                    recs.append(ListRecord(f"m{m_i}", q, f"{cond}|{persona}", persona, 0.7, g, items))
    return recs, vocab


def bench_analysis(n_questions: int) -> None:
    recs, vocab = _design(n_questions)
    texts = sorted({t for r in recs for t in r.items} | {w for ws in vocab.values() for w in ws})
    emb = SimEmbedder(dim=256)
    vec = dict(zip(texts, emb.embed(texts), strict=True))
    n_items = sum(len(r.items) for r in recs)
    spent = {"hdbscan": 0.0}
    inner = codebook.build_codebook

    def timed(*a, **k):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        try:
            return inner(*a, **k)
        finally:
            spent["hdbscan"] += time.perf_counter() - t

    codebook.build_codebook = timed  # type: ignore[assignment]  # question_codebook calls it
    s = ChoirStudyConfig()
    t0 = time.perf_counter()
    res = analyze_lists(recs, vec, vocab, s)
    wall = time.perf_counter() - t0
    print(
        f"analysis: {n_questions} questions x 9 members x 6 conditions x 5 generations, {len(recs)} lists, "
        f"{n_items} items: {wall:.1f} s wall ({spent['hdbscan']:.1f} s in codebooks); target < 180 s"
    )
    print(
        f"  above chance {res.across_questions.above_chance}/{res.across_questions.n_stc}, model recoverability "
        f"{res.recoverability['model'].accuracy:.3f}"
    )


def bench_embed() -> None:
    from sentence_transformers import SentenceTransformer

    from lmaudit.backends.embed.cached import CachedEmbedder
    from lmaudit.backends.embed.st import SentenceTransformerEmbedder, default_model_path
    from lmaudit.provenance.cache import ResponseCache

    rng = np.random.default_rng(0)
    words = [w for w in (Path(__file__).read_text().split()) if w.isalpha()]
    texts = list(dict.fromkeys(" ".join(rng.choice(words, size=8)) for _ in range(3000)))
    plain = SentenceTransformer(str(default_model_path()), device="cpu")
    ours_backend = SentenceTransformerEmbedder()
    ours_backend.embed(texts[:8])  # load both models before timing
    plain.encode(texts[:8])
    t_plain, t_ours = [], []
    for rep in range(3):
        t = time.perf_counter()
        ref = plain.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
        t_plain.append(time.perf_counter() - t)
        # a cold cache where runs keep theirs (paths.cache: .cache/ in the project), not /tmp
        CACHE_ROOT.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=CACHE_ROOT) as d:
            cached = CachedEmbedder(ours_backend, ResponseCache(Path(d)), batch_size=64, progress=False)
            t = time.perf_counter()
            got = cached.embed(texts)
            t_ours.append(time.perf_counter() - t)
        diff = float(np.max(np.abs(got - ref)))
        print(
            f"  rep {rep}: plain encode {t_plain[-1]:.2f} s, lmaudit cached (cold) {t_ours[-1]:.2f} s, max |diff| {diff:.2e}"
        )
    paired = sorted(o / p for o, p in zip(t_ours, t_plain, strict=True))
    print(
        f"embed: {len(texts)} distinct texts; lmaudit / plain = {min(t_ours) / min(t_plain):.2f}x best of each, "
        f"{paired[len(paired) // 2]:.2f}x median of paired reps (target <= 1.2x)"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=["analysis", "embed", "all"], default="all")
    ap.add_argument("--questions", type=int, default=100)
    args = ap.parse_args()
    if args.part in ("analysis", "all"):
        bench_analysis(args.questions)
    if args.part in ("embed", "all"):
        bench_embed()


if __name__ == "__main__":
    main()
