"""The seed's recoverability estimator through the choir analysis: cells are the conditioned
member x question x persona centroids, the global classifier takes each cell's nearest cell,
and per-member accuracies are reported; planted geometry whose answer is known."""

from __future__ import annotations

import dataclasses

import numpy as np

from lmaudit.studies.choir.config import ChoirStudyConfig
from lmaudit.studies.choir.records import ListRecord
from lmaudit.studies.choir.recovery import recover_all


def planted(strengths=(3.0, 3.0, 0.3, 0.3), n_questions=8, personas=("p0", "p1", "p2", "p3", "p4"), dim=32):
    """Item embeddings: question first, member signature second, persona last."""
    rng = np.random.default_rng(21)
    q_dirs = 4.0 * rng.normal(size=(n_questions, dim))
    m_dirs = rng.normal(size=(len(strengths), dim))
    p_dirs = {p: rng.normal(size=dim) for p in (*personas, "none")}
    recs, vec = [], {}
    for m, strength in enumerate(strengths):
        for q in range(n_questions):
            for p in (*personas, "none"):
                items = []
                for k in range(3):
                    text = f"m{m} q{q} {p} item{k}"
                    v = q_dirs[q] + strength * m_dirs[m] + 0.8 * p_dirs[p] + 0.3 * rng.normal(size=dim)
                    vec[text] = (v / np.linalg.norm(v)).astype(np.float32)
                    items.append(text)
                cond = "A" if p == "none" else "persona"
                recs.append(ListRecord(f"m{m}", f"q{q}", cond, p, 1.0, 0, tuple(items)))
    return recs, vec


def out_of_block_share(recs, vec) -> float:
    """Directly: each conditioned cell's centroid, its nearest other cell, and the share of cells
    whose nearest cell lies outside its member x question block."""
    cells = {}
    for r in recs:
        if r.persona != "none":
            cells[(r.model, r.question, r.persona)] = np.mean(
                [vec[t] for t in r.items], axis=0, dtype=np.float64
            )
    keys = list(cells)
    x = np.array([cells[k] / np.linalg.norm(cells[k]) for k in keys])
    sims = x @ x.T
    np.fill_diagonal(sims, -np.inf)
    nearest = sims.argmax(axis=1)
    return float(np.mean([keys[i][:2] != keys[j][:2] for i, j in enumerate(nearest)]))


def test_the_seed_pattern_per_member_and_a_null_far_below_one_fifth() -> None:
    recs, vec = planted()
    s = dataclasses.replace(ChoirStudyConfig(), n_boot=200, n_null=200)
    out = recover_all(recs, vec, s, np.random.default_rng(3), sensitivity=True)
    model, persona = out["model"], out["persona"]
    assert model.per_model is not None and persona.per_model is not None
    # strong signatures: each cell's nearest cell is its member's cell of the same question
    assert model.per_model["m0"] == 1.0 and model.per_model["m1"] == 1.0
    assert persona.per_model["m0"] < 0.1 and persona.per_model["m1"] < 0.1
    # weak signatures: the nearest cell is the other weak member's, same persona
    assert model.per_model["m2"] < 0.5 and persona.per_model["m2"] > 0.5
    # persona labels shuffled within member x question keep each block's personas distinct: a
    # cell whose nearest cell is in its own block never matches, one whose nearest is elsewhere
    # matches with probability 1/5 exactly, so the null mean is (out-of-block share) / 5, far
    # below 1/5 (the seed's 0.024 beside its 0.877 member accuracy)
    assert persona.null_mean is not None and persona.null_interval is not None
    assert abs(persona.null_mean - out_of_block_share(recs, vec) / 5) < 0.01
    assert persona.null_mean < 0.15 and persona.accuracy > persona.null_interval.hi
    assert persona.n_cells == 4 * 8 * 5
    # the sensitivities are reported beside the seed's estimator
    assert {"model_class_centroid", "persona_class_centroid", "model_with_unconditioned"} <= set(out)
    assert out["model_with_unconditioned"].n_cells == 4 * 8 * 6
