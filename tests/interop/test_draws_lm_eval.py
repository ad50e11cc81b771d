"""The draws study on lm-evaluation-harness samples files: real lm-eval runs (a task over a local
JSONL file, a model registered through lm-eval's ``register_model`` answering planted
sequences), written as ``lm_eval --output_path ... --log_samples`` writes them, then the whole
pipeline."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from draws_interop_helpers import mlflow_metrics, planted, rows, run_draws

from lmaudit.errors import InputError

pytest.importorskip("lm_eval")

from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

N_DOCS, REPEATS = 30, 8


@register_model("lmaudit-planted")
class PlantedLM(LM):
    """Answers doc ``i`` with ``table[i]``: the k-th request for a doc gets its k-th answer."""

    def __init__(self, pretrained: str, table: str, **_: Any) -> None:
        super().__init__()
        self.table = json.loads(Path(table).read_text())
        self.asked: dict[str, int] = {}

    @classmethod
    def create_from_arg_string(cls, arg_string: str, additional_config: dict | None = None) -> PlantedLM:
        from lm_eval.utils import simple_parse_args_string

        return cls(**simple_parse_args_string(arg_string))

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        out = []
        for req in requests:
            doc = req.args[0].split("item ")[1].split(":")[0]
            k = self.asked[doc] = self.asked.get(doc, -1) + 1
            out.append(" " + self.table[doc][k % len(self.table[doc])].capitalize())
        return out

    def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False) -> list[Any]:
        raise NotImplementedError

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[Any]:
        raise NotImplementedError


def _task(folder: Path, gen_kwargs: dict[str, Any], metric_kwargs: dict[str, Any] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "items.jsonl"
    data.write_text(
        "".join(json.dumps({"q": f"Name a colour, item {i:02d}", "a": "red"}) + "\n" for i in range(N_DOCS))
    )
    spec = {
        "task": "colours",
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(data)}, "cache_dir": str(folder / "hf-datasets")},
        "test_split": "test",
        "output_type": "generate_until",
        "doc_to_text": "{{q}}:",
        "doc_to_target": "{{a}}",
        "repeats": REPEATS,
        "generation_kwargs": {"until": ["\n"], **gen_kwargs},
        "filter_list": [
            {"name": "first", "filter": [{"function": "take_first"}]},
            {"name": "vote", "filter": [{"function": "majority_vote"}, {"function": "take_first"}]},
        ],
        "metric_list": [
            {
                "metric": "exact_match",
                "aggregation": "mean",
                "higher_is_better": True,
                **(metric_kwargs or {}),
            }
        ],
    }
    (folder / "colours.yaml").write_text(json.dumps(spec))  # YAML is a superset of JSON
    return folder


def run_lm_eval(
    tmp: Path,
    name: str,
    table: dict[str, list[str]],
    out: Path,
    *,
    do_sample: bool = True,
    metric_kwargs: dict[str, Any] | None = None,
    **kw: Any,
) -> Path:
    """One ``lm_eval --log_samples`` run of the planted model; returns its samples file."""
    from lm_eval import simple_evaluate
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    task_dir = _task(
        tmp / f"task-{name}",
        {"do_sample": do_sample, **({"temperature": 1.0} if do_sample else {})},
        metric_kwargs,
    )
    table_file = task_dir / "table.json"
    table_file.write_text(json.dumps(table))
    tracker = EvaluationTracker(output_path=str(out))
    results = simple_evaluate(
        model="lmaudit-planted",
        model_args=f"pretrained={name},table={table_file}",
        tasks=["colours"],
        task_manager=TaskManager(include_path=str(task_dir)),
        log_samples=True,
        evaluation_tracker=tracker,
        **kw,
    )
    assert results is not None
    samples = results.pop("samples")
    tracker.save_results_aggregated(results=results, samples=samples)
    for task in results["configs"]:
        tracker.save_results_samples(task_name=task, samples=samples[task])
    (path,) = (out / name).glob("samples_colours_*.jsonl")
    return path


def _table(seed: int, rho: float) -> dict[str, list[str]]:
    rng = random.Random(seed)
    return {f"{i:02d}": planted(rng, REPEATS, rho) for i in range(N_DOCS)}


def test_planted_persistence_is_recovered_from_an_output_folder(make_cfg, tmp_path) -> None:
    out_dir = tmp_path / "lm-eval-out"
    sticky = run_lm_eval(tmp_path, "planted-sticky", _table(1, 0.7), out_dir)
    run_lm_eval(tmp_path, "planted-fresh", _table(2, 0.0), out_dir)
    out, res = run_draws(make_cfg, out_dir, "folder", "mlflow.enabled=true")

    s, f = res["families"]["planted-sticky"], res["families"]["planted-fresh"]
    assert s["reject"] and s["holm_p"] < 0.01 and s["rho_hat"] > 0.3
    assert not f["reject"] and f["p"] > 0.05
    assert s["n_sequences"] == N_DOCS and s["n_draws"] == N_DOCS * REPEATS

    # one line per doc and filter in the file; one sequence per doc in the rows, in resps order
    lines = [json.loads(x) for x in sticky.read_text().splitlines()]
    assert len(lines) == 2 * N_DOCS
    seq = {r["probe"]: r for r in rows(out) if r["kind"] == "sequence" and r["family"] == "planted-sticky"}
    first = lines[0]
    assert seq[first["doc_hash"]]["draws"] == _table(1, 0.7)[f"{first['doc_id']:02d}"]
    assert seq[first["doc_hash"]]["raw"] == first["resps"][0]

    audit = res["log_audit"]
    assert audit["format"] == "lm_eval" and audit["totals"] == {"filter_duplicates": 2 * N_DOCS}
    assert audit["families"]["planted-sticky"]["temperature"] == ["1"] and audit["greedy_families"] == []
    src = next(x for x in audit["files"] if x["family"] == "planted-sticky")
    assert src["source"].startswith("results_") and src["files"][0] == f"planted-sticky/{sticky.name}"
    plan = json.loads((out / "plan.json").read_text())
    assert len(plan["inputs"]["import"]["files"]) == 4  # two samples files, each with its results file
    assert mlflow_metrics(tmp_path)["log_audit.filter_duplicates"] == 2 * N_DOCS
    assert "filter_duplicates" in (out / "report.html").read_text()


def test_repeats_without_do_sample_served_from_the_cache_are_flagged(make_cfg, tmp_path) -> None:
    cache = str(tmp_path / "lm-cache" / "cache")
    table = _table(3, 0.0)
    run_lm_eval(tmp_path, "planted-greedy", table, tmp_path / "first", do_sample=False, use_cache=cache)
    again = run_lm_eval(
        tmp_path, "planted-greedy", table, tmp_path / "again", do_sample=False, use_cache=cache
    )
    out, res = run_draws(make_cfg, again, "greedy", "mlflow.enabled=false")

    fam = res["families"]["planted-greedy"]
    assert fam["n_informative"] == 0  # every repeat is the one cached answer
    audit = res["log_audit"]
    assert audit["totals"]["no_do_sample"] == N_DOCS and audit["greedy_families"] == ["planted-greedy"]
    issue = next(i for i in audit["issues"] if i["issue"] == "no_do_sample")
    assert "served from lm-eval's cache" in issue["detail"]
    html = (out / "report.html").read_text()
    assert "planted-greedy was generated greedily" in html


def test_a_samples_file_without_its_results_file_is_flagged_unidentified(make_cfg, tmp_path) -> None:
    samples = run_lm_eval(tmp_path, "planted-x", _table(4, 0.0), tmp_path / "out")
    alone = tmp_path / "copied" / samples.name
    alone.parent.mkdir()
    shutil.copy(samples, alone)
    _, res = run_draws(make_cfg, alone, "alone", "mlflow.enabled=false")
    assert list(res["families"]) == ["unidentified:copied"]  # analysed, under a name that says so
    assert res["log_audit"]["unidentified_families"] == ["unidentified:copied"]
    issue = next(i for i in res["log_audit"]["issues"] if i["issue"] == "unidentified_model")
    assert "no results file beside it" in issue["detail"]


def test_a_forced_format_refuses_an_lm_eval_file(make_cfg, tmp_path) -> None:
    samples = run_lm_eval(tmp_path, "planted-y", _table(5, 0.0), tmp_path / "out")
    with pytest.raises(
        InputError, match=r"study\.import_format=inspect, but the file is an lm-eval samples file"
    ):
        run_draws(make_cfg, samples, "forced", "study.import_format=inspect", "mlflow.enabled=false")
    (results,) = samples.parent.glob("results_*.json")
    with pytest.raises(
        InputError, match=r"found an lm-eval results file .*pass the samples_<task>_<date>\.jsonl"
    ):
        run_draws(make_cfg, results, "results", "mlflow.enabled=false")
    assert not (tmp_path / "forced").exists() and not (tmp_path / "results").exists()


def test_error_bars_of_an_lm_eval_run_are_over_docs(make_cfg, tmp_path) -> None:
    # lm-eval's filter reduces a doc's repeats to one answer and scores it once: one score per
    # doc, so the clustered and the naive standard errors coincide (design effect 1)
    table = {
        d: ["red" if i % 3 else "blue", *answers[1:]] for i, (d, answers) in enumerate(_table(6, 0.5).items())
    }
    # the planted model answers " Red": compared without case and the leading space
    match = {"ignore_case": True, "regexes_to_ignore": ["^ "]}
    samples = run_lm_eval(tmp_path, "planted-scored", table, tmp_path / "out", metric_kwargs=match)
    _, res = run_draws(make_cfg, samples, "scored", "mlflow.enabled=false")
    e = res["error_bars"]["planted-scored"]["colours"]
    (results_file,) = samples.parent.glob("results_*.json")
    reported = json.loads(results_file.read_text())["results"]["colours"]
    first = {}
    for line in samples.read_text().splitlines():
        obj = json.loads(line)
        if obj["filter"] == "first":
            first[obj["doc_id"]] = float(obj["exact_match"])
    acc = sum(first.values()) / N_DOCS
    assert (e["n"], e["clusters"], e["scorer"], e["binary"]) == (N_DOCS, N_DOCS, "exact_match,first", True)
    assert e["accuracy"] == pytest.approx(acc, abs=1e-12) == pytest.approx(reported["exact_match,first"])
    assert 0 < acc < 1
    assert e["se_clustered"] == pytest.approx(e["se_naive"], rel=1e-12)
    assert e["design_effect"] == pytest.approx(1.0, rel=1e-12) and e["icc"] is None
    assert e["log_stderr"] == pytest.approx(reported["exact_match_stderr,first"], abs=1e-12)
    assert e["logs"][0]["over"] == "docs" and e["logs"][0]["reducer"] == "first"
