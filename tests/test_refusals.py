"""A draw the server answers without an answer (content null, finish_reason "content_filter",
as hosted APIs answer a refusal) is recorded as a refusal, counted in results.json, the report,
the audit record and MLflow, and never cached: the next run asks it again. Runs the whole
pipeline against the stub server of tests/conftest.py."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from choir_quick import QUICK_CHOIR, typed_results
from lmaudit.pipeline import run
from stub_server import STUB_TEMPLATE, stub_model_args

REPO = Path(__file__).resolve().parents[1]


def _refused_seed(body: dict[str, Any]) -> bool:
    return int(body["seed"]) % 5 == 0  # a fixed, seed-determined share of the draws


def _rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "measurements.jsonl").read_text().splitlines()]


def test_draws_counts_refused_sequences_and_asks_them_again(openai_stub, make_cfg, tmp_path):
    state, url = openai_stub
    state.refuse = _refused_seed
    args = (
        "study=draws",
        *stub_model_args(url),
        "study.permutations=199",
        "study.sims_per_step=50",
        f"study.probes_path={REPO / 'data/draws/probes.jsonl'}",
    )
    run(make_cfg(*args, name="first"))
    out = tmp_path / "first"
    rows = _rows(out)
    refused = [r for r in rows if r["kind"] == "refused"]
    n_draws = sum(1 for r in refused for x in r["refusals"] if x is not None)
    assert refused and len(refused) < len(rows) and n_draws >= len(refused)
    assert all(x in (None, "content_filter") for r in refused for x in r["refusals"])
    res = json.loads((out / "results.json").read_text())
    assert res["data"]["refused"] == {
        "sequences": len(refused),
        "draws": n_draws,
        "reasons": {"content_filter": n_draws},
    }
    assert res["data"]["analysed_sequences"] == len(rows) - len(refused)
    assert (
        f"The server refused {n_draws} draw(s) in {len(refused)} sequence(s)"
        in (out / "report.html").read_text()
    )
    audit = json.loads((out / "audit_record.json").read_text())
    assert audit["measure"]["refused_draws"] == {"content_filter": n_draws}
    con = sqlite3.connect(tmp_path / "mlruns" / "mlflow.db")
    metrics = dict(con.execute("select key, value from metrics").fetchall())
    assert metrics["n_refused"] == len(refused)

    # the server answers now: the refused sequences are asked again (whole: a request's draws
    # go together), their draws answered before are kept as cached, the rest comes from the cache
    state.refuse = None
    posts = state.posts
    run(make_cfg(*args, name="second"))
    assert state.posts - posts == sum(len(r["refusals"]) for r in refused)
    res = json.loads((tmp_path / "second" / "results.json").read_text())
    assert res["data"]["refused"]["sequences"] == 0 and res["data"]["analysed_sequences"] == len(rows)
    state.posts = 0
    run(make_cfg(*args, name="third"))  # now all from the cache, as the second run saw it
    assert state.posts == 0
    assert _rows(tmp_path / "third") == _rows(tmp_path / "second")


def test_choir_counts_refused_lists_and_never_reads_them_as_empty(openai_stub, make_cfg, tmp_path):
    state, url = openai_stub
    state.refuse = _refused_seed
    served = (
        f"{{backend: openai, name: served, base_url: '{url}', model: toy, chat_template: '{STUB_TEMPLATE}'}}"
    )
    sim = "{backend: sim, name: s1, agent: freelist, params: {signature: 1}}"
    run(
        make_cfg(
            "study=choir",
            f"study.ensemble.members=[{served}, {sim}]",
            "study.question_ids=[H001,H002]",
            "study.templates=[A]",
            "study.personas=[archivist]",
            "study.temperatures=[1.0]",
            "study.generations=10",
            *QUICK_CHOIR,
            "mlflow.enabled=false",
            name="choir",
        )
    )
    out = tmp_path / "choir"
    rows = _rows(out)
    refused = [r for r in rows if r["kind"] == "refused_list"]
    lists = [r for r in rows if r["kind"] == "list"]
    assert refused and all(r["model"] == "served" and r["refusal"] == "content_filter" for r in refused)
    served_lists = [r for r in lists if r["model"] == "served"]
    # every generation the sim member made, the served one either answered or refused, once
    assert len(served_lists) + len(refused) == sum(1 for r in lists if r["model"] == "s1")
    assert all(r["raw"] == "A" for r in served_lists)  # only the stub's real answers became lists
    res = typed_results(out / "results.json")
    assert res["design"]["refused_lists"] == {"n": len(refused), "reasons": {"content_filter": len(refused)}}
    assert res["design"]["lists"] == len(lists)
    assert f"The server refused {len(refused)} generation(s)" in (out / "report.html").read_text()
