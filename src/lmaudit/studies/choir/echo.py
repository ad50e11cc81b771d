"""Prompt echo calibrated to the embedder, and a lexical echo that needs none.

The seed's rule (an item echoes when its embedding lies within cosine distance 0.2 of a
question-vocabulary term) was set for text-embedding-3-large; other embedders place a phrase
that plainly reuses a question's word much farther from that word. The calibration set
(``echo_calibration.jsonl``, beside this module) holds short questions and phrases that do and
do not reuse one of the question's content words. Each phrase's distance to its question's
nearest content word is measured with the run's embedder; the calibrated threshold is the cut
between two consecutive distances that maximises Youden's J (true-positive share minus
false-positive share of the rule ``distance <= t``), ties going to the smallest cut (fewer
items called echo). The lexical echo: an item echoes when it shares a content word with the
question after normalisation (NFKC, lower case, split at non-letters, stop words and words of
two letters dropped, plural endings removed).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lmaudit.errors import InputError, StrictJsonError
from lmaudit.provenance.io import read_utf8
from lmaudit.provenance.jsoncheck import strict_loads
from lmaudit.stats.salience import ECHO_TOL, echo_rate
from lmaudit.studies.choir.results import Echo, EchoCalibration, QuestionResult
from lmaudit.studies.choir.results.across import Rates
from lmaudit.studies.choir.results.question import EchoRate
from lmaudit.text import question_words

__all__ = [
    "CALIBRATION_PATH",
    "CalibrationRow",
    "calibrate",
    "calibration_texts",
    "content_words",
    "echo_block",
    "echo_calibration",
    "echo_mean",
    "embedding_echo",
    "lexical_echo",
    "load_calibration",
]

CALIBRATION_PATH = Path(__file__).with_name("echo_calibration.jsonl")


@dataclass(frozen=True)
class CalibrationRow:
    set: str
    question: str
    phrase: str
    echo: bool  # the phrase reuses one of the question's content words


def _stem(w: str) -> str:
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith(("sses", "shes", "ches", "xes", "zes")):
        return w[:-2]
    if w.endswith("s") and not w.endswith(("ss", "us", "is")) and len(w) > 3:
        return w[:-1]
    return w


def content_words(text: str) -> frozenset[str]:
    """The normalised content words of a text (the lexical echo's unit)."""
    plain = re.sub(r"[^a-z]+", " ", unicodedata.normalize("NFKC", text).lower())
    return frozenset(_stem(w) for w in question_words(plain))


def lexical_echo(items: Sequence[str], vocabulary: Sequence[str]) -> EchoRate | None:
    """Share of items sharing a normalised content word with the question vocabulary."""
    if not items:
        return None
    vocab = frozenset().union(*(content_words(v) for v in vocabulary)) if vocabulary else frozenset()
    n_echo = sum(1 for t in items if content_words(t) & vocab)
    return EchoRate(rate=n_echo / len(items), n_echo=n_echo, n=len(items))


def embedding_echo(
    items: Sequence[str], vocabulary: Sequence[str], vec: Mapping[str, NDArray[np.float32]], threshold: float
) -> EchoRate:
    """Share of items within cosine distance ``threshold`` of a vocabulary term (every text embedded)."""
    e = echo_rate(np.stack([vec[x] for x in items]), np.stack([vec[w] for w in vocabulary]), threshold)
    return EchoRate(rate=float(e.rate), n_echo=int(e.n_echo), n=int(e.n), threshold=float(threshold))


def load_calibration(path: str | Path = CALIBRATION_PATH) -> tuple[list[CalibrationRow], str]:
    """The calibration rows and the file's SHA-256; InputError naming the file and the line for
    a line that is not a JSON object with ``set``, ``question``, ``phrase`` and ``echo`` (JSON
    decoded strictly and bounded, :func:`lmaudit.provenance.jsoncheck.strict_loads`)."""
    text = read_utf8(path)
    rows = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            o = strict_loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}: line {lineno}: not valid JSON ({e.msg}, column {e.colno})") from None
        except StrictJsonError as e:
            raise InputError(f"{path}: line {lineno}: {e}") from None
        missing = [k for k in ("set", "question", "phrase", "echo") if not isinstance(o, dict) or k not in o]
        if missing:
            raise InputError(f"{path}: line {lineno}: missing field {missing[0]!r} (an echo calibration row)")
        rows.append(CalibrationRow(str(o["set"]), str(o["question"]), str(o["phrase"]), bool(o["echo"])))
    return rows, hashlib.sha256(text.encode("utf-8")).hexdigest()


def calibration_texts(rows: Sequence[CalibrationRow]) -> list[str]:
    """Every text the calibration embeds: the phrases and the questions' content words."""
    return sorted({r.phrase for r in rows} | {w for r in rows for w in question_words(r.question)})


def _rates(d: NDArray[np.float64], y: NDArray[np.bool_], t: float) -> Rates:
    hit = d <= t + ECHO_TOL  # the rule echo_rate applies
    return Rates(tpr=float(hit[y].mean()), fpr=float(hit[~y].mean()))


def calibrate(
    rows: Sequence[CalibrationRow],
    vec: Mapping[str, NDArray[np.float32]],
    seed_threshold: float,
    digest: str = "",
    name: str = "",
) -> EchoCalibration | None:
    """The embedder's calibrated echo threshold and both thresholds' rates on the set (``name``,
    ``digest``: the set's file name and SHA-256); ``None`` when a text has no vector (a
    measurement made without the set) or a class is empty."""
    need = calibration_texts(rows)
    if not rows or any(t not in vec for t in need):
        return None
    d = np.array(
        [
            echo_rate(
                vec[r.phrase][None, :], np.stack([vec[w] for w in question_words(r.question)])
            ).nearest_distance[0]
            for r in rows
        ]
    )
    y = np.array([r.echo for r in rows])
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if not n_pos or not n_neg:
        return None
    cuts = np.unique(d)
    best, best_t = 0, float(cuts[0]) / 2  # below every distance: nothing called echo, J = 0
    for lo, hi in itertools.pairwise(cuts):
        t = float((lo + hi) / 2)
        hit = d <= t + ECHO_TOL
        score = int((hit & y).sum()) * n_neg - int((hit & ~y).sum()) * n_pos  # J * n_pos * n_neg
        if score > best:  # strictly: a tie keeps the smaller cut
            best, best_t = score, t
    return EchoCalibration(
        set=name,
        set_sha256=digest,
        n_echo=n_pos,
        n_plain=n_neg,
        seed_threshold=float(seed_threshold),
        threshold=best_t,
        youden_j=best / (n_pos * n_neg),
        at_seed=_rates(d, y, seed_threshold),
        at_calibrated=_rates(d, y, best_t),
    )


def echo_block(
    items: Sequence[str],
    terms: Sequence[str],
    vec: Mapping[str, NDArray[np.float32]],
    seed_threshold: float,
    calibrated: float | None,
) -> Echo | None:
    """A question's echo at the seed's threshold and at the calibrated one (by embedding; each
    ``None`` without vectors), and the lexical echo."""
    if not items:
        return None
    have = bool(terms) and all(t in vec for t in [*items, *terms])
    return Echo(
        seed=embedding_echo(items, terms, vec, seed_threshold) if have else None,
        calibrated=embedding_echo(items, terms, vec, calibrated) if have and calibrated is not None else None,
        lexical=lexical_echo(items, terms),
    )


def echo_calibration(vec: Mapping[str, NDArray[np.float32]], s: Any) -> EchoCalibration | None:
    """The run's calibration (``s``: the study settings): the set named by
    ``echo_calibration_path`` (None: the shipped one), calibrated on the vectors of ``vec``."""
    path = s.echo_calibration_path or CALIBRATION_PATH
    rows, digest = load_calibration(path)
    return calibrate(rows, vec, s.echo_threshold, digest, Path(path).name)


def echo_mean(per_q: Mapping[str, QuestionResult], rule: str) -> float | None:
    """Mean echo rate over the questions at ``rule`` (seed | calibrated | lexical; the summary's
    ``mean_echo_<rule>``): over the questions that have one."""
    xs = [x for v in per_q.values() if v.echo and (x := v.echo.rate(rule)) is not None]
    return sum(xs) / len(xs) if xs else None
