"""The choir report's ranking section: the outcomes figure (the seed's figure E.2) and table rows.

Each cohort's advanced pool is decided by its finalist-stage (stage-2) ballots, or, for a cohort
with none on a question, by its stage-1 ballots (shown as "stage 1"); a tie is shown as such and
counts against the claims."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from matplotlib.patches import Patch

from lmaudit.figures import svg_figure
from lmaudit.studies.choir.results import (
    Cohort,
    CohortCount,
    CohortDecided,
    Count,
    Ranking,
    RankingQuestion,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["figure", "ranking_view"]

_COLOUR = {"conditioned": "#2e7d32", "unconditioned": "#c2185b", None: "#bdbdbd"}
COHORTS = ("conditioned", "unconditioned")


def figure(qs: Mapping[str, RankingQuestion]) -> str | None:
    rows = [(q, v.cohorts, v.agree_top) for q, v in qs.items() if v.cohorts is not None]
    if not rows:
        return None

    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        for i, (_q, cohorts, agree_top) in enumerate(rows):
            y = len(rows) - 1 - i
            for k, c in enumerate(COHORTS):
                o = cohorts[c]
                src = o.advanced_source
                ax.barh(y, 1.0, left=k, color=_COLOUR[src], edgecolor="white", height=0.7)
                label = o.advanced_pool or ("tie" if o.tie else "no valid ballot")
                ax.text(
                    k + 0.5,
                    y,
                    label.replace("_", " ") + (" (stage 1)" if o.decided_by == "stage1" else ""),
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if src else "black",
                )
            ax.text(
                2.05,
                y,
                "agree" if agree_top else "differ" if agree_top is False else "—",
                va="center",
                fontsize=7,
            )
        ax.set_yticks(range(len(rows)), [q for q, _, _ in reversed(rows)])
        ax.set_xticks([0.5, 1.5], ["conditioned cohort", "unconditioned cohort"])
        ax.set_xlim(0, 2.4)
        handles = [Patch(color=_COLOUR[s], label=f"{s}-source advanced pool") for s in COHORTS]
        handles.append(Patch(color=_COLOUR[None], label="no advanced pool (tie or no valid ballot)"))
        fig.legend(handles=handles, fontsize=7, loc="outside lower center", ncol=2)

    return svg_figure(draw, size=(5.4, 0.45 * len(rows) + 1.45), prefix="choir-rank", rc={"axes.grid": False})


def _cell(o: Cohort) -> list[str]:
    s1, s2 = o.stage1, o.stage2
    decided = o if isinstance(o, CohortDecided) else None
    tied_pools = decided.tied_pools if decided else None
    if o.tie:
        pool = "tie: " + ", ".join(tied_pools) if tied_pools else "tie"
    else:
        pool = str(o.advanced_pool or "—")
    if o.decided_by == "stage1":
        pool += " (stage 1)"
    top = decided.top if decided else None
    status = decided.top_status if decided else None
    return [
        f"{s1.n_valid}/{s1.n_ballots}; {s2.n_valid if s2 else 0}/{s2.n_ballots if s2 else 0}",
        pool,
        top.text if top else (f"— ({status})" if status and status != "ok" else "—"),
    ]


def _frac(c: Count) -> str:
    return f"{c.count} of {c.n}"


def _decided(c: CohortCount) -> str:
    return (
        ", ".join(
            f"{n} by {'the finalist stage' if w == 'finalists' else 'stage 1 alone'}"
            for w, n in c.decided_by.items()
        )
        or "none"
    )


def ranking_view(ranking: Ranking | None) -> dict[str, Any] | None:
    """What the report shows of the ranking (None without ballots): the summary sentence's
    numbers, the outcomes figure, one row per question and the invalid ballots by rule."""
    if ranking is None:
        return None
    s = ranking.summary
    qs = ranking.questions
    rows = []
    for q, v in qs.items():
        if v.cohorts is None:
            rows.append([q, "0", *["—"] * 7])
            continue
        agree = {True: "yes", False: "no", None: "—"}[v.agree_top]
        rows.append(
            [
                q,
                str(v.n_candidates),
                *_cell(v.cohorts.conditioned),
                *_cell(v.cohorts.unconditioned),
                agree,
            ]
        )
    return {
        "s": s,
        "stage1": s.by_stage.stage1.n_ballots,
        "stage2": s.by_stage.stage2.n_ballots,
        "conditioned": _frac(s.conditioned_cohort),
        "unconditioned": _frac(s.unconditioned_cohort),
        "agree_top": _frac(s.agree_top),
        "agree_family": _frac(s.agree_family),
        "ties": (
            s.conditioned_cohort.ties or 0,
            s.unconditioned_cohort.ties or 0,
            s.agree_top.ties or 0,
        ),
        "decided": (_decided(s.conditioned_cohort), _decided(s.unconditioned_cohort)),
        "svg": figure(qs),
        "rows": rows,
        "invalid": sorted(s.invalid_by_error.items()),
    }
