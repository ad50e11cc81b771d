"""``lmaudit compare RUN_A RUN_B``: two runs of each study on sim models, paired item by item;
every number checked against the runs' own results and an independent computation."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from choir_quick import QUICK_CHOIR
from lmaudit.console import main
from lmaudit.pipeline import run

REPO = Path(__file__).resolve().parents[2]


def _results(out: Path) -> dict[str, Any]:
    return dict(json.loads((out / "results.json").read_text()))


def _compare(a: Path, b: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], str]:
    assert main(["compare", str(a), str(b), "--json", str(out)]) == 0
    return json.loads(out.read_text()), capsys.readouterr().out


def _enumerated_p(d: np.ndarray) -> float:
    """Two-sided sign-flip p by listing every sign pattern (a matrix of them)."""
    signs = np.array(list(itertools.product((-1.0, 1.0), repeat=d.size)))
    return float(np.mean(np.abs(signs @ d) >= abs(d.sum()) - 1e-12))


def test_qq_pairs_items_with_the_sign_flip_test(make_cfg, tmp_path, capsys) -> None:
    run(make_cfg("model=sim_mixture", "mlflow.enabled=false", name="a"))
    run(make_cfg("model=sim_repetition", "model.params.r=0.6", "mlflow.enabled=false", name="b"))
    got, text = _compare(tmp_path / "a", tmp_path / "b", tmp_path / "paired.json", capsys)
    assert got["study"] == "qq" and got["models"] == {"a": "sim-mixture", "b": "sim-repetition"}
    ra = {it["item"]: it for it in _results(tmp_path / "a")["items"]}
    rb = {it["item"]: it for it in _results(tmp_path / "b")["items"]}
    items = got["paired"]["items"]
    assert [r["item"] for r in items] == list(ra) and len(items) == 18
    for r in items:
        assert r["a"] == abs(ra[r["item"]]["q"]) and r["b"] == abs(rb[r["item"]]["q"])
        assert r["diff"] == pytest.approx(r["b"] - r["a"], abs=1e-15)
        assert r["verdict_changed"] == (ra[r["item"]]["verdict"] != rb[r["item"]]["verdict"])
    d = np.array([r["diff"] for r in items])
    assert got["paired"]["p_value"] == pytest.approx(_enumerated_p(d), abs=1e-12)
    # the repetition agent satisfies QQ (q = 0 up to float noise), the mixture violates it
    # nearly everywhere: every difference is negative, so p = 2 / 2^18 exactly
    assert got["paired"]["p_value"] == pytest.approx(2 / 2**18, rel=1e-12)
    assert got["paired"]["test"]["method"] == "exact"
    assert "sign-flip p = 7.629e-06" in text and "columns:" in text and "diff: b - a" in text


def test_judge_pairs_flip_indicators_with_exact_mcnemar(make_cfg, tmp_path, capsys) -> None:
    data = REPO / "data/judge/demo"
    common = (
        "study=judge",
        "model=sim_judge",
        f"study.candidates_path={data / 'candidates.jsonl'}",
        f"study.mapping_path={data / 'mapping.json'}",
        "mlflow.enabled=false",
    )
    run(make_cfg(*common, name="a"))
    run(make_cfg(*common, "model.params.position_bias=3.0", name="b"))
    got, text = _compare(tmp_path / "a", tmp_path / "b", tmp_path / "paired.json", capsys)
    dis_a = {d["id"]: d["per_item"] for d in _results(tmp_path / "a")["disagreement"]}
    dis_b = {d["id"]: d["per_item"] for d in _results(tmp_path / "b")["disagreement"]}
    conds = got["paired"]["conditions"]
    assert [c["condition"] for c in conds] == list(dis_a)
    for c in conds:
        fa = {k: v["changed"] > 0 for k, v in dis_a[c["condition"]].items()}
        fb = {k: v["changed"] > 0 for k, v in dis_b[c["condition"]].items()}
        assert [(r["item"], r["a"], r["b"]) for r in c["items"]] == [(k, fa[k], fb[k]) for k in fa]
        n10 = sum(fa[k] and not fb[k] for k in fa)
        n01 = sum(fb[k] and not fa[k] for k in fa)
        want = 1.0 if n10 + n01 == 0 else stats.binomtest(n10, n10 + n01, 0.5).pvalue
        assert c["p_value"] == pytest.approx(want, abs=1e-12)
        assert (c["mcnemar"]["only_a"], c["mcnemar"]["only_b"]) == (n10, n01)
    # Holm over the conditions, by hand: the step-down maxima of (m - rank) p, capped at 1
    ps = [c["p_value"] for c in conds]
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    running, holm = 0.0, [0.0] * len(ps)
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
        holm[i] = running
    assert [c["holm_p"] for c in conds] == pytest.approx(holm, abs=1e-12)
    assert "exact McNemar p" in text


def test_draws_pairs_rho_hat_with_a_seeded_bootstrap_interval(make_cfg, tmp_path, capsys) -> None:
    small = (
        "study.permutations=99",
        "study.sims_per_step=20",
        f"study.probes_path={REPO / 'data/draws/probes.jsonl'}",
    )
    run(make_cfg("study=draws", "model=sim_persistent", "mlflow.enabled=false", *small, name="a"))
    run(
        make_cfg(
            "study=draws",
            "model=sim_persistent",
            "model.params.rho=0.0",
            "mlflow.enabled=false",
            *small,
            name="b",
        )
    )
    got, text = _compare(tmp_path / "a", tmp_path / "b", tmp_path / "paired.json", capsys)
    (fam,) = got["paired"]["families"]
    rho = fam["rho_hat"]
    # every sequence is shared: each run's rho_hat is the one its results report
    assert fam["n_sequences"] == 18
    assert rho["a"] == pytest.approx(
        _results(tmp_path / "a")["families"]["sim-persistent"]["rho_hat"], abs=1e-12
    )
    assert rho["b"] == pytest.approx(
        _results(tmp_path / "b")["families"]["sim-persistent"]["rho_hat"], abs=1e-12
    )
    assert rho["diff"] == pytest.approx(rho["b"] - rho["a"], abs=1e-12)
    assert rho["low"] < rho["diff"] < rho["high"] < 0  # rho 0.3 against rho 0: B persists less
    assert (rho["n_resamples"], rho["seed"], rho["level"]) == (2000, 0, 0.95)
    again, _ = _compare(tmp_path / "a", tmp_path / "b", tmp_path / "again.json", capsys)
    assert again == got  # the interval is seeded
    assert "percentile bootstrap over sequences, 2000 resamples, seed 0" in text


def _choir(make_cfg: Any, name: str, strength: float) -> None:
    widths = "{H001: 6, H003: 7, H002: 60, H007: 60}"
    members = ", ".join(
        f"{{backend: sim, name: m{i}, agent: freelist, params: {{signature: {i + 1}, widths: {widths}, "
        f"signature_strength: {strength}}}}}"
        for i in range(3)
    )
    run(
        make_cfg(
            "study=choir",
            f"study.ensemble.members=[{members}]",
            "study.question_ids=[H001,H002,H003,H007]",
            "study.templates=[A]",
            "study.personas=[archivist]",
            "study.temperatures=[1.0]",
            "study.generations=3",
            "study.items_per_list=10",
            *QUICK_CHOIR,
            "mlflow.enabled=false",
            name=name,
        )
    )


def test_choir_pairs_questions_by_r_q(make_cfg, tmp_path, capsys) -> None:
    _choir(make_cfg, "a", 2.0)
    _choir(make_cfg, "b", 0.0)
    got, _ = _compare(tmp_path / "a", tmp_path / "b", tmp_path / "paired.json", capsys)
    qa, qb = _results(tmp_path / "a")["questions"], _results(tmp_path / "b")["questions"]
    items = got["paired"]["items"]
    assert [r["item"] for r in items] == list(qa)
    for r in items:
        assert (r["a"], r["b"]) == (qa[r["item"]]["R_q"], qb[r["item"]]["R_q"])
    d = np.array([r["diff"] for r in items])
    assert got["paired"]["p_value"] == pytest.approx(_enumerated_p(d), abs=1e-12)


def _flat_design(run_dir: Path) -> dict[str, Any]:
    """A plan's config and inputs as dotted keys, flattened by pandas (an independent flattener)."""
    plan = json.loads((run_dir / "plan.json").read_text())
    flat = pd.json_normalize({**plan["config"], "inputs": plan["inputs"]}, sep=".").iloc[0].to_dict()
    # a list of mappings (framing.few_shot) item by item, as MLflow's parameter names have it
    while nested := [
        k for k, v in flat.items() if isinstance(v, list) and any(isinstance(x, dict) for x in v)
    ]:
        for k in nested:
            items = {str(i): x for i, x in enumerate(flat.pop(k))}
            flat.update(pd.json_normalize({k: items}, sep=".").iloc[0].to_dict())
    return flat


def test_the_design_table_lists_the_keys_that_differ_then_those_that_agree(
    make_cfg, tmp_path, capsys
) -> None:
    run(make_cfg("model=sim_mixture", "mlflow.enabled=false", name="a"))
    run(make_cfg("model=sim_repetition", "study.epsilon=0.05", "mlflow.enabled=false", name="eps"))
    a, b = _flat_design(tmp_path / "a"), _flat_design(tmp_path / "eps")
    out = tmp_path / "design.json"
    assert main(["compare", "--design", str(tmp_path / "a"), str(tmp_path / "eps"), "--json", str(out)]) == 0
    got, text = json.loads(out.read_text()), capsys.readouterr().out
    differ = {r["key"]: r for r in got["design"]["differ"]}
    assert set(differ) == {k for k in a.keys() | b.keys() if a.get(k, "unset") != b.get(k, "unset")}
    assert "study.epsilon" in differ and "model.name" in differ
    assert (differ["study.epsilon"]["a"], differ["study.epsilon"]["b"]) == (0.02, 0.05)
    assert all(
        r.get("a", "unset") == a.get(k, "unset") and r.get("b", "unset") == b.get(k, "unset")
        for k, r in differ.items()
    )
    assert got["design"]["same"] == {k: v for k, v in a.items() if k not in differ}
    assert got["models"] == {"a": "sim-mixture", "b": "sim-repetition"} and got["studies"] == {
        "a": "qq",
        "b": "qq",
    }
    # the text: a table of the differing keys, then the agreeing ones folded by their first part
    assert f"design: {len(differ)} keys differ, {len(got['design']['same'])} agree" in text
    assert any(line.split()[:3] == ["study.epsilon", "0.02", "0.05"] for line in text.splitlines())
    n_study = sum(k.startswith("study.") for k in got["design"]["same"])
    assert f"study ({n_study} keys)" in text and "agree: " in text
    # the paired comparison of two runs that differ only in their model starts with the same table
    run(make_cfg("model=sim_repetition", "mlflow.enabled=false", name="b"))
    paired, text = _compare(tmp_path / "a", tmp_path / "b", tmp_path / "paired.json", capsys)
    assert {r["key"] for r in paired["design"]["differ"]} == {k for k in differ if k.startswith("model.")}
    assert text.index("design: ") < text.index("qq, per item")


def test_refusals_are_one_line_exit_2_and_write_nothing(make_cfg, tmp_path, capsys) -> None:
    run(make_cfg("model=sim_mixture", "mlflow.enabled=false", name="a"))
    run(make_cfg("model=sim_repetition", "study.epsilon=0.05", "mlflow.enabled=false", name="eps"))
    out = tmp_path / "paired.json"

    def refused(*args: str) -> str:
        assert main(["compare", *args, "--json", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1, err
        assert not out.exists()
        return err

    err = refused(str(tmp_path / "a"), str(tmp_path / "eps"))
    assert (
        "designs differ beyond the model" in err
        and "plan.config.study.epsilon = 0.02 in run A, 0.05 in run B" in err
        and f"every difference: lmaudit compare --design {tmp_path / 'a'} {tmp_path / 'eps'}" in err
    )
    # the same design, but none of the items in common
    other = tmp_path / "other"
    shutil.copytree(tmp_path / "a", other)
    res = _results(other)
    for it in res["items"]:
        it["item"] = "x-" + it["item"]
    (other / "results.json").write_text(json.dumps(res))
    assert "they share no item" in refused(str(tmp_path / "a"), str(other))
    # another study's run (its study renamed in both files)
    draws = tmp_path / "draws"
    shutil.copytree(tmp_path / "a", draws)
    for f in ("results.json", "plan.json"):
        obj = json.loads((draws / f).read_text())
        obj["study"] = "draws"
        (draws / f).write_text(json.dumps(obj))
    err = refused(str(tmp_path / "a"), str(draws))
    assert "(qq) with" in err and "(draws): different studies" in err
    broken = tmp_path / "broken"
    shutil.copytree(tmp_path / "a", broken)
    (broken / "results.json").write_text("{not json")
    assert f"{broken / 'results.json'}: not valid JSON" in refused(str(tmp_path / "a"), str(broken))
    assert "not a run folder" in refused(str(tmp_path / "a"), str(tmp_path / "missing"))
    assert "pairs two run folders, got 1" in refused(str(tmp_path / "a"))


def test_imported_draws_pair_by_family_and_relabelled_answers_change_nothing(
    make_cfg, tmp_path, capsys
) -> None:
    # renaming the answers keeps every repeat count and E0: rho_hat is unchanged, exactly
    example = REPO / "data/draws/example_import.jsonl"
    rename = {"red": "rouge", "green": "vert", "blue": "bleu"}
    rows = [json.loads(line) for line in example.read_text().splitlines() if line.strip()]
    for r in rows:
        r["draws"] = [rename.get(x, x) for x in r["draws"]]
    renamed = tmp_path / "renamed.jsonl"
    renamed.write_text("".join(json.dumps(r) + "\n" for r in rows))
    small = ("study=draws", "study.permutations=99", "study.sims_per_step=20", "mlflow.enabled=false")
    run(make_cfg(*small, f"study.import_path={example}", name="a"))
    run(make_cfg(*small, f"study.import_path={renamed}", name="b"))
    got, _ = _compare(tmp_path / "a", tmp_path / "b", tmp_path / "paired.json", capsys)
    res = _results(tmp_path / "a")
    fams = got["paired"]["families"]
    assert [(f["family_a"], f["family_b"]) for f in fams] == [(n, n) for n in sorted(res["families"])]
    for f in fams:
        assert f["n_sequences"] == res["families"][f["family_a"]]["n_sequences"]
        assert f["rho_hat"]["a"] == pytest.approx(res["families"][f["family_a"]]["rho_hat"], abs=1e-12)
        assert f["rho_hat"]["diff"] == pytest.approx(0.0, abs=1e-12)
        assert f["rho_hat"]["low"] == pytest.approx(0.0, abs=1e-12)
        assert f["rho_hat"]["high"] == pytest.approx(0.0, abs=1e-12)
    # an imported run and a sampled one differ in mode
    run(
        make_cfg(
            *small, "model=sim_persistent", f"study.probes_path={REPO / 'data/draws/probes.jsonl'}", name="s"
        )
    )
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "s")]) == 2
    assert 'plan.mode = "import" in run A, "sample" in run B' in capsys.readouterr().err
