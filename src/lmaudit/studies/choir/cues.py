"""Matched cue stripping (section 4.3's external extension, appendix E.1).

Each pair is an Infinity-Chat prompt and its rewording without the prompt's lexical anchors
(``data/choir/cue_pairs.jsonl``: our own rewordings; the seed's are not public). For both
prompts of a pair, on their unconditioned lists:

- item-level anchor echo: the share of item occurrences within cosine distance
  ``echo_threshold`` of any anchor word;
- codebook-cluster echo: the share of the prompt's unconditioned concepts (codebook clusters
  and singleton concepts) whose label (medoid text) is within that distance of an anchor;
- cross-model RBO (``R_q``) and signal-to-chance, from the per-question analysis.

The pair reports each quantity for both prompts and whether stripping lowered it; the summary
counts the pairs where item echo, cluster echo and RBO fell (the seed: 6/6, 6/6, 3/6).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lmaudit.stats.salience import echo_rate

__all__ = ["anchor_echo", "pair_table"]


def anchor_echo(
    unc_items: Sequence[str],
    unc_labels: Sequence[str],
    anchors: Sequence[str],
    vec: Mapping[str, NDArray[np.float32]],
    threshold: float,
) -> dict[str, Any]:
    """Item-level and cluster-level anchor echo of one prompt's unconditioned lists."""
    a = np.stack([vec[w] for w in anchors])
    out: dict[str, Any] = {"anchors": list(anchors)}
    for key, texts in (("items", unc_items), ("clusters", unc_labels)):
        if texts:
            e = echo_rate(np.stack([vec[t] for t in texts]), a, threshold)
            out[key] = {"rate": e.rate, "n_echo": e.n_echo, "n": e.n}
        else:
            out[key] = None
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
                "cluster_echo_lower": _lower(a["cluster_echo"], b["cluster_echo"]),
                "rbo_lower": _lower(a["rbo"], b["rbo"]),
                "stc_lower": _lower(a["stc"], b["stc"]),
            }
        )
    counts = {
        k: {"yes": sum(1 for r in rows if r[k] is True), "n": sum(1 for r in rows if r[k] is not None)}
        for k in ("item_echo_lower", "cluster_echo_lower", "rbo_lower", "stc_lower")
    }
    return {"pairs": rows, "counts": counts}
