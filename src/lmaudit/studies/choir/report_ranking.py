"""The choir report's ranking section: the outcomes figure (the seed's figure E.2) and tables.

Each cohort's advanced pool is decided by its finalist-stage (stage-2) ballots, or, for a cohort
with none on a question, by its stage-1 ballots (shown as "stage 1"); a tie is shown as such and
counts against the claims."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from matplotlib.patches import Patch

from lmaudit.figures import svg_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["ranking_section"]

_COLOUR = {"conditioned": "#2e7d32", "unconditioned": "#c2185b", None: "#bdbdbd"}
COHORTS = ("conditioned", "unconditioned")


def _figure(qs: Mapping[str, Any]) -> str | None:
    rows = [(q, v) for q, v in qs.items() if v.get("cohorts")]
    if not rows:
        return None

    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        for i, (_q, v) in enumerate(rows):
            y = len(rows) - 1 - i
            for k, c in enumerate(COHORTS):
                o = v["cohorts"][c]
                src = o["advanced_source"]
                ax.barh(y, 1.0, left=k, color=_COLOUR[src], edgecolor="white", height=0.7)
                pool = o["advanced_pool"]
                label = pool or ("tie" if o.get("tie") else "no valid ballot")
                ax.text(
                    k + 0.5,
                    y,
                    label.replace("_", " ") + (" (stage 1)" if o.get("decided_by") == "stage1" else ""),
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if src else "black",
                )
            ax.text(
                2.05,
                y,
                "agree" if v["agree_top"] else "differ" if v["agree_top"] is False else "—",
                va="center",
                fontsize=7,
            )
        ax.set_yticks(range(len(rows)), [q for q, _ in reversed(rows)])
        ax.set_xticks([0.5, 1.5], ["conditioned cohort", "unconditioned cohort"])
        ax.set_xlim(0, 2.4)
        handles = [Patch(color=_COLOUR[s], label=f"{s}-source advanced pool") for s in COHORTS]
        fig.legend(handles=handles, fontsize=7, loc="outside lower center", ncol=2)

    return svg_figure(draw, size=(5.4, 0.45 * len(rows) + 1.2), prefix="choir-rank", rc={"axes.grid": False})


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(o: Mapping[str, Any]) -> list[str]:
    s1, s2 = o["stage1"], o.get("stage2") or {"n_valid": 0, "n_ballots": 0}
    top = o.get("top")
    if o.get("tie"):
        pool = "tie: " + ", ".join(o.get("tied_pools") or []) if o.get("tied_pools") else "tie"
    else:
        pool = str(o.get("advanced_pool") or "—")
    if o.get("decided_by") == "stage1":
        pool += " (stage 1)"
    status = o.get("top_status")
    return [
        f"{s1['n_valid']}/{s1['n_ballots']}; {s2['n_valid']}/{s2['n_ballots']}",
        html.escape(pool),
        html.escape(top["text"])
        if top
        else html.escape(f"— ({status})" if status and status != "ok" else "—"),
    ]


def ranking_section(ranking: Mapping[str, Any] | None) -> list[str]:
    """HTML parts of the ranking section (none without ballots)."""
    if not ranking:
        return []
    s = ranking["summary"]
    qs = ranking["questions"]

    def frac(k: str) -> str:
        return f"{s[k]['count']}/{s[k]['n']}"

    def decided(k: str) -> str:
        d = s[k].get("decided_by") or {}
        return ", ".join(
            f"{n} by {'the finalist stage' if w == 'finalists' else 'stage 1 alone'}" for w, n in d.items()
        )

    st = s.get("by_stage") or {}
    parts = [
        "<h2>Source-blind ranking</h2>",
        f"<p>{s['n_ballots']} ballots ({s['n_valid']} valid, {s['n_invalid']} invalid, "
        f"{s['n_completed']} completed by one omitted letter; stage 1: "
        f"{(st.get('stage1') or {}).get('n_ballots', 0)}, finalist stage: "
        f"{(st.get('stage2') or {}).get('n_ballots', 0)}). The conditioned cohort advanced "
        f"conditioned-source pools in <b>{frac('conditioned_cohort')}</b> questions, the unconditioned "
        f"cohort in <b>{frac('unconditioned_cohort')}</b>; the cohorts agree on the top candidate in "
        f"<b>{frac('agree_top')}</b> (on its concept family in {frac('agree_family')}). Ties count "
        f"against: {s['conditioned_cohort'].get('ties', 0)} and {s['unconditioned_cohort'].get('ties', 0)} "
        f"tied advanced pools, {s['agree_top'].get('ties', 0)} questions with a tied top. Decided: "
        f"conditioned cohort {decided('conditioned_cohort') or 'none'}; unconditioned cohort "
        f"{decided('unconditioned_cohort') or 'none'}.</p>",
    ]
    svg = _figure(qs)
    if svg:
        parts.append(
            "<figure><figcaption>Advanced pool per question and cohort (green: conditioned source; "
            f"magenta: unconditioned source)</figcaption>{svg}</figure>"
        )
    rows = []
    for q, v in qs.items():
        if not v.get("cohorts"):
            rows.append([html.escape(q), "0", "—", "—", "—", "—", "—", "—", "—"])
            continue
        agree = {True: "yes", False: "no", None: "—"}[v["agree_top"]]
        rows.append(
            [
                html.escape(q),
                str(v["n_candidates"]),
                *_cell(v["cohorts"]["conditioned"]),
                *_cell(v["cohorts"]["unconditioned"]),
                agree,
            ]
        )
    parts.append(
        _table(
            [
                "question",
                "candidates",
                "cond. valid (stage 1; 2)",
                "cond. advanced pool",
                "cond. top",
                "unc. valid (stage 1; 2)",
                "unc. advanced pool",
                "unc. top",
                "tops agree",
            ],
            rows,
        )
    )
    if s["invalid_by_error"]:
        parts.append(
            _table(
                ["invalid ballots: rule broken", "n"],
                [[html.escape(k), str(n)] for k, n in s["invalid_by_error"].items()],
            )
        )
    return parts
