"""The choir analysis: pure functions from extracted lists and their embeddings to results.

Per question: the codebook (:mod:`.codebook`), Smith's S per member x condition group (the
unconditioned group pools every unconditioned template; each persona is its own group;
temperatures and generations are pooled; each cell apart in :mod:`.conditions`), each member's concepts ranked by S, the mean
pairwise cross-member RBO of those rankings (unconditioned: ``R_q``; per persona, averaged over
personas: same-persona RBO), signal-to-chance of the unconditioned rankings (occurrences
reassigned among the members' lists, and the rankings' entries dealt across members:
:mod:`.nulls`), the echo rate of
the unconditioned items, ``C_q`` (distinct concepts of unconditioned items), the width ``W_q``
(eq. 2), absolute and relative persona lift, and the codebook permutation test of the
member-cluster association (unconditioned clustered items). Across questions: recoverability
of member and persona from conditioned cells (member x question x persona centroids, each
cell's nearest cell: :mod:`.recovery`), the within-member leave-one-question-out persona
classifier (appendix C), and the width-bin table and the summary (:mod:`.summary`). Every
section is built as its typed record (:mod:`.results`); :class:`~.results.ListsSections` holds them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lmaudit.stats.rbo import encode_lists, rbo_all_pairs
from lmaudit.stats.salience import (
    Salience,
    codebook_permutation_test,
    echo_rate,
    smiths_s,
)
from lmaudit.studies.choir.baseline import lift_block, metric_row, metric_sensitivity, sensitivity_summary
from lmaudit.studies.choir.codebook import question_codebook
from lmaudit.studies.choir.conditions import condition_block, condition_summary, novelty_by_width
from lmaudit.studies.choir.config import ChoirStudyConfig
from lmaudit.studies.choir.cues import anchor_echo, pair_table
from lmaudit.studies.choir.echo import echo_block, echo_calibration
from lmaudit.studies.choir.nulls import question_stc
from lmaudit.studies.choir.records import UNCONDITIONED, ListRecord, finite
from lmaudit.studies.choir.recovery import leakage, recover_all
from lmaudit.studies.choir.results import (
    ListsSections,
    QuestionResult,
)
from lmaudit.studies.choir.results.question import CodebookTest, TemplateNovelty
from lmaudit.studies.choir.salience_table import salience_record, tie_sensitivity
from lmaudit.studies.choir.summary import across_questions, width_bins

__all__ = ["ListRecord", "analyze_lists"]


def _mean_pairwise_rbo(rankings: Sequence[Sequence[Any]], p: float) -> float | None:
    if sum(1 for r in rankings if r) < 2:
        return None
    enc = encode_lists([list(r) for r in rankings])
    vals = rbo_all_pairs(enc.ids, p, enc.starts)
    return finite(float(np.nanmean(vals))) if np.isfinite(vals).any() else None


#: The seed's template comparison (section 4.3): the depth-pressure template B against the
#: baseline template A, both unconditioned.
BASELINE_TEMPLATE, DEPTH_TEMPLATE = "A", "B"


def _template_novelty(recs: Sequence[ListRecord], concept_of: Mapping[str, int]) -> TemplateNovelty | None:
    """The share of the depth-pressure template's distinct concepts (codebook concepts, noise
    singletons included, pooled over members and generations) that no baseline-template list of
    the question names; ``None`` unless both templates have concepts for the question."""

    def concepts(template: str) -> set[int]:
        return {
            concept_of[t]
            for r in recs
            if r.persona == UNCONDITIONED and r.condition == template
            for t in r.items
            if t in concept_of
        }

    base, depth = concepts(BASELINE_TEMPLATE), concepts(DEPTH_TEMPLATE)
    if not base or not depth:
        return None
    novel = depth - base
    return TemplateNovelty(
        baseline=BASELINE_TEMPLATE,
        template=DEPTH_TEMPLATE,
        n_concepts=len(depth),
        n_novel=len(novel),
        share=len(novel) / len(depth),
    )


def _ranking(sal: Salience, depth: int | None) -> list[Any]:
    """Concepts by Smith's S, concepts of exactly equal S one tie group (a frozenset: RBO takes
    them as tied, Webber's section 4.3); a depth cut keeps the groups that start within it."""
    out: list[Any] = []
    n = 0
    for entry in sal.tied_ranking():
        if depth and n >= depth:
            break
        out.append(entry)
        n += len(entry) if isinstance(entry, frozenset) else 1
    return out


def _question(
    recs: list[ListRecord],
    vec: Mapping[str, NDArray[np.float32]],
    vocab: NDArray[np.float32],
    s: ChoirStudyConfig,
    rng: np.random.Generator,
    anchors: Sequence[str] = (),
    terms: Sequence[str] = (),
    echo_t: float | None = None,
    stripped_of: str | None = None,
) -> QuestionResult:
    """One question's results (module notes); ``stripped_of``: a cue pair's stripped prompt's original."""
    cb = question_codebook(recs, vec, s)
    models = sorted({r.model for r in recs})
    groups: dict[tuple[str, str], list[list[int]]] = {}
    for r in recs:
        concepts = [cb.concept_of[t] for t in r.items if t in cb.concept_of]
        groups.setdefault((r.model, r.persona), []).append(list(dict.fromkeys(concepts)))
    personas = sorted({r.persona for r in recs} - {UNCONDITIONED})
    sal = {k: smiths_s(v) for k, v in groups.items()}
    ranked = {k: _ranking(v, s.rbo_depth) for k, v in sal.items()}

    def cells(condition: str) -> list[list[Any]]:
        """The rankings of the members with lists in ``condition`` (the seed: "all complete
        model cells available for each probe"); a member without any is left out, not
        counted as an empty ranking that agrees with no one."""
        return [ranked[(m, condition)] for m in models if (m, condition) in ranked]

    unc = cells(UNCONDITIONED)
    r_q = _mean_pairwise_rbo(unc, s.rbo_p)
    same = {p: _mean_pairwise_rbo(cells(p), s.rbo_p) for p in personas}
    same_vals = [v for v in same.values() if v is not None]
    same_mean = float(np.mean(same_vals)) if same_vals else None
    unc_items = [t for r in recs if r.persona == UNCONDITIONED for t in r.items]
    # eq. 2: the number of unconditioned codebook clusters (noise singletons are not clusters)
    c_q = len({c for t in unc_items if (c := cb.concept_of.get(t, -1)) in cb.clustered})
    primary = metric_row(c_q, r_q, s)

    def rank(lists: list[list[int]]) -> list[Any]:
        return _ranking(smiths_s(lists), s.rbo_depth)

    def mean_rbo(rankings: Sequence[Sequence[Any]]) -> float | None:
        return _mean_pairwise_rbo(rankings, s.rbo_p)

    # baseline: the persona template's unconditioned lists (like for like); pooled R_q secondary
    lift = lift_block(recs, cb.concept_of, r_q, same_mean, s, rank, mean_rbo)
    sensitivity = (
        metric_sensitivity(recs, vec, primary, s, rank, mean_rbo)
        if s.codebook.metric_sensitivity and not cb.coded
        else None
    )
    # signal-to-chance: occurrences reassigned among the models' lists (primary), and the
    # salience rankings' entries dealt across models (sensitivity); nulls.py
    unc_lists = [groups[(m, UNCONDITIONED)] for m in models if (m, UNCONDITIONED) in groups]
    stc, stc_rs = question_stc(unc_lists, unc, rng=rng, shuffles=s.shuffles, p=s.rbo_p, depth=s.rbo_depth)
    echo_rate_ = None
    if unc_items and vocab.shape[0] and all(t in vec for t in unc_items):
        echo_rate_ = finite(echo_rate(np.stack([vec[t] for t in unc_items]), vocab, s.echo_threshold).rate)
    pm = [(r.model, cb.concept_of[t]) for r in recs if r.persona == UNCONDITIONED for t in r.items]
    pm = [(m, c) for m, c in pm if c in cb.clustered]
    test = None
    if len({m for m, _ in pm}) >= 2 and len({c for _, c in pm}) >= 2 and s.permutations > 0:
        perm = codebook_permutation_test(
            [m for m, _ in pm], [c for _, c in pm], rng=rng, n_permutations=s.permutations
        )
        test = CodebookTest(
            chi2=float(perm.statistic), cramers_v=float(perm.cramers_v), p=float(perm.p_value)
        )
    cue = None
    if anchors:
        unc_concepts = sorted({c for t in unc_items if (c := cb.concept_of.get(t, -1)) in cb.clustered})
        cue = anchor_echo(
            unc_items, [cb.labels[c] for c in unc_concepts], anchors, vec, s.echo_threshold, echo_t
        )
    top = {m: sal[(m, UNCONDITIONED)].ranking()[:5] if (m, UNCONDITIONED) in sal else [] for m in models}
    return QuestionResult(
        n_models=len(models),
        n_models_unconditioned=len(unc),
        n_models_per_persona={p: len(cells(p)) for p in personas},
        n_lists=len(recs),
        n_items=cb.n_items,
        n_concepts=len(cb.labels),
        n_clusters=len(cb.clustered),
        n_noise_items=cb.n_noise,
        C_q=c_q,
        R_q=r_q,
        width=primary.width,
        same_persona_rbo={p: same[p] for p in personas},
        same_persona_rbo_mean=same_mean,
        lift=lift,
        metric_sensitivity=sensitivity,
        stc=stc,
        stc_ranking_shuffle=stc_rs,
        template_novelty=_template_novelty(recs, cb.concept_of),
        echo=echo_block(unc_items, terms, vec, s.echo_threshold, echo_t),
        echo_rate=echo_rate_,
        codebook_test=test,
        anchor_echo=cue,
        top_concepts={m: tuple(cb.labels[int(str(c))] for c in cs) for m, cs in top.items()},
        salience=salience_record(cb, recs, sal),
        conditions=condition_block(
            recs, cb.concept_of, lambda x: _ranking(x, s.rbo_depth), mean_rbo, s.rbo_p
        ),
        salience_ties=tie_sensitivity(
            [sal[(m, UNCONDITIONED)] for m in models if (m, UNCONDITIONED) in sal], unc, s.rbo_depth, s.rbo_p
        ),
        stripped_of=stripped_of,
    )


def analyze_lists(
    recs: list[ListRecord],
    vec: Mapping[str, NDArray[np.float32]],
    vocab: Mapping[str, list[str]],
    s: ChoirStudyConfig,
    persona_vocab: Mapping[str, list[str]] | None = None,
    cue_pairs: Sequence[Mapping[str, Any]] = (),
    degenerate_items: int = 0,
) -> ListsSections:
    """Pure: lists, item/term embeddings, question (and persona profile) vocabularies, the
    matched cue pairs in; the typed sections out (``degenerate_items``: the items extraction
    dropped, for the summary). The stripped prompts of cue pairs are analysed like any question
    but left out of the summary and the width bins (they are not prompts of the bank); they
    appear under ``cue_stripping``."""
    anchors_of = {str(q): list(p["anchors"]) for p in cue_pairs for q in (p["original"], p["stripped"])}
    original_of = {str(p["stripped"]): str(p["original"]) for p in reversed(cue_pairs)}
    rng = np.random.default_rng(s.analysis_seed)
    by_q: dict[str, list[ListRecord]] = {}
    for r in recs:
        by_q.setdefault(r.question, []).append(r)
    per_q: dict[str, QuestionResult] = {}
    calibrated = echo_calibration(vec, s)  # the embedder's echo threshold (None: set not embedded)
    echo_t = calibrated.threshold if calibrated else None
    coded = bool(recs) and all(r.concepts is not None for r in recs)  # hand-coded: no embeddings
    for q in sorted(by_q):
        terms = vocab.get(q, [])
        have = bool(terms) and all(t in vec for t in terms)
        v = np.stack([vec[t] for t in terms]) if have else np.zeros((0, 1), dtype=np.float32)
        per_q[q] = _question(
            by_q[q], vec, v, s, rng, anchors_of.get(q, ()), terms, echo_t, original_of.get(q)
        )
    cues = pair_table(cue_pairs, per_q) if cue_pairs else None
    bank_q = {q: v for q, v in per_q.items() if q not in original_of}
    kept = [r for r in recs if r.question not in original_of]
    # features are item embeddings; the sensitivity classifiers in the main run only
    recover = {} if coded else recover_all(kept, vec, s, rng, sensitivity=True)
    leak = leakage(kept, vec, persona_vocab, bank_q, recover, s, rng) if persona_vocab and not coded else None
    bins = width_bins(bank_q, s, rng)
    return ListsSections(
        across_questions=across_questions(bank_q, bins, recover, s, echo_t, degenerate_items),
        questions=per_q,
        width_bins=bins,
        recoverability=recover,
        leakage=leak,
        cue_stripping=cues,
        echo_calibration=calibrated,
        codebook_metric_sensitivity=sensitivity_summary(bank_q, s),
        codebook_source="coded" if coded else "clustered",
        conditions=condition_summary(bank_q),
        novelty_by_width=novelty_by_width(bank_q, s.width_bins),
    )
