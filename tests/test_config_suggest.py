"""Did-you-mean for config keys and option values (lmaudit.config.suggest)."""

from __future__ import annotations

import pytest

from lmaudit.config.suggest import did_you_mean, suggestions


@pytest.mark.parametrize(
    ("word", "options", "found"),
    [
        ("analyse", ["plan", "freeze", "measure", "analyze", "report", "all"], ["analyze"]),  # spelling
        ("nn", ["kind", "estimand.n", "gates.g3.n", "gates.g3.retry_n"], ["estimand.n", "gates.g3.n"]),
        ("temp", ["kind", "n", "temperature", "top_p"], ["temperature"]),  # cut short
        ("n_draws", ["name", "replicates", "n", "temperature"], ["n"]),  # a shared word
        ("zzz", ["plan", "freeze"], []),
    ],
)
def test_suggestions(word: str, options: list[str], found: list[str]) -> None:
    assert suggestions(word, options) == found


def test_did_you_mean_names_one_or_two_or_says_nothing() -> None:
    assert did_you_mean("analyse", ["analyze", "all"]) == "; did you mean analyze?"
    assert did_you_mean("nn", ["estimand.n", "gates.g3.n"]) == "; did you mean estimand.n or gates.g3.n?"
    assert did_you_mean("zzz", ["plan"]) == ""
