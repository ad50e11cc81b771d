"""What imported logs get wrong (``results.log_audit``, :mod:`lmaudit.interop.audit`), in the
words of a report's alerts; the section itself is ``templates/log_audit.html.j2``."""

from __future__ import annotations

from lmaudit.interop.sections import LogAudit
from lmaudit.reporting.page import value

__all__ = ["EXCLUDED", "FLAGGED", "log_alerts"]

EXCLUDED = ("cache_copies", "presumed_cache_copies", "errors")
FLAGGED = ("same_seed", "cache_shared_across_epochs", "no_do_sample", "no_model_events", "incomplete")


def log_alerts(
    audit: LogAudit | None, left_out_of: str = "every sequence", *, in_answer: bool = False
) -> list[str]:
    """What the imported logs get wrong, in a sentence each (see "The imported logs").
    ``in_answer``: the page's answer already states the answers left out and the greedy
    families, so they are not repeated here."""
    if audit is None:
        return []
    totals = audit.totals
    out = []
    if audit.n_excluded and not in_answer:
        out.append(
            f"{audit.n_excluded} answer(s) in the imported logs are not independent draws (served from "
            f"a cache, or errors: {value({k: v for k, v in totals.items() if k in EXCLUDED})}); they were "
            f"left out of {left_out_of}."
        )
    for name in () if in_answer else audit.greedy_families:
        out.append(
            f"{name} was generated greedily (temperature 0 or no do_sample): its repeats are not draws."
        )
    for name in audit.unidentified_families:
        out.append(f"{name}: the log does not name its model; analysed under this name.")
    flagged = {k: v for k, v in totals.items() if k in FLAGGED}
    if flagged:
        out.append(f'The imported logs also show: {value(flagged)} (see "The imported logs").')
    return out
