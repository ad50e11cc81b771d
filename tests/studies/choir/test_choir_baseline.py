"""Like-for-like lift baseline, the codebook metric's sensitivity and hand-coded lists, against
closed forms and planted structure."""

from __future__ import annotations

import numpy as np
import pytest

from choir_quick import typed_results
from lmaudit.studies.choir.config import ChoirCodebookConfig, ChoirEnsembleConfig, ChoirStudyConfig
from lmaudit.studies.choir.lists import analyze_lists
from lmaudit.studies.choir.records import ListRecord


def _settings(**kw: object) -> ChoirStudyConfig:
    return ChoirStudyConfig(
        ensemble=ChoirEnsembleConfig(name="t"), shuffles=0, permutations=0, n_boot=0, n_null=0, **kw
    )


def _onehot(texts: list[str]) -> dict[str, np.ndarray]:
    eye = np.eye(len(texts), dtype=np.float32)
    return {t: eye[i] for i, t in enumerate(texts)}


def _rec(m: str, cond: str, persona: str, g: int, items: list[str]) -> ListRecord:
    return ListRecord(m, "Q", cond, persona, 0.7, g, tuple(items))


def _lists() -> list[ListRecord]:
    """Three members; template A and B unconditioned; the persona's lists are copies of
    template A's (no persona effect, the same list count)."""
    rng = np.random.default_rng(3)
    pool = [f"c{i}" for i in range(30)]
    recs = []
    for m in ("m1", "m2", "m3"):
        for g in range(3):
            a = list(rng.choice(pool, 8, replace=False))
            recs.append(_rec(m, "A", "none", g, a))
            recs.append(_rec(m, "A|p", "p", g, a))
            recs.append(_rec(m, "B", "none", g, list(rng.choice(pool, 8, replace=False))))
    return recs


def test_lift_is_exactly_one_when_the_persona_repeats_template_a():
    recs = _lists()
    out = analyze_lists(recs, _onehot([f"c{i}" for i in range(30)]), {}, _settings())
    lift = out.questions["Q"].lift
    assert lift is not None and lift.pooled is not None
    assert lift.relative == pytest.approx(1.0, abs=1e-12) and lift.absolute == pytest.approx(0.0, abs=1e-12)
    assert lift.baseline.template == "A" and lift.baseline.n_lists == lift.baseline.n_lists_conditioned == 9
    # the pooled baseline (A and B, twice the lists) is kept, and is not like for like
    assert lift.pooled.rbo == out.questions["Q"].R_q
    assert lift.pooled.relative != pytest.approx(1.0, abs=1e-3)


def _groups(gap: float) -> tuple[list[str], dict[str, np.ndarray]]:
    """Three groups of 6 texts each, tight within (cosine distance < 0.01): the first two
    centres at cosine distance ``gap``, the third orthogonal to both (HDBSCAN never returns
    the root cluster, so a merge shows as 2 clusters instead of 3)."""
    rng = np.random.default_rng(0)
    b = np.sqrt(1 - (1 - gap) ** 2)
    centres = [np.array([1.0, 0, 0, 0]), np.array([1.0 - gap, b, 0, 0]), np.array([0, 0, 0, 1.0])]
    vec, texts = {}, []
    for g, c in enumerate(centres):
        for i in range(6):
            v = c + rng.normal(0, 0.01, 4)
            t = f"g{g}-{i}"
            vec[t] = (v / np.linalg.norm(v)).astype(np.float32)
            texts.append(t)
    return texts, vec


def test_metric_sensitivity_reports_both_codebooks():
    texts, vec = _groups(0.2)  # cosine 0.2 < 0.3: the first two merge; Euclidean 0.63 > 0.3: apart
    recs = [
        _rec(m, "A", "none", g, [t for t in texts if int(t[-1]) % 2 == g])
        for m in ("m1", "m2")
        for g in (0, 1)
    ]
    out = analyze_lists(recs, vec, {}, _settings(templates=["A"]))
    sens = out.questions["Q"].metric_sensitivity
    assert sens is not None and sens.primary == "cosine"
    assert sens.cosine.C_q == out.questions["Q"].C_q == 2
    assert sens.euclidean.C_q == 3
    summ = out.codebook_metric_sensitivity
    assert summ is not None and summ.n_C_q_differs == 1 and summ.euclidean.mean_C_q == 3.0
    other = analyze_lists(
        recs, vec, {}, _settings(templates=["A"], codebook=ChoirCodebookConfig(metric="euclidean"))
    )
    assert other.questions["Q"].C_q == 3
    other_sens = other.questions["Q"].metric_sensitivity
    assert other_sens is not None and other_sens.primary == "euclidean" and other_sens.cosine.C_q == 2


def test_hand_coded_lists_are_analysed_with_their_codes():
    recs = _lists()
    code = {f"c{i}": f"k{i % 10}" for i in range(30)}  # 30 texts, 10 codes
    coded = [
        ListRecord(
            r.model,
            r.question,
            r.condition,
            r.persona,
            r.temperature,
            r.generation,
            r.items,
            tuple(code[t] for t in r.items),
        )
        for r in recs
    ]
    # the same lists written as their codes, every code a text of its own vector: the same concepts
    as_codes = [
        ListRecord(
            r.model,
            r.question,
            r.condition,
            r.persona,
            r.temperature,
            r.generation,
            tuple(dict.fromkeys(code[t] for t in r.items)),
        )
        for r in recs
    ]
    a = analyze_lists(coded, {}, {}, _settings())
    b = analyze_lists(as_codes, _onehot([f"k{i}" for i in range(10)]), {}, _settings())
    qa, qb = a.questions["Q"], b.questions["Q"]
    assert a.codebook_source == "coded" and qa.n_concepts == 10
    assert qa.R_q == pytest.approx(qb.R_q, abs=1e-12)
    assert qa.same_persona_rbo_mean == pytest.approx(qb.same_persona_rbo_mean, abs=1e-12)
    assert qa.relative_lift == pytest.approx(qb.relative_lift, abs=1e-12)
    assert qa.C_q == 10 and qa.n_clusters == 10  # every code is a coder's category
    assert a.recoverability == {} and qa.metric_sensitivity is None
    assert qa.echo is not None and qa.echo.seed is None and qa.echo.lexical is not None


def _import_rows() -> list[dict]:
    out = []
    for m, items in (("m1", ["a dog", "a cat", "rain"]), ("m2", ["a puppy", "sunshine", "a kitten"])):
        for g in range(2):
            out.append(
                {
                    "model": m,
                    "question": "H001",
                    "template": "A",
                    "temperature": 0.7,
                    "persona": "none",
                    "generation": g,
                    "items": items,
                }
            )
    return out


CODES = {
    "a dog": "canine",
    "a puppy": "canine",
    "a cat": "feline",
    "a kitten": "feline",
    "rain": "weather",
    "sunshine": "weather",
}


def test_a_coded_import_uses_the_codes_and_embeds_nothing(make_cfg, tmp_path):
    import json

    from lmaudit.errors import InputError
    from lmaudit.pipeline import run

    inline = tmp_path / "inline.jsonl"
    rows = _import_rows()
    inline.write_text(
        "".join(
            json.dumps({**r, "items": [{"text": t, "concept": CODES[t]} for t in r["items"]]}) + "\n"
            for r in rows
        )
    )
    plain = tmp_path / "plain.jsonl"
    plain.write_text("".join(json.dumps(r) + "\n" for r in rows))
    book = tmp_path / "codes.jsonl"
    book.write_text(
        "".join(json.dumps({"question": "H001", "text": t, "concept": c}) + "\n" for t, c in CODES.items())
    )
    common = (
        "study=choir",
        "study.embedder.kind=sim",
        "study.shuffles=20",
        "study.permutations=20",
        "mlflow.enabled=false",
    )
    results = []
    for name, extra in (
        ("inline", (f"study.import_path={inline}",)),
        ("mapped", (f"study.import_path={plain}", f"study.codebook_path={book}")),
    ):
        run(make_cfg(*common, *extra, name=name))
        res = typed_results(tmp_path / name / "results.json")
        meas = [json.loads(x) for x in (tmp_path / name / "measurements.jsonl").read_text().splitlines()]
        assert not [r for r in meas if r["kind"] == "embedding"]
        q = res["questions"]["H001"]
        assert res["codebook_source"] == "coded" and q["C_q"] == 3
        results.append(q["R_q"])
    assert results[0] == results[1]
    bad = tmp_path / "bad.jsonl"
    rows[0]["items"] = [{"text": "a dog", "concept": "canine"}, "a cat"]
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError, match="has no concept"):
        run(make_cfg(*common, f"study.import_path={bad}", name="bad"))
