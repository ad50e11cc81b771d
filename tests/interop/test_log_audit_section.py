"""``results.log_audit`` as a typed section: a log file and each of its issues name the log the
same way (:class:`LogSource`), and the section writes back the JSON it was read from."""

from __future__ import annotations

from lmaudit.interop.sections import LogAudit, LogSource
from lmaudit.provenance.digest import canonical_json

LOG = {"files": ["a.eval", "b.eval"], "family": "mockllm/m", "source": "t@a.eval"}
DOC = {
    "format": "inspect",
    "normalise": None,
    "files": [{**LOG, "facts": {"seed": [11]}, "counts": {"draws_read": 12}, "issues": ["same_seed"]}],
    "families": {"mockllm/m": {"sources": ["t@a.eval"], "temperature": ["0"], "greedy": True, "issues": {}}},
    "issues": [{**LOG, "issue": "same_seed", "count": 12, "action": "kept", "detail": "seed 11"}],
    "totals": {"same_seed": 12},
    "n_excluded": 0,
    "greedy_families": ["mockllm/m"],
    "unidentified_families": [],
}


def test_a_log_file_and_its_issues_name_the_log_alike() -> None:
    audit = LogAudit.from_json(DOC, "results.json")
    (log,), (issue,) = audit.files, audit.issues
    assert isinstance(log, LogSource) and isinstance(issue, LogSource)
    assert (
        (log.files, log.family, log.source)
        == (issue.files, issue.family, issue.source)
        == (
            ("a.eval", "b.eval"),
            "mockllm/m",
            "t@a.eval",
        )
    )
    assert audit.draws_read == 12
    assert canonical_json(audit.to_json()) == canonical_json(DOC)
