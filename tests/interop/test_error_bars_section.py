"""``results.error_bars`` from ``log_audit`` rows (pure): pooling over log files, the sentence's
three readings, and rows refused in one line."""

from __future__ import annotations

import math
import re

import pytest

from lmaudit.errors import InputError
from lmaudit.interop.scores import check_scores, error_bars_metrics, error_bars_section, sentence


def _row(file: str, clusters: dict[str, list[float]], stderr: float | None, family: str = "m") -> dict:
    log = {"accuracy": None, "stderr": stderr, "over": "scores", "reducer": None}
    return {
        "kind": "log_audit",
        "format": "inspect",
        "family": family,
        "source": f"t@{file}",
        "files": [file],
        "facts": {"task": "t"},
        "issues": {},
        "scores": {"scorer": "match", "clusters": clusters, "log": log},
    }


def test_every_epoch_agreeing_the_naive_log_stderr_understates() -> None:
    # 4 samples x 3 epochs, each sample's epochs alike: the log's stderr over 12 scores
    clusters = {"a": [1, 1, 1], "b": [0, 0, 0], "c": [1, 1, 1], "d": [1, 1, 1]}
    naive = math.sqrt(0.75 * 0.25 / 12)
    (entry,) = error_bars_section([_row("x.eval", clusters, naive)])["m"].values()
    # cluster sums of (x - 3/4): 3/4 x 3 three times, -9/4 once -> sqrt(27/16 + 81/16) / 12
    assert entry.se_clustered == pytest.approx(math.sqrt(108 / 16) / 12, abs=1e-12)
    assert entry.design_effect == pytest.approx(3.0, abs=1e-12)  # k = 3 epochs, ICC 1
    assert entry.icc == pytest.approx(1.0, abs=1e-12)
    assert entry.sentence == (
        f"the log's stderr {naive:.3f} understates the uncertainty; clustered by sample it is "
        f"{entry.se_clustered:.3f} (x1.7); treating the 12 scores as independent gives {naive:.3f} "
        "(design effect 3.00)"
    )


def test_the_three_readings_and_no_log_stderr() -> None:
    base = {"n": 10, "se_naive": 0.1, "design_effect": 1.0, "se_clustered": 0.1}
    assert "overstates" in sentence({**base, "log_stderr": 0.2})
    assert "accounts for the clustering" in sentence({**base, "log_stderr": 0.105})
    assert "understates" in sentence({**base, "log_stderr": 0.05})
    assert sentence({**base, "log_stderr": None}).startswith(
        "the log reports no stderr; clustered by sample it is 0.100"
    )


def test_logs_of_one_model_and_task_are_pooled_by_sample() -> None:
    rows = [_row("a.eval", {"s1": [1.0], "s2": [0.0]}, 0.5), _row("b.eval", {"s1": [1.0], "s3": [1.0]}, 0.0)]
    entry = error_bars_section(rows)["m"]["t"]
    assert (entry.n, entry.clusters) == (4, 3)  # s1 is one sample in both logs
    assert entry.log_stderr is None and [x.stderr for x in entry.logs] == [0.5, 0.0]
    assert entry.sentence.startswith("the log reports no stderr")
    metrics = error_bars_metrics(error_bars_section(rows), str)
    assert metrics["error_bars.m.t.n"] == 4.0 and "error_bars.m.t.log_stderr" not in metrics


@pytest.mark.parametrize(
    ("scores", "field"),
    [
        ({"scorer": 3}, "scores.scorer"),
        ({"scorer": "m", "clusters": {}}, "scores.clusters"),
        ({"scorer": "m", "clusters": {"s": [float("nan")]}, "log": {}}, "scores.clusters.s"),
        ({"scorer": "m", "clusters": {"s": [True]}, "log": {}}, "scores.clusters.s"),
        ({"scorer": "m", "clusters": {"s": [1.0]}, "log": {"stderr": "0.1"}}, "scores.log.stderr"),
    ],
)
def test_scores_with_a_wrong_field_are_refused_in_one_line(scores: dict, field: str) -> None:
    with pytest.raises(InputError, match=rf"^m\.jsonl: record 2: field '{re.escape(field)}'") as e:
        check_scores(scores, "m.jsonl: record 2")
    assert "\n" not in str(e.value)


def test_metric_keys_of_a_task_named_as_no_safe_path() -> None:
    from lmaudit.studies.draws.analysis import metric_key

    row = _row("a.eval", {"s1": [1.0, 0.0], "s2": [0.0, 0.0]}, 0.25)
    row["facts"]["task"] = "evals/../secret"  # a name someone else wrote: MLflow refuses it as a key
    metrics = error_bars_metrics(error_bars_section([row]), metric_key)
    assert f"error_bars.m.{metric_key('evals/../secret')}.se_clustered" in metrics
    assert not any("/../" in k for k in metrics)
