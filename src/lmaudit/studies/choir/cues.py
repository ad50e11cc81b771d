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

from lmaudit.stats.salience import echo_rate
from lmaudit.studies.choir.echo import lexical_echo

__all__ = ["anchor_echo", "pair_table"]


def anchor_echo(
    unc_items: Sequence[str],
    unc_labels: Sequence[str],
    anchors: Sequence[str],
    vec: Mapping[str, NDArray[np.float32]],
    threshold: float,
    calibrated: float | None = None,
) -> dict[str, Any]:
    """Item-level and cluster-level anchor echo of one prompt's unconditioned lists (at the
    seed's threshold), item echo at the embedder's calibrated threshold and lexical item echo."""
    out: dict[str, Any] = {"anchors": list(anchors)}
    have = all(t in vec for t in [*anchors, *unc_items, *unc_labels])
    a = np.stack([vec[w] for w in anchors]) if have else None
    for key, texts, t in (
        ("items", unc_items, threshold),
        ("clusters", unc_labels, threshold),
        ("items_calibrated", unc_items, calibrated),
    ):
        if texts and a is not None and t is not None:
            e = echo_rate(np.stack([vec[x] for x in texts]), a, t)
            out[key] = {"rate": e.rate, "n_echo": e.n_echo, "n": e.n, "threshold": t}
        else:
            out[key] = None
    out["items_lexical"] = lexical_echo(unc_items, anchors)
    return out


def _lower(a: float | None, b: float | None) -> bool | None:
    return None if a is None or b is None else b < a


def pair_table(pairs: Sequence[Mapping[str, Any]], per_q: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Both prompts' echo, RBO and signal-to-chance per pair, the directions, and the counts."""
    rows = []
    for p in pairs:
        o, s = per_q.get(str(p["original"])), per_q.get(str(p["stripped"]))
        if o is None or s is None:
            continue

        def view(q: Mapping[str, Any]) -> dict[str, Any]:
            cue = q.get("anchor_echo") or {}
            return {
                "item_echo": (cue.get("items") or {}).get("rate"),
                "item_echo_calibrated": (cue.get("items_calibrated") or {}).get("rate"),
                "item_echo_lexical": (cue.get("items_lexical") or {}).get("rate"),
                "cluster_echo": (cue.get("clusters") or {}).get("rate"),
                "rbo": q.get("R_q"),
                "stc": (q.get("stc") or {}).get("ratio"),
                "echo_rate": q.get("echo_rate"),
            }

        a, b = view(o), view(s)
        rows.append(
            {
                "original": p["original"],
                "stripped": p["stripped"],
                "anchors": list(p["anchors"]),
                "before": a,
                "after": b,
                "item_echo_lower": _lower(a["item_echo"], b["item_echo"]),
                "item_echo_calibrated_lower": _lower(a["item_echo_calibrated"], b["item_echo_calibrated"]),
                "item_echo_lexical_lower": _lower(a["item_echo_lexical"], b["item_echo_lexical"]),
                "cluster_echo_lower": _lower(a["cluster_echo"], b["cluster_echo"]),
                "rbo_lower": _lower(a["rbo"], b["rbo"]),
                "stc_lower": _lower(a["stc"], b["stc"]),
            }
        )
    counts = {
        k: {"yes": sum(1 for r in rows if r[k] is True), "n": sum(1 for r in rows if r[k] is not None)}
        for k in (
            "item_echo_lower",
            "item_echo_calibrated_lower",
            "item_echo_lexical_lower",
            "cluster_echo_lower",
            "rbo_lower",
            "stc_lower",
        )
    }
    return {"pairs": rows, "counts": counts}
