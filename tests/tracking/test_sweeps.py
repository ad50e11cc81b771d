"""``python run.py -m ...`` sweeps as users type them (subprocesses, real Hydra, real MLflow
SQLite store): the parent run per experiment, the job records, the comparison table, and the
judge study's single-condition jobs analysed together."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from lmaudit.config.overrides import canonical, with_canonical_overrides
from lmaudit.errors import InputError
from lmaudit.pipeline import run

REPO = Path(__file__).resolve().parents[2]


def _sweep(tmp_path: Path, *overrides: str, mlflow: bool = True) -> subprocess.CompletedProcess[str]:
    args = [
        sys.executable,
        "run.py",
        "-m",
        *overrides,
        f"paths.results={tmp_path / 'results'}",
        f"paths.cache={tmp_path / 'cache'}",
        f"paths.mlruns={tmp_path / 'mlruns'}",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        "progress=false",
    ]
    if not mlflow:
        args.append("mlflow.enabled=false")
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=600)


def _runs(mlruns: Path) -> list[tuple[str, str, str, str | None]]:
    """(experiment, run name, kind tag, parent run id) of every run in the store."""
    con = sqlite3.connect(mlruns / "mlflow.db")
    rows = con.execute(
        "select e.name, r.name, r.run_uuid from runs r join experiments e on r.experiment_id = e.experiment_id"
    ).fetchall()
    tags = {(rid, k): v for rid, k, v in con.execute("select run_uuid, key, value from tags").fetchall()}
    con.close()
    return [
        (e, n, tags.get((rid, "lmaudit.kind"), ""), tags.get((rid, "mlflow.parentRunId")))
        for e, n, rid in rows
    ]


def test_a_judge_condition_sweep_selects_the_judge_study_and_combines_its_jobs(tmp_path, judge_cfg_repo):
    proc = _sweep(tmp_path, "judge/condition=P0,PA,PB,PAB", "model=sim_judge")
    assert proc.returncode == 0, proc.stderr[-3000:]
    sweep = tmp_path / "sweep"
    jobs = [json.loads(p.read_text()) for p in sorted((sweep / "jobs").glob("*.json"))]
    assert [j["overrides"][0] for j in jobs] == [f"judge/condition={c}" for c in ("P0", "PA", "PB", "PAB")]
    assert {j["study"] for j in jobs} == {"judge"} and {j["status"] for j in jobs} == {"COMPLETED"}
    for j in jobs:
        res = json.loads((Path(j["run_dir"]) / "results.json").read_text())
        assert res["conditions_analysed"] == [j["overrides"][0].split("=")[1]]

    combined = json.loads((sweep / "combined-judge/results.json").read_text())
    assert combined["conditions_analysed"] == ["P0", "PA", "PB", "PAB"]
    assert combined["classification"]["evaluable"]
    # independently: one job judging the four conditions together, in process, from scratch
    run(judge_cfg_repo("judge/condition=wrapper", f"paths.cache={tmp_path / 'fresh-cache'}", name="together"))
    together = json.loads((tmp_path / "together/results.json").read_text())
    for key in (
        "disagreement",
        "classification",
        "patterns",
        "conditions",
        "items",
        "model_wins",
        "validity",
    ):
        assert combined[key] == together[key], key

    # MLflow: one parent in the judge experiment (not the default study's), five nested runs
    runs = _runs(tmp_path / "mlruns")
    parents = [r for r in runs if r[2] == "sweep"]
    assert len(parents) == 1 and parents[0][0] == "lmaudit-judge"
    parent_id = json.loads((sweep / "mlflow_parents.json").read_text())["lmaudit-judge"]
    children = [r for r in runs if r[3] == parent_id]
    assert len(children) == 5 and {r[0] for r in children} == {"lmaudit-judge"}
    table = [ln for ln in (sweep / "comparison.md").read_text().splitlines() if ln.startswith("|")]
    assert "PA vs P0" in table[0] and len(table) == 2 + 5
    assert "P0,PA,PB,PAB" in next(line for line in table if "P0+PA+PB+PAB" in line)


def test_jobs_are_combined_within_each_design(tmp_path):
    proc = _sweep(tmp_path, "judge/condition=P0,PA", "study.k=1,2", "model=sim_judge", mlflow=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(list((tmp_path / "sweep/jobs").glob("*.json"))) == 4
    # two designs (k = 1 and k = 2), each combined on its own, never across
    ks = sorted(
        json.loads((tmp_path / f"sweep/combined-judge-{n}/results.json").read_text())["k"] for n in (1, 2)
    )
    assert ks == [1, 2] and not (tmp_path / "sweep/combined-judge").exists()


def test_a_failing_job_does_not_stop_the_sweep_and_the_sweep_says_so(tmp_path):
    proc = _sweep(tmp_path, "judge/condition=P0,PA", "study.k=1,0", "model=sim_judge")
    assert proc.returncode == 1
    assert (
        "2 of 4 jobs failed: [judge/condition=P0 study.k=0] config out of range: study.k = 0" in proc.stdout
    )
    jobs = [json.loads(p.read_text()) for p in sorted((tmp_path / "sweep/jobs").glob("*.json"))]
    status = {" ".join(j["overrides"][:2]): j["status"] for j in jobs}
    assert status == {
        "judge/condition=P0 study.k=1": "COMPLETED",
        "judge/condition=P0 study.k=0": "FAILED",
        "judge/condition=PA study.k=1": "COMPLETED",
        "judge/condition=PA study.k=0": "FAILED",
    }
    assert all("(allowed: >= 1)" in j["error"] for j in jobs if j["status"] == "FAILED")
    # the completed jobs were still combined and compared; the parent run was closed
    assert json.loads((tmp_path / "sweep/combined-judge/results.json").read_text())[
        "conditions_analysed"
    ] == [
        "P0",
        "PA",
    ]
    con = sqlite3.connect(tmp_path / "mlruns/mlflow.db")
    statuses = dict(con.execute("select name, status from runs").fetchall())
    con.close()
    assert {s for n, s in statuses.items() if n.startswith("sweep")} == {"FINISHED"}


def test_a_reused_sweep_directory_starts_clean(tmp_path):
    assert _sweep(tmp_path, "judge/condition=P0,PA", "model=sim_judge").returncode == 0
    first = json.loads((tmp_path / "sweep/mlflow_parents.json").read_text())
    proc = _sweep(tmp_path, "judge/condition=PB", "model=sim_judge")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(list((tmp_path / "sweep/jobs").glob("*.json"))) == 1  # the earlier records are gone
    assert json.loads((tmp_path / "sweep/mlflow_parents.json").read_text()) != first
    assert "together" not in proc.stdout


def test_a_reused_sweep_directory_keeps_what_lmaudit_did_not_write(tmp_path):
    """Only the earlier sweep's own records go; the user's files in jobs/ stay (and are not read
    as records); a parents file that is not lmaudit's is neither removed nor replaced: a job
    that would log its parent run there says so and is not logged."""
    assert _sweep(tmp_path, "judge/condition=P0,PA", "model=sim_judge", mlflow=False).returncode == 0
    jobs = tmp_path / "sweep/jobs"
    mine = {"submit.sh": "#!/bin/sh\nsbatch job.sh\n", "0007.json": '{"num": 7, "note": "mine"}\n'}
    for name, text in mine.items():
        (jobs / name).write_text(text)
    proc = _sweep(tmp_path, "judge/condition=PB", "model=sim_judge", mlflow=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert {p.name: p.read_text() for p in jobs.iterdir() if p.name in mine} == mine
    records = sorted(p.name for p in jobs.glob("*.json") if p.name not in mine)
    assert records == ["0000.json"]  # the new sweep's one job; the earlier two are gone
    assert "PB" in json.loads((jobs / "0000.json").read_text())["overrides"][0]
    parents = tmp_path / "sweep/mlflow_parents.json"
    parents.write_text('{"my experiment": "not a run id"}\n')
    proc = _sweep(tmp_path, "judge/condition=PA", "model=sim_judge")  # its job logs to MLflow
    # tracking never decides a run (README, "MLflow"): the job's results stand, and the warning
    # says what was not logged and why
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"{parents}: not a record of lmaudit's" in proc.stderr
    assert parents.read_text() == '{"my experiment": "not a run id"}\n'
    assert {p.name: p.read_text() for p in jobs.iterdir() if p.name in mine} == mine


def test_imported_results_split_by_condition_combine_to_the_seed_tables(tmp_path):
    seed = REPO / "tests/data/judge/seed_001"
    proc = _sweep(tmp_path, "judge/condition=P0,PA,PB,PAB", f"study.import_dir={seed}", mlflow=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    combined = json.loads((tmp_path / "sweep/combined-judge/results.json").read_text())
    one = subprocess.run(
        [
            sys.executable,
            "run.py",
            "judge/condition=wrapper",
            f"study.import_dir={seed}",
            "mlflow.enabled=false",
            f"out_dir={tmp_path / 'whole'}",
            "progress=false",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert one.returncode == 0, one.stderr[-3000:]
    whole = json.loads((tmp_path / "whole/results.json").read_text())
    for key in ("disagreement", "classification", "conditions", "items", "model_wins"):
        assert combined[key] == whole[key], key


def test_shared_context_jobs_are_not_combined(tmp_path):
    proc = _sweep(
        tmp_path, "judge/condition=P0,PA", "study.isolation=shared", "model=sim_judge", mlflow=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "not combined: shared-context jobs" in proc.stdout
    assert not (tmp_path / "sweep/combined-judge").exists()


def test_a_qq_sweep_nests_its_jobs_under_one_parent_run(tmp_path):
    proc = _sweep(tmp_path, "model=sim_projective,sim_repetition", "items=sim_demo")
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = _runs(tmp_path / "mlruns")
    parents = [r for r in runs if r[2] == "sweep"]
    assert len(parents) == 1 and parents[0][0] == "lmaudit-qq"
    parent_id = json.loads((tmp_path / "sweep/mlflow_parents.json").read_text())["lmaudit-qq"]
    job_dirs = [json.loads(p.read_text())["run_dir"] for p in (tmp_path / "sweep/jobs").glob("*.json")]
    assert sorted(r[1] for r in runs if r[3] == parent_id) == sorted(Path(d).name for d in job_dirs)
    assert len(job_dirs) == 2
    table = (tmp_path / "sweep/comparison.md").read_text()
    assert "SAT" in table and "G1" in table and "PA vs P0" not in table
    assert table.startswith("### qq") and "- **SAT**: items whose QQ equality holds" in table
    assert not list((tmp_path / "sweep").glob("combined-*"))  # the QQ study has nothing to combine
    # a job logged again later (`lmaudit log`) nests under the same parent run
    from lmaudit.console import main as lmaudit_main

    assert lmaudit_main(["log", job_dirs[0], "--again"]) == 0
    again = _runs(tmp_path / "mlruns")
    assert len(again) == len(runs) + 1 and [r for r in again if r[2] == "sweep"] == parents
    assert sum(r[3] == parent_id for r in again) == 3


def test_a_judge_group_without_a_study_implies_the_judge_study():
    assert with_canonical_overrides(["run.py", "-m", "judge/condition=P0,PA"]) == [
        "run.py",
        "-m",
        "study/judge/condition@study.condition=P0,PA",
        "study=judge",
    ]
    assert canonical(["judge.rubric.text=x"]) == (["study.rubric.text=x", "study=judge"], "judge")
    for argv in (["run.py"], ["run.py", "model=sim_judge"], ["run.py", "study=judge", "study.k=2"]):
        assert with_canonical_overrides(argv) == argv
    with pytest.raises(InputError, match="judge/condition selects the judge study, but study=qq was given"):
        canonical(["study=qq", "judge/condition=P0"])


def test_short_spellings_of_a_studys_groups_and_hints_for_another_studys():
    # the default study's groups by their own names, in choices and in field overrides
    args, study = canonical(["framing=track_p", "estimand.n=200", "-m", "mapping=map1,map2"])
    assert study == "qq"
    assert args == [
        "study/qq/framing@study.framing=track_p",
        "study.estimand.n=200",
        "-m",
        "study/qq/mapping@study.mapping=map1,map2",
    ]
    # Hydra's own spelling and the shared groups pass unchanged
    same = ["study/qq/items@study.items=pilot", "model=sim_projective", "study.epsilon=0.05", "stage=plan"]
    assert canonical(same) == (same, "qq")
    # a group of another study than the one selected: refused with the owner named
    with pytest.raises(InputError, match="'estimand' is a config group of the qq study, not of study=draws"):
        canonical(["study=draws", "estimand=sampled"])
    with pytest.raises(InputError, match="'condition' is a config group of the judge study"):
        canonical(["condition=P0"])


def test_a_judge_condition_with_another_study_is_refused(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "run.py",
            "study=qq",
            "judge/condition=P0",
            "stage=plan",
            f"out_dir={tmp_path / 'x'}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2
    assert "judge/condition selects the judge study, but study=qq was given" in proc.stderr
    assert not (tmp_path / "x").exists()


@pytest.fixture
def judge_cfg_repo(make_cfg):
    """The sim judge over the repository's demo candidates (what the subprocess sweep judged)."""

    def _make(*overrides: str, name: str = "run"):  # type: ignore[no-untyped-def]
        return make_cfg(
            "model=sim_judge",
            f"study.candidates_path={REPO / 'data/judge/demo/candidates.jsonl'}",
            f"study.mapping_path={REPO / 'data/judge/demo/mapping.json'}",
            "mlflow.enabled=false",
            *overrides,
            name=name,
        )

    return _make
