"""Pre-registration: freeze before measuring, refuse a changed plan, score predictions."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import open_dict

from lmaudit import prereg
from lmaudit.console import main as lmaudit_main
from lmaudit.errors import InputError, PreregError
from lmaudit.pipeline import run
from lmaudit.provenance.digest import json_digest

REPO = Path(__file__).resolve().parents[1]


def test_resolve_follows_paths_through_lists_and_dotted_keys():
    res = {
        "counts": {"saturated": 3},
        "items": [{"item": "s1-01", "q": 0.5}, {"item": "s1-02", "q": -1}],
        "sensitivity": {"0.99": 4},
        "families": [{"family": "gpt-oss", "holm_p": 0.2}],
    }
    assert prereg.resolve(res, "counts.saturated") == (True, 3)
    assert prereg.resolve(res, "items.s1-02.q") == (True, -1)
    assert prereg.resolve(res, "sensitivity.0.99") == (True, 4)
    assert prereg.resolve(res, "families.gpt-oss.holm_p") == (True, 0.2)
    assert prereg.resolve(res, "items.s9-99.q") == (False, None)
    preds = prereg.parse_predictions(
        [
            {"id": "A", "metric": "counts.saturated", "op": ">=", "value": 3},
            {"id": "B", "metric": "items.s1-01.q", "op": "<", "value": 0},
            {"id": "C", "metric": "counts.nothing", "op": "==", "value": 0},
            {"id": "D", "metric": "counts", "op": "==", "value": 0},
        ],
        "test",
    )
    outcomes = {s["id"]: (s["outcome"], s["observed"]) for s in prereg.score_predictions(preds, res)}
    assert outcomes == {
        "A": ("held", 3),
        "B": ("not held", 0.5),
        "C": ("not evaluable", None),
        "D": ("not evaluable", {"saturated": 3}),
    }


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"id": "P1", "metric": "x", "op": "=>", "value": 1}, "op"),
        ({"id": "P1", "metric": "", "op": ">", "value": 1}, "metric"),
        ({"id": "P1", "metric": "x", "op": ">"}, "value"),
        ({"id": "P1", "metric": "x", "op": ">", "value": 1, "python": "1"}, "unknown field"),
        ({"id": "P1", "all_of": []}, "all_of"),
        ({"id": "P1", "all_of": [{"metric": "x", "op": "~", "value": 1}]}, r"all_of\[0\]: field 'op'"),
        ({"id": "P1", "all_of": [{"metric": "x", "op": ">"}]}, r"all_of\[0\]: field 'value'"),
        (
            {
                "id": "P1",
                "metric": "x",
                "op": ">",
                "value": 1,
                "all_of": [{"metric": "x", "op": ">", "value": 1}],
            },
            "unknown field",
        ),
    ],
)
def test_malformed_predictions_name_the_field(bad, field):
    with pytest.raises(PreregError, match=field):
        prereg.parse_predictions([bad], "conf/prereg/x")


def _cfg(make_cfg, tmp_path, *extra, name="reg"):
    return make_cfg("prereg=qq_sim_mixture", f"paths.prereg={tmp_path / 'prereg'}", *extra, name=name)


def test_freeze_then_run_scores_predictions_everywhere(make_cfg, tmp_path):
    run(_cfg(make_cfg, tmp_path, "stage=freeze"))
    frozen = tmp_path / "prereg" / "qq" / "qq_sim_mixture.json"
    doc = json.loads(frozen.read_text())
    assert doc["plan_digest"] and doc["frozen_utc"].endswith("Z") and len(doc["predictions"]) == 4
    assert doc["decision_rules"]["epsilon"] == 0.02
    run(_cfg(make_cfg, tmp_path))
    out = tmp_path / "reg"
    res = json.loads((out / "results.json").read_text())
    assert res["prereg"]["file_digest"] == doc["file_digest"]
    scored = {p["id"]: p for p in res["predictions"]}
    assert (
        scored["P2"]["outcome"] == "held" and scored["P2"]["observed"] == res["counts"]["verdict"]["VIOLATED"]
    )
    assert "Registered predictions" in (out / "report.html").read_text()
    con = sqlite3.connect(tmp_path / "mlruns" / "mlflow.db")
    tags = dict(con.execute("select key, value from tags").fetchall())
    assert tags["prediction.P1"] == "held"
    metrics = dict(con.execute("select key, value from metrics").fetchall())
    assert metrics["prediction.P2.observed"] == res["counts"]["verdict"]["VIOLATED"]

    # compare shows the run with its prediction outcomes, and writes CSV and Markdown
    csv_path, md_path = tmp_path / "cmp.csv", tmp_path / "cmp.md"
    assert (
        lmaudit_main(
            [
                "compare",
                "--mlruns",
                str(tmp_path / "mlruns"),
                "--csv",
                str(csv_path),
                "--markdown",
                str(md_path),
            ]
        )
        == 0
    )
    assert "pred P1" in csv_path.read_text() and "held (" in csv_path.read_text()
    md = md_path.read_text()  # one table per study, its columns explained under it
    assert md.startswith("### qq\n\n| run |") and "- **pred P1**: the registered prediction" in md


def test_refreeze_identical_is_a_no_op_and_different_is_refused(make_cfg, tmp_path):
    run(_cfg(make_cfg, tmp_path, "stage=freeze"))
    frozen = tmp_path / "prereg" / "qq" / "qq_sim_mixture.json"
    before = frozen.read_bytes()
    run(_cfg(make_cfg, tmp_path, "stage=freeze"))
    assert frozen.read_bytes() == before
    with pytest.raises(PreregError, match=r"never overwritten.*|study\.epsilon"):
        run(_cfg(make_cfg, tmp_path, "stage=freeze", "study.epsilon=0.05"))
    assert frozen.read_bytes() == before


def test_editing_the_bank_after_freezing_is_refused_before_measuring(make_cfg, tmp_path):
    bank = tmp_path / "bank.json"
    bank.write_text((REPO / "data/qq/items/pilot.json").read_text())
    run(_cfg(make_cfg, tmp_path, "stage=freeze", f"items.path={bank}"))
    bank.write_text(bank.read_text().replace("honest and trustworthy", "honest", 1))
    with pytest.raises(PreregError, match=r"inputs\.items\.sha256"):
        run(_cfg(make_cfg, tmp_path, f"items.path={bank}", name="edited"))
    assert not (tmp_path / "edited").exists()  # refused before anything was written


def test_an_edited_frozen_file_is_detected(make_cfg, tmp_path):
    run(_cfg(make_cfg, tmp_path, "stage=freeze"))
    frozen = tmp_path / "prereg" / "qq" / "qq_sim_mixture.json"
    doc = json.loads(frozen.read_text())
    doc["predictions"][0]["value"] = 99
    frozen.write_text(json.dumps(doc))
    with pytest.raises(PreregError, match="edited after freezing"):
        run(_cfg(make_cfg, tmp_path))


def test_the_registration_file_is_sealed_at_freeze(make_cfg, tmp_path):
    """A key that reaches no plan (here a comment; a section later refused is no different)
    added to the registration file after freezing is caught by the file's sealed digest."""
    folder = tmp_path / "registrations"
    folder.mkdir()
    source = folder / "qq_sim_mixture.yaml"
    source.write_bytes((REPO / "conf/prereg/qq_sim_mixture.yaml").read_bytes())
    where = f"paths.registrations={folder}"
    run(_cfg(make_cfg, tmp_path, "stage=freeze", where))
    frozen = json.loads((tmp_path / "prereg" / "qq" / "qq_sim_mixture.json").read_text())
    assert frozen["registration_file"]["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    run(_cfg(make_cfg, tmp_path, where))
    res = json.loads((tmp_path / "reg" / "results.json").read_text())
    assert res["prereg"]["registration_file"]["sealed"] is True
    source.write_text(source.read_text() + "# added after freezing\n")
    with pytest.raises(PreregError, match=r"qq_sim_mixture\.yaml was edited after it was frozen"):
        run(_cfg(make_cfg, tmp_path, where, name="edited"))
    assert not (tmp_path / "edited").exists()
    # re-freezing the edited file under the same name is refused too
    with pytest.raises(PreregError, match="differs in: the registration file"):
        run(_cfg(make_cfg, tmp_path, "stage=freeze", where))


def test_run_py_seals_the_file_hydra_read(tmp_path):
    """Through run.py the sealed file is the one Hydra composed (conf/prereg beside run.py),
    whatever paths.registrations says."""
    import shutil

    shutil.copytree(REPO / "conf", tmp_path / "conf")
    shutil.copy(REPO / "run.py", tmp_path / "run.py")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1"}
    common = [
        "prereg=qq_sim_mixture",
        f"study.items.path={REPO / 'data/qq/items/pilot.json'}",
        f"paths.registrations={REPO / 'conf/prereg'}",  # an unedited copy, ignored under run.py
        "mlflow.enabled=false",
        "progress=false",
    ]

    def run_py(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "run.py", *common, *args], cwd=tmp_path, env=env, capture_output=True, text=True
        )

    done = run_py("stage=freeze")
    assert done.returncode == 0, done.stderr[-2000:]
    frozen = json.loads((tmp_path / "prereg/qq/qq_sim_mixture.json").read_text())
    assert frozen["registration_file"]["path"] == "conf/prereg/qq_sim_mixture.yaml"
    with open(tmp_path / "conf/prereg/qq_sim_mixture.yaml", "a") as fh:
        fh.write("# added after freezing\n")
    done = run_py("stage=plan")
    assert done.returncode == 2, done.stderr[-2000:]
    assert "conf/prereg/qq_sim_mixture.yaml was edited after it was frozen" in done.stderr


def test_a_registration_frozen_before_files_were_sealed_is_scored_with_its_file_recorded(
    make_cfg, tmp_path, capsys
):
    run(_cfg(make_cfg, tmp_path, "stage=freeze"))
    path = tmp_path / "prereg" / "qq" / "qq_sim_mixture.json"
    doc = json.loads(path.read_text())
    body = {k: v for k, v in doc.items() if k not in ("file_digest", "registration_file")}
    path.write_text(json.dumps({**body, "file_digest": json_digest(body)}))
    run(_cfg(make_cfg, tmp_path))
    assert "frozen before registration files were sealed" in capsys.readouterr().out
    rec = json.loads((tmp_path / "reg" / "results.json").read_text())["prereg"]["registration_file"]
    assert rec["sealed"] is False
    assert (
        rec["sha256"] == hashlib.sha256((REPO / "conf/prereg/qq_sim_mixture.yaml").read_bytes()).hexdigest()
    )


def test_a_prediction_on_an_unknown_metric_is_refused_at_freeze(make_cfg, tmp_path):
    cfg = _cfg(make_cfg, tmp_path, "stage=freeze")
    with open_dict(cfg):
        cfg.prereg.predictions.append({"id": "P9", "metric": "counts.no_such_count", "op": ">", "value": 1})
    with pytest.raises(PreregError, match=r"P9: counts\.no_such_count"):
        run(cfg)
    assert not (tmp_path / "prereg" / "qq" / "qq_sim_mixture.json").exists()


def test_freeze_without_a_registration_says_what_to_do(make_cfg):
    with pytest.raises(InputError, match="prereg=<name>"):
        run(make_cfg("stage=freeze"))


def test_shipped_registrations_match_their_configs():
    """The committed frozen files still match conf/ and the banks (else dvc repro would refuse)."""
    for path in sorted((REPO / "prereg" / "qq").glob("*.json")):
        doc = prereg.load_registration(path)
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                f"""
import sys
sys.argv = ["run.py", "prereg={doc["name"]}", "--cfg", "job"]
from hydra import compose, initialize_config_dir
from lmaudit.config.store import register_configs
from lmaudit.studies.qq import planning as study
from lmaudit import prereg
register_configs()
with initialize_config_dir(config_dir="{REPO / "conf"}", version_base="1.3"):
    cfg = compose(config_name="config", overrides=["prereg={doc["name"]}"])
doc = prereg.load_registration(__import__("pathlib").Path("{path}"))
preds = prereg.parse_predictions(list(cfg.prereg.predictions), "x")
prereg.verify(doc, study.plan(cfg).doc, preds, __import__("pathlib").Path("{path}"))
print("ok")
""",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.stdout.strip().endswith("ok"), proc.stderr[-1500:]


def test_simple_predictions_keep_their_registered_form_and_compound_ones_need_every_check():
    simple = prereg.parse_predictions([{"id": "A", "metric": "m", "op": ">", "value": 1}], "t")[0]
    # the form frozen files have always held (so older registrations still verify)
    assert simple.to_dict() == {"id": "A", "metric": "m", "op": ">", "value": 1, "description": ""}
    both = prereg.parse_predictions(
        [
            {
                "id": "B",
                "confidence": "low",
                "all_of": [{"metric": "a", "op": ">", "value": 0}, {"metric": "b", "op": "==", "value": "x"}],
            }
        ],
        "t",
    )
    cases = [
        ({"a": 1, "b": "x"}, "held"),
        ({"a": 1, "b": "y"}, "not held"),
        ({"a": 0}, "not held"),
        ({"a": 1}, "not evaluable"),
    ]
    for res, outcome in cases:
        s = prereg.score_predictions(both, res)[0]
        assert s["outcome"] == outcome, res
        assert [c["metric"] for c in s["checks"]] == ["a", "b"] and s["confidence"] == "low"
