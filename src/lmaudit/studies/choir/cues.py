"""Matched cue stripping (section 4.3's external extension, appendix E.1).

Each pair is an Infinity-Chat prompt and its rewording without the prompt's lexical anchors
(``data/choir/cue_pairs.jsonl``: our own rewordings; the seed's are not public). For both
prompts of a pair, on their unconditioned lists:

- item-level anchor echo: the share of item occurrences within cosine distance
  ``echo_threshold`` of any anchor word;
- codebook-cluster echo: the share of the prompt's unconditioned codebook clusters (noise
  singletons left out) whose label (medoid text) is within that distance of an anchor;
- item echo at the embedder's calibrated threshold (:mod:`.echo`) and lexical item echo
  (an item sharing a normalised content word with an anchor);
- cross-model RBO (``R_q``) and signal-to-chance, from the per-question analysis.

The pair reports each quantity for both prompts and whether stripping lowered it; the summary
counts the pairs where each echo, RBO and signal-to-chance fell (the seed: 6/6, 6/6, 3/6 for item
echo, cluster echo and RBO).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lmaudit.studies.choir.echo import embedding_echo, lexical_echo
from lmaudit.studies.choir.results import CuePair, CueStripping, QuestionResult
from lmaudit.studies.choir.results.across import CueView, YesOf
from lmaudit.studies.choir.results.question import AnchorEcho, EchoRate

__all__ = ["anchor_echo", "pair_table"]


def anchor_echo(
    unc_items: Sequence[str],
    unc_labels: Sequence[str],
    anchors: Sequence[str],
    vec: Mapping[str, NDArray[np.float32]],
    threshold: float,
    calibrated: float | None = None,
) -> AnchorEcho:
    """Item-level and cluster-level anchor echo of one prompt's unconditioned lists (at the
    seed's threshold), item echo at the embedder's calibrated threshold and lexical item echo."""
    have = all(t in vec for t in [*anchors, *unc_items, *unc_labels])

    def rate(texts: Sequence[str], t: float | None) -> EchoRate | None:
        return embedding_echo(texts, anchors, vec, t) if texts and have and t is not None else None

    return AnchorEcho(
        anchors=tuple(anchors),
        items=rate(unc_items, threshold),
        clusters=rate(unc_labels, threshold),
        items_calibrated=rate(unc_items, calibrated),
        items_lexical=lexical_echo(unc_items, anchors),
    )


def _lower(a: float | None, b: float | None) -> bool | None:
    return None if a is None or b is None else b < a


def _rate(e: EchoRate | None) -> float | None:
    return e.rate if e is not None else None


def _view(q: QuestionResult) -> CueView:
    cue = q.anchor_echo
    return CueView(
        item_echo=_rate(cue.items) if cue else None,
        item_echo_calibrated=_rate(cue.items_calibrated) if cue else None,
        item_echo_lexical=_rate(cue.items_lexical) if cue else None,
        cluster_echo=_rate(cue.clusters) if cue else None,
        rbo=q.R_q,
        stc=q.stc_ratio,
        echo_rate=q.echo_rate,
    )


_COUNTED = (
    "item_echo_lower",
    "item_echo_calibrated_lower",
    "item_echo_lexical_lower",
    "cluster_echo_lower",
    "rbo_lower",
    "stc_lower",
)


def pair_table(pairs: Sequence[Mapping[str, Any]], per_q: Mapping[str, QuestionResult]) -> CueStripping:
    """Both prompts' echo, RBO and signal-to-chance per pair, the directions, and the counts."""
    rows = []
    for p in pairs:
        o, s = per_q.get(str(p["original"])), per_q.get(str(p["stripped"]))
        if o is None or s is None:
            continue
        a, b = _view(o), _view(s)
        rows.append(
            CuePair(
                original=str(p["original"]),
                stripped=str(p["stripped"]),
                anchors=tuple(p["anchors"]),
                before=a,
                after=b,
                item_echo_lower=_lower(a.item_echo, b.item_echo),
                item_echo_calibrated_lower=_lower(a.item_echo_calibrated, b.item_echo_calibrated),
                item_echo_lexical_lower=_lower(a.item_echo_lexical, b.item_echo_lexical),
                cluster_echo_lower=_lower(a.cluster_echo, b.cluster_echo),
                rbo_lower=_lower(a.rbo, b.rbo),
                stc_lower=_lower(a.stc, b.stc),
            )
        )
    counts = {
        k: YesOf(
            yes=sum(1 for r in rows if getattr(r, k) is True),
            n=sum(1 for r in rows if getattr(r, k) is not None),
        )
        for k in _COUNTED
    }
    return CueStripping(pairs=tuple(rows), counts=counts)
