"""Per-condition salience and the template and temperature contrasts, on lists whose answers
are known in closed form; novelty against width against scipy."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from choir_questions import question
from scipy import stats as sps

from lmaudit.stats.rbo import rbo_ext
from lmaudit.stats.salience import Salience
from lmaudit.studies.choir.conditions import condition_block, condition_summary, novelty_by_width
from lmaudit.studies.choir.lists import _mean_pairwise_rbo, _ranking
from lmaudit.studies.choir.records import UNCONDITIONED, ListRecord
from lmaudit.studies.choir.results.question import ConditionBlock, TemplateNovelty

P = 0.9


def _rec(model: str, cond: str, t: float, items: list[str], persona: str = UNCONDITIONED) -> ListRecord:
    return ListRecord(model, "q", cond, persona, t, 0, tuple(items))


def _block(recs: list[ListRecord]) -> ConditionBlock:
    concept_of = {t: i for i, t in enumerate(sorted({t for r in recs for t in r.items}))}

    def rank_of(s: Salience) -> list:
        return _ranking(s, None)

    return condition_block(recs, concept_of, rank_of, lambda rs: _mean_pairwise_rbo(rs, P), P)


# Template A: both members list x, y, z at both temperatures. Template B at T = 0.3: both list
# u, v, w; at T = 1.0 member m1 lists u, v, w and m2 lists p, q, r.
RECS = [
    _rec("m1", "A", 0.3, ["x", "y", "z"]),
    _rec("m2", "A", 0.3, ["x", "y", "z"]),
    _rec("m1", "A", 1.0, ["x", "y", "z"]),
    _rec("m2", "A", 1.0, ["x", "y", "z"]),
    _rec("m1", "B", 0.3, ["u", "v", "w"]),
    _rec("m2", "B", 0.3, ["u", "v", "w"]),
    _rec("m1", "B", 1.0, ["u", "v", "w"]),
    _rec("m2", "B", 1.0, ["p", "q", "r"]),
    _rec("m1", "A|sailor", 0.3, ["x", "a"], persona="sailor"),  # a record's id, as the design names it
]


def test_cells_keep_template_temperature_and_persona_apart():
    b = _block(RECS)
    cells = [(c.model, c.condition, c.temperature, c.n_lists) for c in b.cells]
    assert ("m1", "A|sailor", 0.3, 1) in cells
    assert len(cells) == 9  # 2 members x 2 templates x 2 temperatures, and one persona cell
    # Smith's S of a 3-item list: (3 - rank + 1) / 3 per item; of the persona's 2-item list: 1, 1/2
    i = next(k for k, c in enumerate(b.cells) if c.condition == "A|sailor")
    s = sorted(row[2] for row in b.salience if row[1] == i)
    assert s == [Fraction(1, 2), 1] or s == pytest.approx([0.5, 1.0])


def test_template_and_temperature_contrasts_closed_form():
    b = _block(RECS)
    assert b.R_q == {"A@0.3": 1.0, "A@1": 1.0, "B@0.3": 1.0, "B@1": 0.0}
    assert b.template is not None and b.temperature is not None
    (tpl,) = b.template
    # A and B rankings share no concept: within-member RBO 0 in every cell
    assert (tpl.from_, tpl.to, tpl.within_member_rbo, tpl.n_cells) == ("A", "B", 0.0, 4)
    assert tpl.R_q_change == pytest.approx(((1 - 1) + (0 - 1)) / 2)  # mean over temperatures
    (temp,) = b.temperature
    assert (temp.from_, temp.to) == (0.3, 1.0)
    # same rankings in 3 of the 4 (member, template) cells, disjoint in m2's template B
    assert temp.within_member_rbo == pytest.approx(3 / 4)
    assert temp.within_member_rbo_per_member == {"m1": 1.0, "m2": 0.5}
    assert temp.R_q_change == pytest.approx(((1 - 1) + (0 - 1)) / 2)


def test_within_member_rbo_is_rbo_of_the_cell_rankings():
    """Rebuilt from the recorded per-cell salience: concepts by S, equal S one tie group."""
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(12)]
    recs = [
        _rec(m, tpl, t, list(rng.permutation(words)[: rng.integers(3, 9)]))
        for m in ("m1", "m2", "m3")
        for tpl in ("A", "B")
        for t in (0.3, 0.7)
        for _ in range(3)
    ]
    b = _block(recs)
    assert b.temperature is not None
    (row,) = b.temperature
    ranks = {}
    for i, c in enumerate(b.cells):
        by_s: dict = {}
        for k, j, s, _ in b.salience:
            if j == i:
                by_s.setdefault(Fraction(s), set()).add(int(k))
        ranks[(c.model, c.condition, c.temperature)] = [
            frozenset(v) if len(v) > 1 else next(iter(v)) for _, v in sorted(by_s.items(), reverse=True)
        ]
    vals = [
        rbo_ext(ranks[(m, tpl, 0.3)], ranks[(m, tpl, 0.7)], P)
        for m in ("m1", "m2", "m3")
        for tpl in ("A", "B")
    ]
    assert any(isinstance(e, frozenset) for r in ranks.values() for e in r)  # ties are exercised
    assert row.within_member_rbo == pytest.approx(np.mean(vals), abs=1e-12)
    assert row.n_cells == 6


def test_summary_averages_questions():
    a = question(conditions=_block(RECS))
    b = question(conditions=_block([r for r in RECS if r.condition != "B"]))
    out = condition_summary({"q1": a, "q2": b})
    assert out is not None and out.template is not None and out.temperature is not None
    assert out.R_q["A@0.3"] == 1.0 and out.R_q["B@1"] == 0.0
    (tpl,) = out.template
    assert tpl.n_questions == 1  # q2 has one template only
    (temp,) = out.temperature
    assert temp.n_questions == 2 and temp.R_q_up == 0
    assert temp.R_q_change == pytest.approx((-0.5 + 0.0) / 2)


def test_novelty_by_width_against_scipy():
    rng = np.random.default_rng(8)
    w = rng.uniform(0, 4, 20)
    n = np.clip(0.15 * w + rng.normal(0, 0.1, 20), 0, 1)
    per_q = {f"q{i}": question(width=float(w[i]), template_novelty=_novelty(float(n[i]))) for i in range(20)}
    per_q["none"] = question(width=1.0)
    out = novelty_by_width(per_q, [0.0, 1.0, 2.0, 3.0])
    ref = sps.spearmanr(w, n)
    assert out is not None and out.spearman is not None
    assert out.spearman.rho == pytest.approx(ref.statistic, abs=1e-12)
    assert out.spearman.p == pytest.approx(ref.pvalue, abs=1e-12)
    assert [b.n for b in out.bins] == [int(((w >= lo) & (w < lo + 1)).sum()) for lo in (0, 1, 2)] + [
        int((w >= 3).sum())
    ]
    assert sum(b.over_half for b in out.bins) == int((n > 0.5).sum())
    assert novelty_by_width({"q": question(template_novelty=_novelty(1.0))}, [0.0]) is None


def _novelty(share: float) -> TemplateNovelty:
    return TemplateNovelty(baseline="A", template="B", n_concepts=4, n_novel=round(4 * share), share=share)
