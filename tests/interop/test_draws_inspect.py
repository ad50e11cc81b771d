"""The draws study on inspect_ai logs: real inspect runs (its ``mockllm`` provider answering
planted sequences), then the whole pipeline (plan -> measure -> analyze -> report -> MLflow)."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest
from draws_interop_helpers import (
    mlflow_metrics,
    mlflow_tags,
    planted,
    rows,
    run_draws,
    run_inspect,
)

from lmaudit.pipeline import run
from lmaudit.provenance.digest import file_sha256
from lmaudit.provenance.io import InputError

pytest.importorskip("inspect_ai")
pytestmark = pytest.mark.usefixtures("inspect_env")

N_SAMPLES, EPOCHS = 30, 8


def _sequences(seed: int, rho: float) -> dict[str, list[str]]:
    rng = random.Random(seed)
    return {f"s{i:02d}": planted(rng, EPOCHS, rho) for i in range(N_SAMPLES)}


def test_planted_persistence_is_recovered_from_a_log_dir(make_cfg, tmp_path) -> None:
    logs = tmp_path / "logs"
    sticky, fresh = _sequences(1, rho=0.7), _sequences(2, rho=0.0)
    run_inspect(logs, "mockllm/sticky", sticky, epochs=EPOCHS, temperature=1.0)
    run_inspect(logs / "more", "mockllm/fresh", fresh, epochs=EPOCHS, temperature=1.0, log_format="json")
    out, res = run_draws(make_cfg, logs, "dir", "mlflow.enabled=true")

    assert res["mode"] == "import" and sorted(res["families"]) == ["mockllm/fresh", "mockllm/sticky"]
    s, f = res["families"]["mockllm/sticky"], res["families"]["mockllm/fresh"]
    assert s["reject"] and s["holm_p"] < 0.01 and s["rho_hat"] > 0.3
    assert not f["reject"] and f["p"] > 0.05
    assert s["n_sequences"] == f["n_sequences"] == N_SAMPLES and s["n_draws"] == N_SAMPLES * EPOCHS

    # each sequence is the sample's answers in epoch order, normalised by study.normalise
    seq = {(r["family"], r["probe"]): r for r in rows(out) if r["kind"] == "sequence"}
    row = seq[("mockllm/sticky", "colours/s03")]
    assert row["draws"] == sticky["s03"] and row["raw"] == [f"{c.capitalize()}." for c in sticky["s03"]]
    assert row["condition"] == "colours" and row["meta"]["positions"] == list(range(1, EPOCHS + 1))
    assert set(res["data"]["families"]) == {r["family"] for r in rows(out) if r["kind"] == "log_audit"}

    audit = res["log_audit"]
    assert audit["format"] == "inspect" and audit["totals"] == {} and audit["n_excluded"] == 0
    assert audit["families"]["mockllm/sticky"]["temperature"] == ["1"]
    assert res["normalise"]["kind"] == "first_word"

    # the plan digests every log read
    plan = json.loads((out / "plan.json").read_text())
    files = sorted(p for p in logs.rglob("*") if p.suffix in (".eval", ".json"))
    assert plan["inputs"]["import"]["format"] == "inspect"
    assert [(f["path"], f["sha256"]) for f in plan["inputs"]["import"]["files"]] == [
        (p.relative_to(logs).as_posix(), file_sha256(p)) for p in files
    ]
    assert "import_format" not in plan["config"]["study"]
    html = (out / "report.html").read_text()
    assert "The imported logs" in html and "Import format" in html
    metrics = mlflow_metrics(tmp_path)
    assert metrics["mockllm/sticky.holm_p"] < 0.01 and metrics["log_audit.n_files"] == 2.0


def test_reanalysing_the_measurements_reproduces_the_results(make_cfg, tmp_path) -> None:
    log = run_inspect(tmp_path / "logs", "mockllm/sticky", _sequences(3, 0.5), epochs=EPOCHS, temperature=0.8)
    out, _ = run_draws(make_cfg, log, "first", "mlflow.enabled=false")
    again = make_cfg("study=draws", "stage=analyze", f"measurements={out / 'measurements.jsonl'}",
                     "study.permutations=999", "study.sims_per_step=100", "mlflow.enabled=false", name="again")  # fmt: skip
    run(again)
    assert (tmp_path / "again" / "results.json").read_bytes() == (out / "results.json").read_bytes()


def test_epochs_served_from_the_cache_are_excluded_and_counted(make_cfg, tmp_path) -> None:
    from inspect_ai.model import CachePolicy

    seqs = _sequences(4, rho=0.0)
    # the same prompt every epoch, a cache shared across epochs: epochs 2.. read epoch 1's answer
    log = run_inspect(
        tmp_path / "logs",
        "mockllm/cached",
        seqs,
        epochs=EPOCHS,
        mark_epoch=False,
        temperature=1.0,
        cache=CachePolicy(per_epoch=False),
    )
    out, res = run_draws(make_cfg, log, "cached", "mlflow.enabled=true")
    audit = res["log_audit"]
    copies = N_SAMPLES * (EPOCHS - 1)
    assert audit["totals"]["cache_copies"] == copies and audit["n_excluded"] == copies
    assert audit["totals"]["cache_shared_across_epochs"] == 1
    fam = res["families"]["mockllm/cached"]
    assert fam["n_draws"] == N_SAMPLES and fam["n_informative"] == 0  # one real draw per sample
    row = next(r for r in rows(out) if r["kind"] == "sequence" and r["probe"] == "colours/s00")
    assert row["draws"] == [seqs["s00"][0]] and row["meta"]["positions"] == [1]
    assert [(e["position"], e["why"]) for e in row["meta"]["excluded"]] == [
        (e, "cache_read") for e in range(2, 9)
    ]
    html = (out / "report.html").read_text()
    # the answer leads with the copies (stated once: no alert repeats them), then what is left
    answer = html[html.index('id="answer"') : html.index("</section>")]
    read = N_SAMPLES * EPOCHS
    assert f"{copies} of {read} draws in the imported logs are cache copies" in answer
    assert answer.index("cache copies") < answer.index("No sequence left has two different answers")
    assert "cache_copies" in html and "answer(s) in the imported logs are not independent" not in html
    assert mlflow_metrics(tmp_path)["log_audit.cache_copies"] == copies


def test_a_shared_cache_without_model_events_presumes_copies(make_cfg, tmp_path) -> None:
    from inspect_ai.log import read_eval_log, write_eval_log
    from inspect_ai.model import CachePolicy

    seqs = _sequences(10, rho=0.0)
    log = run_inspect(tmp_path / "logs", "mockllm/thin", seqs, epochs=4, cache=CachePolicy(per_epoch=False))
    full = read_eval_log(str(log))
    for sample in full.samples or []:
        sample.events = []  # a log saved without its transcripts
    thin = tmp_path / "stripped" / log.name
    thin.parent.mkdir()
    write_eval_log(full, str(thin))
    _, res = run_draws(make_cfg, thin, "thin", "mlflow.enabled=false")
    totals = res["log_audit"]["totals"]
    assert totals["presumed_cache_copies"] == N_SAMPLES * 3 and totals["no_model_events"] == N_SAMPLES * 4
    assert "cache_copies" not in totals and res["families"]["mockllm/thin"]["n_draws"] == N_SAMPLES


def test_a_fixed_seed_and_temperature_zero_are_flagged(make_cfg, tmp_path) -> None:
    log = run_inspect(
        tmp_path / "logs", "mockllm/greedy", _sequences(5, 0.0), epochs=4, temperature=0.0, seed=11
    )
    out, res = run_draws(make_cfg, log, "greedy", "mlflow.enabled=true")
    audit = res["log_audit"]
    assert audit["totals"]["same_seed"] == N_SAMPLES * 4 and audit["totals"]["greedy"] == N_SAMPLES * 4
    assert audit["greedy_families"] == ["mockllm/greedy"]
    assert audit["families"]["mockllm/greedy"]["temperature"] == ["0"]
    (src,) = audit["files"]
    assert src["facts"]["seed"] == [11] and src["facts"]["status"] == "success"
    html = (out / "report.html").read_text()
    assert "mockllm/greedy was generated greedily" in html and "same seed (11)" in html
    assert mlflow_metrics(tmp_path)["log_audit.n_greedy_families"] == 1.0
    assert mlflow_tags(tmp_path)["log_audit.greedy_families"] == "mockllm/greedy"


def test_a_log_with_independent_settings_raises_no_issue(make_cfg, tmp_path) -> None:
    log = run_inspect(tmp_path / "logs", "mockllm/plain", _sequences(6, 0.0), epochs=3, temperature=0.7)
    _, res = run_draws(make_cfg, log, "plain", "mlflow.enabled=false")
    assert res["log_audit"]["issues"] == [] and res["log_audit"]["greedy_families"] == []


def test_a_json_file_of_neither_format_is_refused(make_cfg, tmp_path) -> None:
    bad = tmp_path / "other.json"
    bad.write_text(json.dumps({"name": "x", "scores": [1, 2]}, indent=2))
    with pytest.raises(
        InputError, match=r"other\.json: not a draws import: found a JSON object whose first field is 'name'"
    ):
        run_draws(make_cfg, bad, "bad", "mlflow.enabled=false")
    assert not (tmp_path / "bad").exists()  # refused before anything was written


def test_a_forced_format_refuses_a_file_of_another(make_cfg, tmp_path) -> None:
    log = run_inspect(tmp_path / "logs", "mockllm/x", _sequences(7, 0.0), epochs=2)
    with pytest.raises(InputError, match=r"study\.import_format=lm_eval, but the file is an inspect_ai log"):
        run_draws(make_cfg, log, "forced", "study.import_format=lm_eval", "mlflow.enabled=false")
    with pytest.raises(InputError, match=r"study\.import_format=lmaudit, but the file is an inspect_ai log"):
        run_draws(make_cfg, log, "forced2", "study.import_format=lmaudit", "mlflow.enabled=false")


def test_without_inspect_ai_the_error_says_what_to_install(
    inspect_env, make_cfg, tmp_path, monkeypatch
) -> None:
    log = run_inspect(tmp_path / "logs", "mockllm/x", _sequences(8, 0.0), epochs=2)
    for name in [m for m in sys.modules if m == "inspect_ai" or m.startswith("inspect_ai.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "inspect_ai", None)  # import inspect_ai now fails
    with pytest.raises(InputError) as err:
        run_draws(make_cfg, log, "missing", "mlflow.enabled=false")
    assert "\n" not in str(err.value) and "pip install 'lmaudit[interop]'" in str(err.value)
    assert str(err.value).startswith(str(log))


def test_lmaudit_jsonl_is_read_as_before(make_cfg, tmp_path) -> None:
    example = Path(__file__).resolve().parents[2] / "data/draws/example_import.jsonl"
    out, res = run_draws(make_cfg, example, "auto", "mlflow.enabled=false")
    forced, _ = run_draws(make_cfg, example, "forced", "study.import_format=lmaudit", "mlflow.enabled=false")
    assert (out / "results.json").read_bytes() == (forced / "results.json").read_bytes()
    assert "log_audit" not in res and res["normalise"] is None
    assert set(json.loads((out / "plan.json").read_text())["inputs"]["import"]) == {"path", "sha256"}
    assert all(r["kind"] == "sequence" for r in rows(out))  # no audit rows


def test_the_open_seed_registration_scores_an_inspect_log(make_cfg, tmp_path) -> None:
    log = run_inspect(tmp_path / "logs", "mockllm/sticky", _sequences(9, 0.6), epochs=EPOCHS, temperature=1.0)
    run(make_cfg("prereg=draws_seed", f"study.import_path={log}", "mlflow.enabled=false", name="reg"))
    res = json.loads((tmp_path / "reg" / "results.json").read_text())
    plan = json.loads((tmp_path / "reg" / "plan.json").read_text())
    assert res["families"]["mockllm/sticky"]["reject"] and res["log_audit"]["format"] == "inspect"
    assert [p["id"] for p in res["predictions"]] == ["P1", "P2", "P3", "P4"]
    scored = res["prereg"]["data_scored"]["plan_inputs"]["import"]  # the log scored, every file digested
    assert scored == plan["inputs"]["import"] and scored["files"][0]["sha256"] == file_sha256(log)


def test_a_malformed_log_audit_row_is_refused_naming_the_record(make_cfg, tmp_path) -> None:
    m = tmp_path / "m.jsonl"
    seq = {
        "kind": "sequence",
        "family": "f",
        "source": "s",
        "condition": "c",
        "probe": "p",
        "draws": ["a", "b"],
    }
    audit = {"kind": "log_audit", "format": "inspect", "family": "f", "source": "s", "files": ["x.eval"]}
    m.write_text(json.dumps(seq) + "\n" + json.dumps(audit) + "\n")
    cfg = make_cfg("study=draws", "stage=analyze", f"measurements={m}", "mlflow.enabled=false", name="m")
    with pytest.raises(InputError, match=r"record 2: field 'issues' of a log_audit row must be a dict"):
        run(cfg)
