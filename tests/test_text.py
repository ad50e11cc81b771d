"""The plain-text helpers shared across studies and interop readers."""

from __future__ import annotations

from lmaudit.text import metric_safe


def test_metric_safe_replaces_each_character_mlflow_refuses_and_keeps_the_rest() -> None:
    kept = "Az09_.-/ "
    assert metric_safe(kept) == kept
    assert metric_safe("gpt-4o:mini@2024 (v2)") == "gpt-4o_mini_2024 _v2_"
    assert metric_safe("é") == "_"
