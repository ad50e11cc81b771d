"""The DVC pipeline on a fresh copy of the repository: inputs restored from the in-repo store,
only dependent stages re-run, frozen plans enforced, push/pull to a local remote."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SIM_TARGETS = [
    "report@qq_sim_demo",
    "report@qq_sim_mixture",
    "report@judge_sim_attraction_v2",
    "report@draws_sim_persistent",
]
SIM_RUNS = [
    ("qq", "qq_sim_demo"),
    ("qq", "qq_sim_mixture"),
    ("judge", "judge_sim_attraction_v2"),
    ("draws", "draws_sim_persistent"),
]


def sh(*cmd: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, timeout=900)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """A fresh repository holding what git holds here (working tree, so uncommitted edits count)."""
    dst = tmp_path_factory.mktemp("dvc") / "repo"
    files = sh("git", "ls-files", "-co", "--exclude-standard", cwd=REPO).stdout.splitlines()
    for f in files:
        if f.startswith("dvc-store/"):
            continue  # the in-repo store is read in place (it holds every registered run's outputs)
        src = REPO / f
        if src.is_file():
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / f)
    assert not (dst / "data").exists()  # the inputs are DVC-tracked, not in git
    sh("git", "init", "-q", cwd=dst)
    sh("dvc", "remote", "modify", "--local", "store", "url", str(REPO / "dvc-store"), cwd=dst)
    sh("git", "add", "-A", cwd=dst)
    sh("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "clone", cwd=dst)
    sh("dvc", "pull", "-q", "data.dvc", cwd=dst)  # from the in-repo remote: no network needed
    assert (dst / "data/qq/items/pilot.json").exists()
    sh("dvc", "repro", *SIM_TARGETS, cwd=dst)
    return dst


def _ran(output: str) -> set[str]:
    return {line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage '")}


def test_repro_builds_every_run_file(clone):
    for study, run in SIM_RUNS:
        out = clone / "results" / study / run
        for f in (
            "plan.json",
            "measurements.jsonl",
            "results.json",
            "metrics.json",
            "report.html",
            "audit_record.json",
        ):
            assert (out / f).exists(), (run, f)
        assert list((out / "plots").glob("*.csv")), run
    assert (clone / "results/qq/qq_sim_demo/plots/distance_cdf.csv").exists()
    # the judge registration is verified and scored inside DVC's run
    judged = json.loads((clone / "results/judge/judge_sim_attraction_v2/results.json").read_text())
    assert judged["prereg"]["name"] == "judge_sim_attraction_v2"
    assert [(p["id"], p["outcome"]) for p in judged["predictions"]] == [
        (f"P{i}", "held") for i in range(1, 6)
    ]
    lock = (clone / "dvc.lock").read_text()
    assert "measure@qq_sim_mixture" in lock and "md5" in lock
    status = sh("dvc", "status", *SIM_TARGETS, cwd=clone).stdout
    assert "changed" not in status
    metrics = sh("dvc", "metrics", "show", cwd=clone).stdout
    assert "n_violated" in metrics


def test_metrics_show_prints_a_few_readable_numbers_per_run(clone):
    """Each registered run's metrics.json is flat and small: `dvc metrics show` for one study
    fits a terminal, and its numbers are the run's own (counted here from results.json)."""
    for study, run in SIM_RUNS:
        out = clone / "results" / study / run
        metrics = json.loads((out / "metrics.json").read_text())
        results = json.loads((out / "results.json").read_text())
        assert all(isinstance(v, int | float) for v in metrics.values()), (run, metrics)
        assert len(metrics) <= 7, (run, sorted(metrics))
        predictions = results.get("predictions") or []
        if predictions:
            assert metrics["predictions"] == len(predictions)
            assert metrics["held"] == sum(p["outcome"] == "held" for p in predictions)
        if study == "qq":
            verdicts = [it["verdict"] for it in results["items"]]
            assert metrics["n_items"] == len(verdicts)
            assert metrics["n_violated"] == verdicts.count("VIOLATED")
    for study in ("qq", "judge", "draws"):
        files = [f"results/{study}/{run}/metrics.json" for s, run in SIM_RUNS if s == study]
        table = sh("dvc", "metrics", "show", *files, cwd=clone).stdout.splitlines()
        assert len(table) == 1 + len(files) and max(map(len, table)) <= 150, table
    # three studies' runs in one table (the registered runs this clone reproduced)
    files = [f"results/{study}/{run}/metrics.json" for study, run in SIM_RUNS]
    every = sh("dvc", "metrics", "show", *files, cwd=clone).stdout.splitlines()
    assert max(map(len, every)) <= 300 and "n_violated" in every[0] and "disagreement_rate" in every[0]


def _flat(d: dict, prefix: str = "") -> dict:
    out: dict = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        elif isinstance(v, list) and any(isinstance(x, dict) for x in v):
            out.update(_flat({str(i): x for i, x in enumerate(v)}, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def test_compare_design_shows_how_two_registered_runs_designs_differ(clone, tmp_path):
    a, b = "results/qq/qq_sim_demo", "results/qq/qq_sim_mixture"
    out = tmp_path / "design.json"
    text = sh("lmaudit", "compare", "--design", a, b, "--json", str(out), cwd=clone).stdout
    plans = [json.loads((clone / r / "plan.json").read_text()) for r in (a, b)]
    fa, fb = ({**_flat(p["config"]), **_flat({"inputs": p["inputs"]})} for p in plans)
    differ = sorted(k for k in fa.keys() | fb.keys() if k not in fa or k not in fb or fa[k] != fb[k])
    got = json.loads(out.read_text())["design"]
    assert [r["key"] for r in got["differ"]] == differ and "items.name" in differ
    assert got["same"] == {k: v for k, v in fa.items() if k not in differ}
    assert f"design: {len(differ)} keys differ, {len(got['same'])} agree" in text
    # `dvc params diff` compares the workspace with a commit: between two runs it has nothing to say
    assert sh("dvc", "params", "diff", cwd=clone).stdout.strip() == ""


def test_make_data_rebuilds_the_reports_dvc_pull_cannot_restore(clone):
    """report.html is no DVC output; `make data` renders it from the records of every run folder
    that lacks one (or whose results are newer), and leaves the others alone."""
    gone = clone / "results/qq/qq_sim_demo/report.html"
    kept = clone / "results/judge/judge_sim_attraction_v2/report.html"
    # earlier tests re-run stages of this clone: bring every report up to date first
    sh("make", "-s", "data", cwd=clone)
    gone.unlink()
    before = kept.stat().st_mtime_ns
    sh("make", "-s", "data", cwd=clone)
    assert gone.is_file() and 'id="' in gone.read_text()
    assert kept.stat().st_mtime_ns == before
    for results in clone.glob("results/*/*/results.json"):
        assert (results.parent / "report.html").is_file(), results.parent


def test_changing_one_item_reruns_only_its_dependants(clone):
    bank = clone / "data/qq/items/sim_demo.json"
    original = bank.read_text()
    doc = json.loads(original)
    doc["items"][1]["question_a"] = doc["items"][1]["question_a"].replace("?", " today?")
    bank.write_text(json.dumps(doc, indent=2))
    try:
        out = sh("dvc", "repro", *SIM_TARGETS, cwd=clone).stdout
        ran = _ran(out)
        assert "measure@qq_sim_demo" in ran
        assert not any(s.endswith("@qq_sim_mixture") for s in ran), ran
    finally:
        bank.write_text(original)
        sh("dvc", "repro", *SIM_TARGETS, cwd=clone)


def test_a_frozen_run_refuses_an_edited_bank_and_keeps_its_outputs(clone):
    bank = clone / "data/qq/items/pilot.json"
    original = bank.read_text()
    meas = clone / "results/qq/qq_sim_mixture/measurements.jsonl"
    before = meas.read_bytes()
    bank.write_text(original.replace("honest and trustworthy", "honest", 1))
    try:
        proc = sh("dvc", "repro", "measure@qq_sim_mixture", cwd=clone, check=False)
        assert proc.returncode != 0
        assert "refusing to run" in proc.stdout + proc.stderr
        assert meas.read_bytes() == before
    finally:
        bank.write_text(original)


def test_push_and_pull_round_trip_through_a_local_remote(clone, tmp_path):
    remote = tmp_path / "remote"
    sh("dvc", "remote", "add", "-f", "roundtrip", str(remote), cwd=clone)
    sh("dvc", "push", "-r", "roundtrip", "--with-deps", *SIM_TARGETS, cwd=clone)
    target = clone / "results/qq/qq_sim_mixture/results.json"
    want = target.read_bytes()
    target.unlink()
    shutil.rmtree(clone / ".dvc" / "cache")
    sh("dvc", "pull", "-r", "roundtrip", "analyze@qq_sim_mixture", cwd=clone)
    assert target.read_bytes() == want


def test_a_second_clone_pulls_the_first_ones_work_and_asks_the_backend_nothing(clone, tmp_path):
    """The cluster-to-laptop round trip: clone A measures and pushes to a shared remote; clone B
    (a git clone of A) pulls, finds nothing to do, and a forced re-measure is served entirely
    from the pulled response cache."""
    remote = tmp_path / "shared"
    sh("dvc", "remote", "add", "-f", "shared", str(remote), cwd=clone)
    # the workspace's outputs into its DVC cache (an earlier test emptied it), then to the remote
    sh("dvc", "commit", "-f", "-q", "--with-deps", *SIM_TARGETS, "data.dvc", cwd=clone)
    sh("dvc", "push", "-q", "-r", "shared", "--with-deps", *SIM_TARGETS, "data.dvc", cwd=clone)
    sh("git", "add", "-A", cwd=clone)
    sh(
        "git",
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-qm",
        "measured",
        cwd=clone,
        check=False,
    )
    laptop = tmp_path / "laptop"
    sh("git", "clone", "-q", str(clone), str(laptop), cwd=tmp_path)
    assert not (laptop / "results").exists()
    sh("dvc", "pull", "-q", "-r", "shared", *SIM_TARGETS, "--with-deps", cwd=laptop)
    status = sh("dvc", "status", *SIM_TARGETS, cwd=laptop).stdout
    assert "changed" not in status and "deleted" not in status, status
    runs = [("qq", "qq_sim_demo"), ("judge", "judge_sim_attraction_v2")]
    before = {r: (laptop / "results" / s / r / "measurements.jsonl").read_bytes() for s, r in runs}
    out = sh("dvc", "repro", "-f", "-s", *(f"measure@{r}" for _, r in runs), cwd=laptop).stdout
    assert _ran(out) == {f"measure@{r}" for _, r in runs}
    for study, run in runs:
        record = json.loads((laptop / "results" / study / run / "audit_record.json").read_text())
        cache = record["measure"]["cache"]
        assert cache["hits"] > 0 and cache["misses"] == 0 and cache["writes"] == 0, (run, cache)
        assert (laptop / "results" / study / run / "measurements.jsonl").read_bytes() == before[run]
    assert sh("git", "status", "--porcelain", "dvc.lock", cwd=laptop).stdout == ""


def _store_has(md5: str) -> bool:
    return (REPO / "dvc-store" / "files" / "md5" / md5[:2] / md5[2:]).is_file()


def test_the_in_repo_store_holds_every_output_dvc_lock_names():
    """A fresh clone's `dvc pull` restores every registered run: nothing dvc.lock pins is missing
    from dvc-store/ (a repro whose outputs were not pushed fails here)."""
    import yaml

    lock = yaml.safe_load((REPO / "dvc.lock").read_text())
    missing = []
    for name, stage in lock["stages"].items():
        for out in stage.get("outs", []):
            md5 = out["md5"]
            if not _store_has(md5):
                missing.append(f"{name}: {out['path']}")
            elif md5.endswith(".dir"):
                entries = json.loads((REPO / "dvc-store/files/md5" / md5[:2] / md5[2:]).read_text())
                lost = [e["relpath"] for e in entries if not _store_has(e["md5"])]
                if lost:
                    missing.append(f"{name}: {out['path']} ({len(lost)} files, e.g. {lost[0]})")
    assert not missing, "not in dvc-store/ (run `dvc push`): " + "; ".join(missing[:10])
