"""The answers of the qq and draws reports, and of the eval-log imports the draws study reads
(inspect_ai, lm-eval), checked against the result objects they are computed from: a claim only
when its test makes it, an import leads with what its users came for, a failed gate stated
once, one coherent verdict, and nothing read off an empty column."""

from __future__ import annotations

import dataclasses
import html as htmllib
import json
import random
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lmaudit.pipeline import run
from lmaudit.studies.qq.report.gates import gate_views
from lmaudit.studies.qq.report.verdict import verdict
from lmaudit.studies.qq.results import QQResults

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS / "interop")]  # the interop tests' helpers: logs made by the tools themselves
from draws_interop_helpers import planted, run_draws, run_inspect  # noqa: E402

EPOCHS, N_SAMPLES = 8, 12


@pytest.fixture
def inspect_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """inspect_ai quiet, with its response cache under ``tmp_path`` (as tests/interop's fixture)."""
    pytest.importorskip("inspect_ai")
    monkeypatch.setenv("INSPECT_LOG_LEVEL", "error")
    monkeypatch.setenv("INSPECT_CACHE_DIR", str(tmp_path / "inspect-cache"))
    monkeypatch.setenv("INSPECT_DISPLAY", "none")
    return tmp_path


def _text(markup: str) -> str:
    return " ".join(htmllib.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


def _answer(page: str) -> tuple[str, str, bool]:
    """The answer box: (headline, its whole text, whether it says the run answered)."""
    start = page.index('id="answer"')
    box = page[start : page.index("</section>", start)]
    head = re.search(r'<p class="headline">(.*?)</p>', box, flags=re.S)
    assert head is not None
    return _text(head.group(1)), _text(box), 'class="verdict "' in page


def _alerts(page: str) -> list[str]:
    return [_text(a) for a in re.findall(r'<p class="alert">(.*?)</p>', page, flags=re.S)]


def _run(
    make_cfg: Callable[..., Any], tmp_path: Path, name: str, *overrides: str
) -> tuple[dict[str, Any], str]:
    run(make_cfg(*overrides, "mlflow.enabled=false", name=name))
    out = tmp_path / name
    return json.loads((out / "results.json").read_text()), (out / "report.html").read_text()


def _persistence_claim(res: Mapping[str, Any]) -> str | None:
    """The claim the draws answer may make, from the result: persistence in k of n families only
    when k families reject at the stated alpha (after Holm across several)."""
    n, k = res["n_families"], res["n_rejected"]
    assert k == sum(f["reject"] for f in res["families"].values())
    if not k:
        return None
    return f"Answers persist from draw to draw in {k} of {n} {'family' if n == 1 else 'families'}"


# ------------------------------------------------------------------ qq


def test_qq_that_cannot_answer_states_the_failed_gate_once(make_cfg, tmp_path) -> None:
    res, page = _run(make_cfg, tmp_path, "leaky", "model=sim_projective", "+model.params.other_mass=0.05")
    head, box, answered = _answer(page)
    g2 = res["gates"]["G2"]
    n = res["n_items"]
    assert g2["status"] == "FAIL" and res["counts"]["verdict"]["INDETERMINATE"] == n and not answered
    assert f"Gate G2 failed: {g2['max_other']:.3g} of the mass is off the labels" in head
    assert f"(G2 needs < {g2['threshold']:.3g})" in head
    assert f"Every one of the {n} items is INDETERMINATE" in head
    # once: not in an alert, a fact, or the G2 section's text
    assert _text(page).count("G2 failed") == 1 and "G2 FAIL (" not in box
    assert not [a for a in _alerts(page) if "G2" in a or "other mass" in a]
    # the across-item summary, from results.summary
    sv = res["summary"]["share_violated"]
    assert sv["k"] == 0 and sv["n"] == n
    assert (
        f"Across the {n} items analysed: 0 VIOLATED (0.0%, 95% Clopper-Pearson interval [0.0%, {100 * sv['ci'][1]:.1f}%])"
        in box
    )
    assert "The label mapping changes the answers" not in head  # not claimed: not large
    assert not res["summary"]["label_effect"]["large"]


def test_qq_names_a_label_effect_in_the_headline_only_when_it_is_large(make_cfg, tmp_path) -> None:
    res, page = _run(make_cfg, tmp_path, "sim", "model=sim_projective")
    head, _, answered = _answer(page)
    v = res["counts"]["verdict"]
    assert answered and head.startswith(
        f"{v['SATISFIED']} of {res['n_items']} items satisfy the QQ equality, {v['VIOLATED']} violate it"
    )
    assert not res["summary"]["label_effect"]["large"] and "label mapping changes" not in head
    # the same run with items whose |ΔOSS| clears the threshold: the headline says so, with the numbers
    from lmaudit.studies.qq.summary import across_items

    typed = QQResults.from_json(res)
    planted_effect = across_items(
        [0.0] * 4, [False] * 4, [0.5, 0.55, 0.6, 0.52], large_threshold=typed.params.memorization_threshold
    )
    large = dataclasses.replace(typed, across_items=planted_effect)
    gates = gate_views(typed, None)
    gates["G2"] = {**gates["G2"], "median_other": 0.0}
    le = planted_effect.label_effect
    assert le is not None and le.ci is not None and le.mean is not None
    got = verdict(large, gates)
    assert got.answered and (
        f"The label mapping changes the answers: mean |ΔOSS| between label mappings {le.mean:.3f} over 4 items "
        f"(95% t interval [{le.ci.lo:.3f}, {le.ci.hi:.3f}])" in got.headline
    )


# ------------------------------------------------------------------ draws: imported eval logs


def test_an_inspect_log_of_cache_copies_leads_with_them(make_cfg, tmp_path, inspect_env) -> None:
    from inspect_ai.model import CachePolicy

    rng = random.Random(3)
    seqs = {f"s{i:02d}": planted(rng, EPOCHS, 0.0) for i in range(N_SAMPLES)}
    log = run_inspect(
        tmp_path / "logs", "mockllm/cached", seqs, epochs=EPOCHS, mark_epoch=False,
        temperature=1.0, cache=CachePolicy(per_epoch=False),
    )  # fmt: skip
    out, res = run_draws(make_cfg, log, "cached", "mlflow.enabled=false")
    page = (out / "report.html").read_text()
    head, box, answered = _answer(page)
    audit = res["log_audit"]
    read = sum(f["counts"]["draws_read"] for f in audit["files"])
    copies = audit["totals"]["cache_copies"]
    assert copies == N_SAMPLES * (EPOCHS - 1) and read == N_SAMPLES * EPOCHS
    assert head.startswith(f"{copies} of {read} draws in the imported logs are cache copies")
    assert all(not f["n_informative"] for f in res["families"].values()) and not answered
    assert head.index("cache copies") < head.index("No sequence left has two different answers")
    assert _persistence_claim(res) is None and "persist from draw" not in head
    assert not [a for a in _alerts(page) if "not independent" in a]  # stated once
    # the dependence of the scores beside it: the error bars' sentence, from results.error_bars
    for tasks in res["error_bars"].values():
        for e in tasks.values():
            assert e["sentence"] in box
    # nothing to read a rho off: no empty interval, the terms that do not apply are not listed
    assert "<dt>ρ̂ / ρ_upper</dt>" not in page and "<dt>Holm</dt>" not in page


def test_an_inspect_log_of_persistent_draws_is_one_verdict_with_its_grouped_sequences(
    make_cfg, tmp_path, inspect_env
) -> None:
    rng = random.Random(4)
    seqs = {f"s{i:02d}": planted(rng, EPOCHS, 0.35) for i in range(30)}
    log = run_inspect(tmp_path / "logs", "mockllm/sticky", seqs, epochs=EPOCHS, temperature=1.0)
    out, res = run_draws(make_cfg, log, "sticky", "mlflow.enabled=false")
    page = (out / "report.html").read_text()
    head, box, answered = _answer(page)
    # persistence groups sequences too: the log's only source is flagged, and the answer says
    # what the registered test finds and why it cannot be read alone, in one red verdict
    f = res["families"]["mockllm/sticky"]
    assert f["reject"] and res["any_flagged"] and f["without_flagged"]["n_sequences"] == 0
    assert not answered and not head.startswith("Answers persist")
    assert head.startswith("The registered test rejects chance ordering in 1 of 1 family (at α = 0.05)")
    assert f"{f['flagged_sources'][0]} in mockllm/sticky has more fully grouped sequences" in head
    assert "without them, no family has a source left" in head and "Holm" not in head
    assert not [a for a in _alerts(page) if "rebuilt" in a]
    ci = f["rho_hat_ci"]
    assert f"ρ̂ = {f['rho_hat']:.3f}, 95% interval [{ci['low']:.3f}, {ci['high']:.3f}]" in box
    assert f"percentile bootstrap over {ci['n_prompts']} prompts, B = {ci['B']}" in box
    assert ci["n_prompts"] == 30 and ci["low"] <= f["rho_hat"] <= ci["high"]


def test_persistent_draws_without_grouped_excess_are_claimed_with_rho_hat(make_cfg, tmp_path) -> None:
    from lmaudit.studies.draws.simulate import draw_persistent

    rng = np.random.default_rng(8)  # 40 probes x 12 draws over 6 answers, rho = 0.3
    shares = rng.dirichlet(np.ones(6), size=40)
    seqs = draw_persistent(shares, [12] * 40, 0.3, rng=rng)
    rows = [
        {"family": "m", "source": "s", "condition": "c", "probe": f"p{i}", "draws": [int(a) for a in x]}
        for i, x in enumerate(seqs)
    ]
    path = _jsonl(tmp_path / "draws.jsonl", rows)
    res, page = _run(make_cfg, tmp_path, "persistent", "study=draws", f"study.import_path={path}",
                     "study.permutations=999", "study.sims_per_step=100")  # fmt: skip
    head, box, answered = _answer(page)
    claim = _persistence_claim(res)
    assert not res["any_flagged"] and claim is not None
    assert answered and head == f"{claim} (at α = {res['params']['alpha']:g})."
    f = res["families"]["m"]
    ci = f["rho_hat_ci"]
    assert f"ρ̂ = {f['rho_hat']:.3f}, 95% interval [{ci['low']:.3f}, {ci['high']:.3f}]" in box
    assert "T<sub>drift</sub> = Σ D over the family's sequences" in page  # defined where shown


def test_a_greedy_lm_eval_run_leads_with_its_repeats_not_being_draws(make_cfg, tmp_path) -> None:
    pytest.importorskip("lm_eval")
    sys.path[:0] = [str(TESTS / "interop")]
    from test_draws_lm_eval import _table, run_lm_eval

    samples = run_lm_eval(
        tmp_path, "planted-greedy", _table(5, 0.0), tmp_path / "lm-eval-out", do_sample=False
    )
    out, res = run_draws(make_cfg, samples, "greedy", "mlflow.enabled=false")
    page = (out / "report.html").read_text()
    head, _, _ = _answer(page)
    greedy = res["log_audit"]["greedy_families"]
    assert greedy and head.startswith(f"{', '.join(greedy)} was generated greedily")
    assert not [a for a in _alerts(page) if "generated greedily" in a]  # stated once
    claim = _persistence_claim(res)
    assert (claim is not None and claim in head) or "persist from draw" not in head


# ------------------------------------------------------------------ draws: rebuilt sources


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_persistence_from_rebuilt_sources_only_is_not_a_green_answer(make_cfg, tmp_path) -> None:
    rng = random.Random(6)
    honest = [
        {
            "family": "m",
            "source": "honest",
            "condition": "c",
            "probe": f"p{i}",
            "draws": rng.choices("ABC", k=10),
        }
        for i in range(30)
    ]
    rebuilt = [
        {
            "family": "m",
            "source": "sorted",
            "condition": "c",
            "probe": f"q{i}",
            "draws": sorted(rng.choices("ABC", k=10)),
        }
        for i in range(30)
    ]
    path = _jsonl(tmp_path / "draws.jsonl", honest + rebuilt)
    res, page = _run(make_cfg, tmp_path, "rebuilt", "study=draws", f"study.import_path={path}",
                     "study.permutations=999", "study.sims_per_step=100")  # fmt: skip
    head, _, answered = _answer(page)
    f = res["families"]["m"]
    assert f["flagged_sources"] == ["sorted"] and f["reject"] and not f["without_flagged"]["reject"]
    assert not answered and head.startswith("The registered test rejects chance ordering in 1 of 1 family")
    assert "sorted in m has more fully grouped sequences (AAABBB) than chance gives" in head
    assert "without them, 0 of 1 family with a source left reject" in head
    assert not [a for a in _alerts(page) if "rebuilt" in a]  # one verdict, not a green one beside a red alert


def test_a_family_whose_only_source_was_dropped_says_so(make_cfg, tmp_path) -> None:
    rng = random.Random(7)
    rows = [
        {
            "family": "m",
            "source": "sorted",
            "condition": "c",
            "probe": f"q{i}",
            "draws": sorted(rng.choices("AB", k=10)),
        }
        for i in range(30)
    ]
    path = _jsonl(tmp_path / "draws.jsonl", rows)
    res, page = _run(make_cfg, tmp_path, "emptied", "study=draws", f"study.import_path={path}",
                     "study.permutations=999", "study.sims_per_step=100")  # fmt: skip
    head, _, answered = _answer(page)
    wf = res["families"]["m"]["without_flagged"]
    assert wf["n_sequences"] == 0 and res["families"]["m"]["flagged_sources"] == ["sorted"]
    assert not answered and "without them, no family has a source left" in head
    assert "no source left after dropping flagged ones" in page
    table = page[page.index("Without flagged sources") : page.index("<h2>Each family</h2>")]
    assert "1.0000" not in table  # no p read off an empty column
