"""choir from inspect_ai logs: an ensemble measured with inspect (two mockllm models answering
planted free lists over several epochs) analysed like elicited lists; what the logs get wrong
is reported; a log without a recorded temperature is refused unless one is given."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from draws_interop_helpers import eval_inspect

from choir_quick import QUICK_CHOIR, typed_results
from lmaudit.errors import InputError
from lmaudit.pipeline import run

pytestmark = pytest.mark.usefixtures("inspect_env")

QUESTIONS = {"q1": "Name foods for a picnic.", "q2": "Name things to pack for a trip."}
# each model's planted favourites per question, most salient first; the rest are shared filler
FAVOURITES = {
    "alpha": {"q1": ["Apples", "Bread"], "q2": ["Passport", "Charger"]},
    "beta": {"q1": ["Cheese", "Grapes"], "q2": ["Sunscreen", "Hat"]},
}
FILLER = ["Water", "Napkins", "Blanket", "Snacks", "Juice", "Plates"]


def _answer(model: str, question: str, epoch: int) -> str:
    rng = random.Random(f"{model}|{question}|{epoch}")
    rest = rng.sample(FILLER, 4)
    items = FAVOURITES[model][question] + rest
    return "\n".join(f"{k}. {x}" for k, x in enumerate(items, start=1))


def _inspect(log_dir: Path, model: str, *, epochs: int = 4, **generate: Any) -> Path:
    def answer(model: str, sid: str, epoch: int) -> str:
        return _answer(model.split("/")[-1], sid, epoch)

    return eval_inspect(log_dir, model, QUESTIONS, answer, epochs=epochs, task_name="picnic", **generate)


SMALL = (
    "study=choir",
    *QUICK_CHOIR,
    "study.ranking.enabled=false",
)


def _choir(make_cfg: Any, path: Path, name: str, *extra: str) -> tuple[Path, dict[str, Any]]:
    cfg = make_cfg(*SMALL, f"study.import_path={path}", *extra, name=name)
    run(cfg)
    out = Path(cfg.out_dir)
    return out, typed_results(out / "results.json")


def test_an_inspect_ensemble_is_analysed_as_free_lists(make_cfg, tmp_path) -> None:
    logs = tmp_path / "logs"
    _inspect(logs, "mockllm/alpha", temperature=0.7)
    _inspect(logs, "mockllm/beta", temperature=0.7)
    out, res = _choir(make_cfg, logs, "ens")
    d = res["design"]
    assert d["models"] == ["mockllm/alpha", "mockllm/beta"] and d["lists"] == 2 * 2 * 4
    assert d["conditions"] == ["picnic"]
    rows = [json.loads(x) for x in (out / "measurements.jsonl").read_text().splitlines()]
    lists = [r for r in rows if r["kind"] == "list"]
    assert {r["temperature"] for r in lists} == {0.7}
    assert sorted({r["generation"] for r in lists}) == [0, 1, 2, 3]
    # the planted favourites lead each member's salience ranking, question by question
    for q in ("picnic/q1", "picnic/q2"):
        top = res["questions"][q]["top_concepts"]
        label_of = {  # a phrase's concept, named by its label, from the recorded codebook
            phrase: c["label"] for c in res["questions"][q]["salience"]["codebook"] for phrase in c["phrases"]
        }
        for model, fav in FAVOURITES.items():
            want = [label_of[x] for x in fav[q.split("/")[1]]]
            assert top[f"mockllm/{model}"][: len(dict.fromkeys(want))] == list(dict.fromkeys(want))
    # the vocabulary of echo comes from the samples' input texts
    vocab = {r["question"]: r["terms"] for r in rows if r["kind"] == "vocabulary"}
    assert "picnic" in vocab["picnic/q1"]
    audit = res["log_audit"]
    assert [f["family"] for f in audit["files"]] == ["mockllm/alpha", "mockllm/beta"]
    assert audit["n_excluded"] == 0 and audit["issues"] == []
    assert "The imported logs" in (out / "report.html").read_text()


def test_cache_copies_are_left_out_and_reported(make_cfg, tmp_path) -> None:
    from inspect_ai.model import CachePolicy

    logs = tmp_path / "logs"
    # one answer per sample, served to every epoch from inspect's cache on the second run
    policy = CachePolicy(per_epoch=False)
    first = _inspect(tmp_path / "warm", "mockllm/alpha", temperature=1.0, cache=policy)
    assert first.exists()
    _inspect(logs, "mockllm/alpha", temperature=1.0, cache=policy)
    _inspect(logs, "mockllm/beta", temperature=1.0)
    out, res = _choir(make_cfg, logs, "cached")
    audit = res["log_audit"]
    copies = audit["families"]["mockllm/alpha"]["issues"]
    assert copies.get("cache_copies", 0) == 2 * 4  # every epoch of both samples read from the cache
    assert res["design"]["models"] == ["mockllm/beta"] and res["design"]["lists"] == 2 * 4
    report = (out / "report.html").read_text()
    assert "not independent draws" in report and "left out of the lists" in report


def test_temperature_must_be_known(make_cfg, tmp_path) -> None:
    logs = tmp_path / "logs"
    _inspect(logs, "mockllm/alpha", epochs=2)
    _inspect(logs, "mockllm/beta", epochs=2)
    with pytest.raises(InputError, match=r"records no temperature.*study\.import_temperature"):
        _choir(make_cfg, logs, "no-t")
    out, res = _choir(make_cfg, logs, "given-t", "study.import_temperature=1.0")
    assert list(res["conditions"]["R_q"]) == ["picnic@1"]  # the one cell, at the temperature given
    rows = [json.loads(x) for x in (out / "measurements.jsonl").read_text().splitlines()]
    assert {r["temperature"] for r in rows if r["kind"] == "list"} == {1.0}


def test_forced_format_and_other_logs_are_refused(make_cfg, tmp_path) -> None:
    jsonl = tmp_path / "lists.jsonl"
    jsonl.write_text(json.dumps({"doc_id": 0, "resps": [["a"]]}) + "\n")
    with pytest.raises(InputError, match="lm-eval samples file, not an inspect_ai log"):
        _choir(make_cfg, jsonl, "lm")
    log = _inspect(tmp_path / "logs", "mockllm/alpha", epochs=2, temperature=0.5)
    with pytest.raises(InputError):  # forced to choir's own JSONL: an .eval zip is not JSONL
        _choir(make_cfg, log, "forced", "study.import_format=lmaudit")
