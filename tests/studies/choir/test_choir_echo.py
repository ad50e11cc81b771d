"""Echo calibrated to the embedder and lexical echo: the shipped calibration set, the threshold
rule against closed forms, the planted echo recovered (sim pipeline; MiniLM, slow)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lmaudit.pipeline import run
from lmaudit.studies.choir.echo import (
    CalibrationRow,
    calibrate,
    calibration_texts,
    content_words,
    echo_block,
    lexical_echo,
    load_calibration,
)
from lmaudit.studies.choir.results.across import Rates
from lmaudit.studies.choir.results.question import EchoRate
from lmaudit.text import question_words


def test_the_shipped_set_is_labelled_as_the_lexical_rule_reads_it():
    rows, digest = load_calibration()
    assert len(rows) == 60 and len(digest) == 64
    for r in rows:
        vocab = frozenset().union(*(content_words(w) for w in question_words(r.question)))
        assert bool(content_words(r.phrase) & vocab) == r.echo, r
    by_set: dict[str, set[bool]] = {}
    for r in rows:
        by_set.setdefault(r.set, set()).add(r.echo)
    assert all(v == {True, False} for v in by_set.values())


def test_lexical_echo_normalises_case_plurals_and_stop_words():
    assert content_words("The Customers' Friends-circle") == {"customer", "friend", "circle"}
    e = lexical_echo(["Cities at night", "the of and", "bright lamps"], ["city", "night"])
    assert e == EchoRate(rate=1 / 3, n_echo=1, n=3)


def _unit(d: float) -> np.ndarray:
    """A 2-d unit vector at cosine distance ``d`` from (1, 0)."""
    c = 1.0 - d
    return np.array([c, np.sqrt(1.0 - c * c)], dtype=np.float32)


def _cal(echo: list[float], plain: list[float]) -> tuple[list[CalibrationRow], dict[str, np.ndarray]]:
    rows, vec = [], {"word": np.array([1.0, 0.0], dtype=np.float32)}
    for i, (d, y) in enumerate([(d, True) for d in echo] + [(d, False) for d in plain]):
        rows.append(CalibrationRow("s", "word?", f"p{i}", y))
        vec[f"p{i}"] = _unit(d)
    return rows, vec


def test_the_threshold_is_the_cut_of_best_youden_j_ties_to_the_smaller():
    rows, vec = _cal([0.3, 0.4], [0.5, 0.6])
    out = calibrate(rows, vec, 0.2)
    assert out is not None
    assert out.threshold == pytest.approx(0.45, abs=1e-6) and out.youden_j == 1.0
    assert out.at_seed == Rates(tpr=0.0, fpr=0.0)
    assert out.at_calibrated == Rates(tpr=1.0, fpr=0.0)
    rows, vec = _cal([0.3, 0.7], [0.5, 0.9])  # J = 0.5 at the cuts 0.4 and 0.8: the smaller
    out = calibrate(rows, vec, 0.2)
    assert out is not None and out.threshold == pytest.approx(0.4, abs=1e-6) and out.youden_j == 0.5
    rows, vec = _cal([0.3], [0.5])
    del vec["p1"]
    assert calibrate(rows, vec, 0.2) is None  # the set not embedded: no calibrated threshold


def test_echo_block_reports_both_thresholds_and_the_lexical_rate():
    vec = {"word": np.array([1.0, 0.0], dtype=np.float32), "a word": _unit(0.3), "other": _unit(1.0)}
    e = echo_block(["a word", "other"], ["word"], vec, 0.2, 0.45)
    assert e is not None
    assert e.seed == EchoRate(rate=0.0, n_echo=0, n=2, threshold=0.2)
    assert e.calibrated == EchoRate(rate=0.5, n_echo=1, n=2, threshold=0.45)
    assert e.lexical == EchoRate(rate=0.5, n_echo=1, n=2)


COMMON = (
    "study=choir",
    "study.question_ids=[H001,H007]",
    "study.templates=[A]",
    "study.personas=[archivist]",
    "study.generations=4",
    "study.embedder.kind=sim",
    "study.shuffles=20",
    "study.permutations=20",
    "study.n_boot=20",
    "study.n_null=10",
    "mlflow.enabled=false",
)


def test_the_planted_echo_is_measured_at_every_rule_on_the_sim_embedder(make_cfg, tmp_path):
    members = (
        "study.ensemble.members=[{backend: sim, name: m1, agent: freelist, params: {signature: 1, echo: 0.4}},"
        "{backend: sim, name: m2, agent: freelist, params: {signature: 2, echo: 0.4}}]"
    )
    run(make_cfg(*COMMON, members, name="echo"))
    res = json.loads((tmp_path / "echo/results.json").read_text())
    cal = res["echo_calibration"]
    assert cal["set"] == "echo_calibration.jsonl" and cal["seed_threshold"] == 0.2
    assert cal["threshold"] > 0.2 and cal["at_calibrated"]["tpr"] > cal["at_seed"]["tpr"]
    assert res["summary"]["echo_calibrated_threshold"] == cal["threshold"]
    for q in ("H001", "H007"):
        e = res["questions"][q]["echo"]
        n = e["lexical"]["n"]
        sd = (0.4 * 0.6 / n) ** 0.5
        # an echo entry is a question word itself: every rule finds it (planted share 0.4, 4 sd);
        # the sim fillers share no word with the question
        for rule in ("seed", "calibrated", "lexical"):
            assert abs(e[rule]["rate"] - 0.4) < 4 * sd, (q, rule, e)


SLOW_QUESTION = "Write a metaphor about how time passes in a busy city."
ECHOING = [
    "time as a river through the city",
    "a busy street that swallows the hours",
    "the city clock that never stops",
    "time slipping through a crowded station",
    "a metaphor of passing trains",
    "the busy hum of passing years",
]
PLAIN = [
    "sand falling in an hourglass",
    "a candle burning down",
    "leaves turning brown in autumn",
    "an old man feeding pigeons",
    "waves wearing down a cliff",
    "a song fading on the radio",
]


@pytest.mark.slow
def test_a_planted_echo_is_found_on_the_default_embedder():
    from lmaudit.backends.embed.st import SentenceTransformerEmbedder

    rows, digest = load_calibration()
    terms = question_words(SLOW_QUESTION)
    texts = sorted(set(calibration_texts(rows)) | set(terms) | set(ECHOING) | set(PLAIN))
    vec = dict(zip(texts, SentenceTransformerEmbedder().embed(texts), strict=True))
    cal = calibrate(rows, vec, 0.2, digest)
    assert cal is not None and 0.4 < cal.threshold < 0.8
    items = ECHOING + PLAIN  # planted: half the items reuse a question word
    e = echo_block(items, terms, vec, 0.2, cal.threshold)
    assert e is not None and e.seed is not None and e.calibrated is not None and e.lexical is not None
    assert e.lexical.rate == 0.5  # the planted share, exactly
    assert e.seed.rate == 0.0  # the seed's rule finds none of it under MiniLM
    assert e.calibrated.rate >= 5 / 12  # at least 5 of the 6 echoes, at most 1 plain item
    hit = echo_block(ECHOING, terms, vec, 0.2, cal.threshold)
    assert hit is not None and hit.calibrated is not None and hit.calibrated.n_echo >= 5
    miss = echo_block(PLAIN, terms, vec, 0.2, cal.threshold)
    assert miss is not None and miss.calibrated is not None and miss.calibrated.n_echo <= 1
