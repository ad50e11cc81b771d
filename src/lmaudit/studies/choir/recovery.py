"""Recoverability and profile leakage (the seed's RQ2 and appendix C).

Cells are member x question x persona (conditioned lists); a cell's feature is its centroid,
the mean of the unit embeddings of its item occurrences (the seed's "conditioned cell
centroids"). ``model`` and ``persona`` are the seed's global classifier: each cell takes the
labels of its most similar other cell (:func:`lmaudit.stats.recover.nearest_cell_recovery`),
with a percentile bootstrap over cells and a label-shuffle null inside the design's blocks
(persona labels within member x question, member labels within question x persona: what the
design could have assigned), and per-member accuracy (``per_model``). The within-member
leave-one-question-out persona classifier (appendix C) runs on the same centroids. Sensitivity
(the main run only): ``*_class_centroid``, nearest class centroid on salience-weighted,
question-centred cells (member and persona held out cell by cell, persona shuffled within
member), and ``*_with_unconditioned``, the global classifier with each member x question's
unconditioned lists as a sixth persona class ``none``.

Profile leakage: an item's leakage is its cosine similarity to the nearest content word of its
persona's profile; a question's (a member's) is the mean over its conditioned item
occurrences. Spearman correlations of the question leakage with the relative persona lift, and
of the member leakage with that member's global persona recoverability. Cue stripping drops
items whose similarity reaches each threshold of ``strip_thresholds`` and re-reports member
recoverability and the within-member persona classifier with the share of items kept.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lmaudit.results import Interval
from lmaudit.stats.exact import unit_dots
from lmaudit.stats.recover import nearest_cell_recovery, nearest_cells, recoverability, within_model_persona
from lmaudit.studies.choir.config import ChoirStudyConfig
from lmaudit.studies.choir.records import UNCONDITIONED, ListRecord, finite
from lmaudit.studies.choir.results import Leakage, QuestionResult, Recovery
from lmaudit.studies.choir.results.across import Spearman, StrippingRun

__all__ = ["cells", "centroid_cells", "leakage", "recover_all"]

Keep = Callable[[ListRecord, str], bool]


def cells(
    recs: list[ListRecord], vec: Mapping[str, NDArray[np.float32]], keep: Keep | None = None
) -> tuple[NDArray[np.float64], list[tuple[str, str, str]]]:
    """The sensitivity's cells: each item weighted ``(L - rank + 1) / L`` in its list, the
    weighted mean, minus the mean cell of its question."""
    acc: dict[tuple[str, str, str], list[NDArray[np.float64]]] = {}
    for r in recs:
        if r.persona == UNCONDITIONED:
            continue
        n = len(r.items)
        kept = [(k, t) for k, t in enumerate(r.items) if keep is None or keep(r, t)]
        if kept:
            acc.setdefault((r.model, r.question, r.persona), []).extend(
                vec[t].astype(np.float64) * (n - k) / n for k, t in kept
            )
    keys = sorted(acc)
    if not keys:
        return np.zeros((0, 1)), keys
    feats = np.array([np.mean(acc[k], axis=0) for k in keys], dtype=np.float64)
    qs = np.array([k[1] for k in keys])
    for q in set(qs.tolist()):
        rows = qs == q
        feats[rows] -= feats[rows].mean(axis=0)
    norms = np.linalg.norm(feats, axis=1)
    ok = norms > 1e-12  # a question with one cell has nothing left to tell it apart
    return feats[ok], [k for k, good in zip(keys, ok, strict=True) if good]


def _summary(
    rec: Any, per_stratum: Mapping[str, float] | None = None, per_model: Mapping[str, float] | None = None
) -> Recovery:
    """A classifier's result as recorded (``per_stratum``: the classifier's own unless given)."""
    lo, hi = (finite(x) for x in rec.null_band)
    ci_lo, ci_hi = (finite(x) for x in rec.ci)  # NaN: no bootstrap drawn
    return Recovery(
        accuracy=float(rec.accuracy),
        ci=Interval(ci_lo, ci_hi) if ci_lo is not None and ci_hi is not None else (None, None),
        chance=float(rec.chance),
        null_mean=finite(rec.null_mean),
        null_band=Interval(lo, hi) if lo is not None and hi is not None else (None, None),
        p=finite(rec.p_value),
        n_cells=rec.n_cells,
        per_stratum=_floats(rec.per_stratum if per_stratum is None else per_stratum),
        per_model=None if per_model is None else _floats(per_model),
    )


def _floats(xs: Mapping[str, float]) -> dict[str, float]:
    return {k: float(v) for k, v in xs.items()}


def centroid_cells(
    recs: list[ListRecord],
    vec: Mapping[str, NDArray[np.float32]],
    keep: Keep | None = None,
    unconditioned: bool = False,
) -> tuple[NDArray[np.float64], list[tuple[str, str, str]]]:
    """The seed's cells: the mean unit embedding of each member x question x persona's item
    occurrences (conditioned lists; with ``unconditioned``, also persona ``none``)."""
    acc: dict[tuple[str, str, str], list[NDArray[np.float32]]] = {}
    for r in recs:
        if r.persona == UNCONDITIONED and not unconditioned:
            continue
        kept = [vec[t] for t in r.items if keep is None or keep(r, t)]
        if kept:
            acc.setdefault((r.model, r.question, r.persona), []).extend(kept)
    keys = sorted(acc)
    if not keys:
        return np.zeros((0, 1)), keys
    feats = np.array([np.mean(np.asarray(acc[k], dtype=np.float64), axis=0) for k in keys])
    ok = np.linalg.norm(feats, axis=1) > 1e-12
    return feats[ok], [k for k, good in zip(keys, ok, strict=True) if good]


def _global(
    feats: NDArray[np.float64],
    keys: list[tuple[str, str, str]],
    s: ChoirStudyConfig,
    rng: np.random.Generator,
) -> dict[str, Recovery]:
    """The seed's global classifier: member and persona of each cell's nearest cell."""
    members, questions, personas = [k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys]
    out: dict[str, Recovery] = {}
    if len(keys) < 2:
        return out
    nn = nearest_cells(feats)
    kw: dict[str, Any] = {
        "rng": rng,
        "per": members,
        "n_boot": s.n_boot,
        "n_null": s.n_null,
        "alpha": s.alpha,
        "neighbours": nn,
    }
    for what, labels, within in (
        ("model", members, list(zip(questions, personas, strict=True))),
        ("persona", personas, list(zip(members, questions, strict=True))),
    ):
        if len(set(labels)) >= 2:
            rec = nearest_cell_recovery(feats, labels, shuffle_within=within, **kw)
            out[what] = _summary(rec, per_stratum={}, per_model=rec.per_stratum)
    return out


def recover_all(
    recs: list[ListRecord],
    vec: Mapping[str, NDArray[np.float32]],
    s: ChoirStudyConfig,
    rng: np.random.Generator,
    keep: Keep | None = None,
    sensitivity: bool = False,
) -> dict[str, Recovery]:
    """Every recoverability classifier the cells allow, by name (module notes)."""
    feats, keys = centroid_cells(recs, vec, keep)
    out = _global(feats, keys, s, rng)
    members, personas, questions = [k[0] for k in keys], [k[2] for k in keys], [k[1] for k in keys]
    if len(keys) >= 2 and len(set(personas)) >= 2 and len(set(questions)) >= 2:
        out["persona_within_model_loqo"] = _summary(
            within_model_persona(
                feats, members, personas, questions, rng=rng, n_boot=s.n_boot, n_null=s.n_null
            )
        )
    if sensitivity:
        out.update(_class_centroid(recs, vec, s, rng))
        with_unc = _global(*centroid_cells(recs, vec, unconditioned=True), s, rng)
        if any(r.persona == UNCONDITIONED for r in recs):
            out.update({f"{k}_with_unconditioned": v for k, v in with_unc.items()})
    return out


def _class_centroid(
    recs: list[ListRecord],
    vec: Mapping[str, NDArray[np.float32]],
    s: ChoirStudyConfig,
    rng: np.random.Generator,
) -> dict[str, Recovery]:
    """Sensitivity: nearest class centroid on salience-weighted, question-centred cells."""
    feats, keys = cells(recs, vec)
    out: dict[str, Recovery] = {}
    members, personas = [k[0] for k in keys], [k[2] for k in keys]
    kw: dict[str, Any] = {"rng": rng, "n_boot": s.n_boot, "n_null": s.n_null, "alpha": s.alpha}
    if len(keys) >= 2 and len(set(members)) >= 2:
        rec = recoverability(feats, members, strata=None, **kw)
        out["model_class_centroid"] = _summary(rec, per_model=_per(rec.correct, members))
    if len(keys) >= 2 and len(set(personas)) >= 2:
        rec = recoverability(feats, personas, shuffle_within=members, **kw)
        out["persona_class_centroid"] = _summary(rec, per_model=_per(rec.correct, members))
    return out


def _per(correct: tuple[bool, ...], members: list[str]) -> dict[str, float]:
    return {
        m: float(np.mean([c for c, mm in zip(correct, members, strict=True) if mm == m]))
        for m in sorted(set(members))
    }


def _spearman(x: list[float], y: list[float | None]) -> Spearman | None:
    pairs = [(a, b) for a, b in zip(x, y, strict=True) if a is not None and b is not None]
    if len(pairs) < 3 or len({a for a, _ in pairs}) < 2 or len({b for _, b in pairs}) < 2:
        return None
    from scipy.stats import spearmanr

    r = spearmanr([a for a, _ in pairs], [b for _, b in pairs])
    return Spearman(rho=finite(float(r.statistic)), p=finite(float(r.pvalue)), n=len(pairs))


def leakage(
    recs: list[ListRecord],
    vec: Mapping[str, NDArray[np.float32]],
    persona_vocab: Mapping[str, list[str]],
    per_q: Mapping[str, QuestionResult],
    recover: Mapping[str, Recovery],
    s: ChoirStudyConfig,
    rng: np.random.Generator,
) -> Leakage | None:
    """Profile leakage per question and member, its correlations, and the stripping re-runs
    (module notes); None without a profile word near any conditioned item."""
    terms = {p: np.stack([vec[t] for t in ws]) for p, ws in persona_vocab.items() if ws}
    texts: dict[str, dict[str, None]] = {}
    for r in recs:
        if r.persona != UNCONDITIONED and r.persona in terms:
            texts.setdefault(r.persona, {}).update(dict.fromkeys(r.items))
    sim: dict[tuple[str, str], float] = {}
    for p, ts in texts.items():
        if ts:  # exact dot products: the similarities are results, the same bits on every machine
            best = unit_dots(np.stack([vec[t] for t in ts]), terms[p]).max(axis=1)
            sim.update({(p, t): float(v) for t, v in zip(ts, best, strict=True)})
    if not sim:
        return None
    # an item's leakage: its cosine similarity to the nearest content word of its own profile;
    # a question's (a member's) leakage: the mean over its conditioned item occurrences
    by_q: dict[str, list[float]] = {}
    by_m: dict[str, list[float]] = {}
    for r in recs:
        if r.persona == UNCONDITIONED or r.persona not in terms:
            continue
        for t in r.items:
            by_q.setdefault(r.question, []).append(sim[(r.persona, t)])
            by_m.setdefault(r.model, []).append(sim[(r.persona, t)])
    q_rate = {q: float(np.mean(v)) for q, v in sorted(by_q.items())}
    m_rate = {m: float(np.mean(v)) for m, v in sorted(by_m.items())}
    lifts = {q: v.relative_lift for q, v in per_q.items()}
    persona = recover.get("persona")
    per_model_acc = (persona.per_model or {}) if persona else {}
    qs, ms = sorted(q_rate), sorted(m_rate)
    n_all = sum(len(r.items) for r in recs if r.persona != UNCONDITIONED)
    stripping = []
    for cut_sim in s.strip_thresholds:

        def keep(r: ListRecord, text: str, c: float = float(cut_sim)) -> bool:
            return sim.get((r.persona, text), -1.0) < c

        kept = sum(1 for r in recs if r.persona != UNCONDITIONED for x in r.items if keep(r, x))
        rec = recover_all(recs, vec, s, rng, keep)
        model, loqo = rec.get("model"), rec.get("persona_within_model_loqo")
        stripping.append(
            StrippingRun(
                threshold_similarity=float(cut_sim),
                kept_share=kept / n_all if n_all else None,
                model_accuracy=model.accuracy if model else None,
                model_ci=model.interval if model else None,
                persona_within_model_loqo_accuracy=loqo.accuracy if loqo else None,
                persona_within_model_loqo_ci=loqo.interval if loqo else None,
                persona_within_model_loqo_chance=loqo.chance if loqo else None,
                # the seed: accuracy "exceeds five-way chance in all three stripped runs"
                persona_within_model_loqo_above_chance=(
                    loqo.interval.lo > loqo.chance if loqo and loqo.interval else None
                ),
            )
        )
    return Leakage(
        measure="mean similarity to the nearest profile word",
        question_leakage=q_rate,
        model_leakage=m_rate,
        question_spearman=_spearman([q_rate[q] for q in qs], [lifts.get(q) for q in qs]),
        model_spearman=_spearman([m_rate[m] for m in ms], [per_model_acc.get(m) for m in ms]),
        stripping=tuple(stripping),
    )
