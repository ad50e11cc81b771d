"""One page layout for every study's report (``templates/page.html.j2``).

A report leads with its answer (:class:`Verdict`: one plain sentence, the numbers behind it,
and whether the run could answer at all), then what went wrong loudly (alerts), the terms it
uses, the registered predictions and their outcomes, the study's own sections (a study's
template ``{% extends "page.html.j2" %}`` and fills ``{% block body %}``), what was asked and
answered (:class:`Sample`: each opens onto the exact prompt and the model's answer), and
provenance last, formatted (:func:`provenance`).

The page is a pure function of the run's records (results, plan, audit record, measurements):
no clock, so a report rebuilt from the same records is the same bytes.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2

from lmaudit import __version__
from lmaudit.reporting import NOT_RECORDED, fmt, num, pval, text
from lmaudit.reporting.terms import GLOSSARY

if TYPE_CHECKING:
    from lmaudit.studies.envelope import ScoredPrediction, StudyResults

__all__ = [
    "Page",
    "Sample",
    "Samples",
    "Verdict",
    "ids",
    "page_of",
    "provenance",
    "read_rows",
    "render",
    "scroll_tables",
    "value",
]

#: how many samples a page shows (the rest are in measurements.jsonl, and the page says so)
MAX_SAMPLES = 400
OUTCOME_CSS = {"held": "held", "not held": "nothold", "not evaluable": "noteval"}
SCROLL = '<div class="scroll">'
_TABLE_TAG = re.compile(r"<(/?)table\b[^>]*>")


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The answer a reader should take away. ``answered`` False: the run could not answer the
    study's question (a failed gate, every output invalid, the mass off the labels), and the
    headline says why."""

    headline: str
    facts: Sequence[str] = ()
    answered: bool = True


@dataclasses.dataclass(frozen=True)
class Sample:
    """One thing asked and answered: its id, a one-line title (an item's wording, a prompt's
    question), the exact rendered prompt, the model's answer, and a few labelled facts."""

    id: str
    title: str
    prompt: str
    answer: str
    facts: Sequence[tuple[str, str]] = ()
    flagged: bool = False


@dataclasses.dataclass(frozen=True)
class Samples:
    """What a page shows of what was asked and answered: the samples shown (at most
    :data:`MAX_SAMPLES`), how many the run has in all, and how to read one."""

    shown: Sequence[Sample] = ()
    total: int = 0
    note: str = ""


@dataclasses.dataclass(frozen=True)
class Page:
    study: str
    title: str
    question: str  # what the study asks, in one sentence
    verdict: Verdict
    alerts: Sequence[str] = ()
    terms: Sequence[str] = ()  # keys of lmaudit.reporting.terms.GLOSSARY
    predictions: Sequence[ScoredPrediction] = ()  # scored, as the results hold them
    registration: str | None = None  # the registration's name when the run is registered
    samples: Samples = Samples()
    provenance: Sequence[tuple[str, str]] = ()
    config: str | None = None


def page_of(results: StudyResults, plan: Mapping[str, Any] | None, **fields: Any) -> Page:
    """A study's :class:`Page`: the scored predictions and the registration's name from its
    typed results, the plan's resolved config, the rest from ``fields``."""
    from lmaudit.reporting import config_json

    return Page(
        predictions=results.predictions or (),
        registration=results.prereg.name if results.prereg is not None else None,
        config=config_json(plan),
        **fields,
    )


def value(v: Any) -> str:
    """A recorded value for the provenance table: yes/no for booleans, ``key: value`` pairs for
    mappings (sorted by key), items joined for lists; nothing raw."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, Mapping):
        # by key: a mapping read back from JSON shows as the one the analysis returned
        return "; ".join(f"{k}: {value(v[k])}" for k in sorted(v, key=str)) or "none"
    if isinstance(v, list | tuple):
        return ", ".join(value(x) for x in v) or "none"
    return text(v)


def run_record_rows(audit: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The provenance rows every page takes from the run's audit record: its MLflow run (by
    name: the run is logged after the report is written), experiment, lmaudit version, and
    when it was planned, measured and analysed."""
    from lmaudit.reporting import get

    return [
        ("MLflow run", get(audit, "mlflow", "run_name")),
        ("MLflow experiment", get(audit, "mlflow", "experiment")),
        ("lmaudit version (run)", audit.get("lmaudit_version")),
        ("Planned (UTC)", get(audit, "plan", "written_utc")),
        ("Measured (UTC)", get(audit, "measure", "finished_utc")),
        ("Analysed (UTC)", get(audit, "analyze", "finished_utc")),
    ]


def provenance(rows: Iterable[tuple[str, Any]]) -> list[tuple[str, str]]:
    """``(label, value)`` rows formatted for the page (see :func:`value`); the report's own
    lmaudit version is added last."""
    return [(label, value(v)) for label, v in rows] + [("lmaudit version (report)", __version__)]


def read_rows(audit: Mapping[str, Any], run_dir: Path) -> Iterable[dict[str, Any]]:
    """The measurement rows the results were computed from (the file the audit record's analyze
    section names, else the run's own), streamed; nothing when there is none."""
    from lmaudit.provenance.io import iter_jsonl

    analyzed = (audit.get("analyze") or {}).get("measurements")
    path = Path(analyzed) if analyzed else run_dir / "measurements.jsonl"
    if not path.is_file():
        return
    for _, row in iter_jsonl(path):
        yield row


def _abbr(term: str, shown: str | None = None) -> str:
    """``term`` marked with its explanation (hover), as HTML."""
    from markupsafe import Markup, escape

    return Markup(f'<abbr title="{escape(GLOSSARY[term])}">{escape(shown or term)}</abbr>')


def ids(values: Sequence[Any], shown: int = 3) -> str:
    """A list of ids for a table cell: all of them when there are at most ``shown``, else their
    count and the first ``shown``, the full list folded in a ``<details>``; "none" when empty."""
    from markupsafe import Markup, escape

    vals = [str(v) for v in values or ()]
    if len(vals) <= shown:
        return Markup(escape(", ".join(vals) or "none"))
    head = escape(", ".join(vals[:shown]))
    every = escape(", ".join(vals))
    return Markup(f"{len(vals)}: {head} …<details><summary>all {len(vals)}</summary>{every}</details>")


@functools.cache
def _environment(package: str) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(
            [jinja2.PackageLoader(package, ""), jinja2.PackageLoader("lmaudit.reporting", "templates")]
        ),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(num=fmt, pval=pval, text=text, value=value, ids=ids)
    env.filters["int"] = lambda x: fmt(x, ".0f")
    env.filters["pct"] = lambda x: "—" if num(x) is None else f"{100 * float(x):.1f}%"
    env.globals.update(OUTCOME_CSS=OUTCOME_CSS, NOT_RECORDED=NOT_RECORDED, GLOSSARY=GLOSSARY, term=_abbr)
    return env


def scroll_tables(html: str) -> str:
    """``html`` with every table not already in a ``div.scroll`` wrapped in one: a table wider
    than the page scrolls inside it instead of being cut off. Text is escaped by autoescape, so
    a ``<table`` in the markup is always a tag."""
    out: list[str] = []
    wrapped: list[bool] = []  # per open table: whether this pass opened its wrapper
    at = 0
    for m in _TABLE_TAG.finditer(html):
        out.append(html[at : m.start()])
        if not m.group(1):
            own = not html[max(0, m.start() - 2 * len(SCROLL)) : m.start()].rstrip().endswith(SCROLL)
            wrapped.append(own)
            out.append(SCROLL + m.group(0) if own else m.group(0))
        else:
            out.append(m.group(0) + "</div>" if wrapped and wrapped.pop() else m.group(0))
        at = m.end()
    out.append(html[at:])
    return "".join(out)


def render(package: str, template: str, page: Page, **context: Any) -> str:
    """Render ``template`` of ``package`` (which extends ``page.html.j2``) for ``page``; every
    table scrolls inside the page (:func:`scroll_tables`)."""
    unknown = [t for t in page.terms if t not in GLOSSARY]
    if unknown:
        raise KeyError(f"terms not in the glossary: {unknown}")
    return scroll_tables(_environment(package).get_template(template).render(page=page, **context))
