"""The choir report: one self-contained HTML page with inline SVG figures.

Figures (the seed's views where the data allow them): width vs relative persona lift per
question; unconditioned and same-persona RBO by width bin with bootstrap bars and STC labels
(and the width-bin table); recoverability by member and persona with chance lines and the
shuffle null band; echo rate vs signal-to-chance per question; unconditioned vs same-persona
RBO per question; the source-blind ranking's outcomes (:mod:`.report_ranking`).
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from lmaudit.figures import svg_figure
from lmaudit.reporting import fmt, utc_now
from lmaudit.studies.choir.report_ranking import ranking_section

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["render_report"]

_SIZE = (5.4, 3.2)  # inches


def _axes_svg(draw: Callable[[Axes], object], prefix: str) -> str:
    """One set of axes drawn by ``draw``, as inline SVG."""

    def on_figure(fig: Figure) -> None:
        draw(fig.add_subplot())

    return svg_figure(on_figure, size=_SIZE, prefix=prefix)


def _width_lift(qs: Mapping[str, Any]) -> str | None:
    pts = [
        (v["width"], v["lift"]["relative"], q)
        for q, v in qs.items()
        if v["width"] is not None and v["lift"] and v["lift"]["relative"] is not None
    ]
    if not pts:
        return None

    def draw(ax: Axes) -> None:
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=14, color="#2e7d6f")
        _label_points(ax, pts)
        ax.axhline(1.0, color="#888", linestyle=":", linewidth=1)
        ax.set_xlabel("prompt width W_q")
        ax.set_ylabel("relative persona lift")

    return _axes_svg(draw, "choir-wl")


def _label_points(ax: Axes, pts: list[tuple[Any, Any, str]]) -> None:
    """Each point named by its question id, as written (figure text is never TeX)."""
    for x, y, q in pts:
        ax.annotate(
            q, (x, y), textcoords="offset points", xytext=(3, 2), fontsize=6, color="#444", clip_on=True
        )


def _bin_label(b: Mapping[str, Any]) -> str:
    return f"[{b['lo']:g}, {'∞' if b['hi'] is None else format(b['hi'], 'g')})"


def _bins(bins: list[dict[str, Any]]) -> str | None:
    rows = [b for b in bins if b["n"]]
    if not rows:
        return None

    def draw(ax: Axes) -> None:
        for k, (key, color, marker) in enumerate(
            (("unconditioned_rbo", "#c2185b", "o"), ("same_persona_rbo", "#00897b", "s"))
        ):
            ys, xs, errs = [], [], []
            for i, b in enumerate(rows):
                if b[key]:
                    xs.append(i + (k - 0.5) * 0.15)
                    ys.append(b[key]["mean"])
                    errs.append([b[key]["mean"] - b[key]["ci"][0], b[key]["ci"][1] - b[key]["mean"]])
            if xs:
                ax.errorbar(
                    xs,
                    ys,
                    yerr=list(zip(*errs, strict=True)),
                    fmt=marker,
                    color=color,
                    label=key.replace("_", " "),
                    capsize=3,
                )
        for i, b in enumerate(rows):
            if b["stc"]:
                ax.annotate(  # at the bottom of the axes, whatever the RBO range
                    f"STC {b['stc']['mean']:.2f}",
                    (i, 0.0),
                    xycoords=("data", "axes fraction"),
                    textcoords="offset points",
                    xytext=(0, 4),
                    ha="center",
                    fontsize=7,
                )
        ax.set_xticks(range(len(rows)), [_bin_label(b) for b in rows])
        ax.set_xlabel("width bin")
        ax.set_ylabel("mean cross-model RBO")
        ax.legend(fontsize=7)

    return _axes_svg(draw, "choir-bins")


def _recover(rec: Mapping[str, Any]) -> str | None:
    names = [k for k in ("model", "persona", "persona_within_model_loqo") if k in rec]
    if not names:
        return None

    def draw(ax: Axes) -> None:
        for i, k in enumerate(names):
            r = rec[k]
            ax.bar(i, r["accuracy"], color="#5c6bc0", width=0.6)
            ax.errorbar(
                i,
                r["accuracy"],
                yerr=[[r["accuracy"] - r["ci"][0]], [r["ci"][1] - r["accuracy"]]],
                color="k",
                capsize=3,
            )
            ax.hlines(r["chance"], i - 0.35, i + 0.35, colors="#888", linestyles=":")
            if r["null_band"][0] is not None:
                ax.fill_between(
                    [i - 0.3, i + 0.3], r["null_band"][0], r["null_band"][1], color="#ffab91", alpha=0.5
                )
        ax.set_xticks(range(len(names)), [n.replace("_", " ") for n in names])
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("nearest-centroid accuracy")

    return _axes_svg(draw, "choir-rec")


def _scatter(qs: Mapping[str, Any], x: str, y: str, xl: str, yl: str, prefix: str) -> str | None:
    def val(v: Mapping[str, Any], k: str) -> Any:
        if k == "stc":
            return v["stc"]["ratio"] if v["stc"] else None
        return v[k]

    pts = [(val(v, x), val(v, y), q) for q, v in qs.items()]
    pts = [p for p in pts if p[0] is not None and p[1] is not None]
    if not pts:
        return None

    def draw(ax: Axes) -> None:
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=14, color="#6d4c41")
        _label_points(ax, pts)
        if x == "R_q":
            hi = max(max(p[0], p[1]) for p in pts) * 1.05
            ax.plot([0, hi], [0, hi], color="#888", linestyle=":", linewidth=1)
        ax.set_xlabel(xl)
        ax.set_ylabel(yl)

    return _axes_svg(draw, prefix)


def _cue_pairs(cues: Mapping[str, Any] | None) -> tuple[str | None, list[list[str]]]:
    """Echo vs signal-to-chance for matched cue pairs (arrow: original to stripped), and rows."""
    pairs = (cues or {}).get("pairs") or []
    rows = [
        [html.escape(f"{p['original']} → {p['stripped']}"), html.escape(", ".join(p["anchors"]))]
        + [
            f"{fmt(p['before'][k])} → {fmt(p['after'][k])}"
            for k in ("item_echo", "cluster_echo", "rbo", "stc")
        ]
        for p in pairs
    ]
    pts = [
        p
        for p in pairs
        if None
        not in (p["before"]["item_echo"], p["after"]["item_echo"], p["before"]["stc"], p["after"]["stc"])
    ]
    if not pts:
        return None, rows

    def draw(ax: Axes) -> None:
        for p in pts:
            b, a = p["before"], p["after"]
            ax.annotate(
                "",
                xy=(a["item_echo"], a["stc"]),
                xytext=(b["item_echo"], b["stc"]),
                arrowprops={"arrowstyle": "->", "color": "#888"},
            )
            ax.scatter([b["item_echo"]], [b["stc"]], s=16, color="#c2185b")
            ax.scatter([a["item_echo"]], [a["stc"]], s=16, color="#00796b", marker="s")
            ax.annotate(str(p["original"]), (b["item_echo"], b["stc"]), fontsize=7)
        ax.axhline(1.0, color="#888", linestyle=":", linewidth=1)
        ax.set_xlabel("item-level anchor echo")
        ax.set_ylabel("signal-to-chance")

    return _axes_svg(draw, "choir-cues"), rows


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_report(
    results: Mapping[str, Any], plan: Mapping[str, Any] | None, audit: Mapping[str, Any]
) -> str:
    qs = results["questions"]
    s = results["summary"]
    figs = [
        ("Prompt width vs relative persona lift", _width_lift(qs)),
        (
            "Cross-model RBO by width bin (bars: percentile-bootstrap 95%; labels: mean STC)",
            _bins(results["width_bins"]),
        ),
        (
            "Recoverability (dotted: chance; shaded: shuffle-null 95% band)",
            _recover(results["recoverability"]),
        ),
        (
            "Echo rate vs signal-to-chance per question",
            _scatter(qs, "echo_rate", "stc", "echo rate", "signal-to-chance", "choir-echo"),
        ),
        (
            "Unconditioned vs same-persona RBO per question",
            _scatter(
                qs, "R_q", "same_persona_rbo_mean", "unconditioned RBO", "same-persona RBO", "choir-rbo"
            ),
        ),
    ]
    cue_svg, cue_rows = _cue_pairs(results.get("cue_stripping"))
    figs.append(("Matched cue pairs: anchor echo vs signal-to-chance (original → stripped)", cue_svg))
    qrows = [
        [
            html.escape(q),
            str(v["n_lists"]),
            str(v["C_q"]),
            fmt(v["R_q"]),
            fmt(v["width"]),
            fmt(v["stc"]["ratio"] if v["stc"] else None),
            fmt(v["stc"]["p"] if v["stc"] else None),
            fmt(v["echo_rate"]),
            fmt(v["same_persona_rbo_mean"]),
            fmt(v["lift"]["relative"] if v["lift"] else None),
            fmt(v["codebook_test"]["p"] if v["codebook_test"] else None),
        ]
        for q, v in qs.items()
    ]
    brows = [
        [_bin_label(b), str(b["n"])]
        + [
            fmt(b[k]["mean"]) + (f" [{fmt(b[k]['ci'][0])}, {fmt(b[k]['ci'][1])}]" if b[k] else "")
            if b[k]
            else "—"
            for k in ("unconditioned_rbo", "same_persona_rbo", "stc", "relative_lift")
        ]
        for b in results["width_bins"]
    ]
    rec = results["recoverability"]
    rrows = [
        [
            html.escape(k),
            fmt(r["accuracy"]),
            f"[{fmt(r['ci'][0])}, {fmt(r['ci'][1])}]",
            fmt(r["chance"]),
            fmt(r["null_mean"]),
            fmt(r["p"]),
            str(r["n_cells"]),
        ]
        for k, r in rec.items()
    ]
    preds = results.get("predictions") or []
    prows = [
        [
            html.escape(p["id"]),
            html.escape(str(p.get("description", ""))),
            html.escape(
                "; ".join(
                    f"{c['metric']} {c['op']} {c['value']}"
                    for c in (p.get("checks") or [p])
                    if c.get("metric")
                )
            ),
            html.escape(str(p["outcome"])),
            html.escape(json.dumps(p.get("observed"), default=str)),
        ]
        for p in preds
    ]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>choir report</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;font-size:14px}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}"
        "figure{display:inline-block;margin:0.5em}</style></head><body>",
        "<h1>CHOIR: free-list elicitation across models</h1>",
        *_refused_warning(results["design"].get("refused_lists") or {}),
        f"<p>{s['n_questions']} questions; members: {html.escape(', '.join(results['design']['models']))}; "
        f"conditions: {html.escape(', '.join(results['design']['conditions']))}; {results['design']['lists']} lists "
        f"({results['design']['empty_lists']} empty). Above-chance unconditioned agreement (STC &gt; 1): "
        f"<b>{s['above_chance']}/{s['n_questions']}</b> ({s['n_stc']} with a signal-to-chance; "
        f"{s['above_chance_significant']} at p &lt; alpha); persona lift &gt; 1: "
        f"<b>{s['lift_up']}/{s['n_lift']}</b>; template B naming more than 50% concepts template A does not: "
        f"<b>{s['novelty_over_half']}/{s['n_template_novelty']}</b>.</p>",
    ]
    if prows:
        parts += [
            "<h2>Registered predictions</h2>",
            _table(["id", "claim", "rule", "outcome", "observed"], prows),
        ]
    parts += ["<h2>Figures</h2>"] + [
        f"<figure><figcaption>{html.escape(t)}</figcaption>{svg}</figure>" for t, svg in figs if svg
    ]
    parts += [
        "<h2>Width bins</h2>",
        _table(["width", "n", "unconditioned RBO", "same-persona RBO", "STC", "relative lift"], brows),
    ]
    parts += [
        "<h2>Recoverability</h2>",
        _table(["target", "accuracy", "95% CI", "chance", "null mean", "p", "cells"], rrows),
    ]
    if cue_rows:
        c = results["cue_stripping"]["counts"]
        parts += [
            "<h2>Matched cue stripping</h2>",
            f"<p>Stripping the anchors lowered item echo in {c['item_echo_lower']['yes']}/{c['item_echo_lower']['n']} "
            f"pairs, cluster echo in {c['cluster_echo_lower']['yes']}/{c['cluster_echo_lower']['n']}, "
            f"cross-model RBO in {c['rbo_lower']['yes']}/{c['rbo_lower']['n']}.</p>",
            _table(["pair", "anchors", "item echo", "cluster echo", "RBO", "STC"], cue_rows),
        ]
    parts += ranking_section(results.get("ranking"))
    parts += [
        "<h2>Questions</h2>",
        _table(
            [
                "question",
                "lists",
                "C_q",
                "R_q",
                "W_q",
                "STC",
                "STC p",
                "echo",
                "same-persona RBO",
                "lift",
                "codebook p",
            ],
            qrows,
        ),
    ]
    emb = results.get("embedder") or {}
    parts += [
        "<h2>Provenance</h2>",
        f"<p>plan digest {html.escape(str(audit.get('plan_digest')))}; embedder {html.escape(json.dumps(emb, sort_keys=True))}; "
        f"MLflow run {html.escape(str((audit.get('mlflow') or {}).get('run_name')))} "
        f"(experiment {html.escape(str((audit.get('mlflow') or {}).get('experiment')))}); generated {utc_now()}</p>",
        "</body></html>",
    ]
    return "\n".join(parts)


def _refused_warning(refused: dict[str, Any]) -> list[str]:
    """A loud line when the server answered some generations without a list."""
    if not refused.get("n"):
        return []
    reasons = ", ".join(f"{html.escape(str(k))}: {v}" for k, v in (refused.get("reasons") or {}).items())
    return [
        f"<p style='background:#fbeaea;border:1px solid #e0a0a0;padding:.5em'><b>The server refused "
        f"{refused['n']} generation(s)</b> ({reasons}): they are counted here, left out of every list "
        "statistic below, and asked again by the next run (never cached).</p>"
    ]
