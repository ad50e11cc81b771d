"""Error bars of an inspect_ai log's scores (docs/interop.md): real inspect runs (``mockllm``
answering planted sequences, scored by inspect's ``match``), then the whole draws pipeline;
the numbers against statsmodels' cluster-robust OLS and the log's own metrics."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
from draws_interop_helpers import mlflow_metrics, planted, rows, run_draws, run_inspect

from lmaudit.errors import InputError
from lmaudit.pipeline import run

pytest.importorskip("inspect_ai")
sm = pytest.importorskip("statsmodels.api")
pytestmark = pytest.mark.usefixtures("inspect_env")

N_SAMPLES, EPOCHS = 40, 12


def _sequences(seed: int, rho: float) -> dict[str, list[str]]:
    rng = random.Random(seed)
    return {f"s{i:02d}": planted(rng, EPOCHS, rho) for i in range(N_SAMPLES)}


def _scores(seqs: dict[str, list[str]]) -> tuple[np.ndarray, np.ndarray]:
    """match() against the target "red": 1 where the planted answer is red; sample labels."""
    values = np.array([float(a == "red") for s in sorted(seqs) for a in seqs[s]])
    return values, np.repeat(np.arange(len(seqs)), EPOCHS)


def test_a_logs_error_bars_clustered_by_sample(make_cfg, tmp_path) -> None:
    from inspect_ai.log import read_eval_log

    seqs = _sequences(5, rho=0.8)
    log = run_inspect(tmp_path / "logs", "mockllm/sticky", seqs, epochs=EPOCHS, temperature=1.0)
    out, res = run_draws(make_cfg, log, "bars", "mlflow.enabled=true")

    e = res["error_bars"]["mockllm/sticky"]["colours"]
    values, labels = _scores(seqs)
    x = np.ones((len(values), 1))
    robust = sm.OLS(values, x).fit(cov_type="cluster", cov_kwds={"groups": labels, "use_correction": False})
    acc = float(values.mean())
    assert (e["n"], e["clusters"], e["scorer"], e["binary"]) == (N_SAMPLES * EPOCHS, N_SAMPLES, "match", True)
    assert e["accuracy"] == pytest.approx(acc, abs=1e-12)
    assert e["se_clustered"] == pytest.approx(float(robust.bse[0]), rel=1e-10)
    assert e["se_naive"] == pytest.approx(math.sqrt(acc * (1 - acc) / len(values)), rel=1e-12)
    assert e["design_effect"] == pytest.approx((e["se_clustered"] / e["se_naive"]) ** 2, rel=1e-12)
    assert e["design_effect"] > 2  # persistent epochs: the naive SE understates
    fam = res["families"]["mockllm/sticky"]
    assert e["epochs_persist"] == {k: fam[k] for k in ("reject", "holm_p", "rho_hat", "rho_upper_label")}
    assert e["epochs_persist"]["reject"]

    # the log's own numbers: inspect reduces epochs by the mean, then its stderr is over samples
    (reported,) = read_eval_log(str(log), header_only=True).results.scores
    assert e["log_accuracy"] == pytest.approx(reported.metrics["accuracy"].value, abs=1e-12)
    assert e["log_stderr"] == pytest.approx(reported.metrics["stderr"].value, abs=1e-12)
    means = values.reshape(N_SAMPLES, EPOCHS).mean(axis=1)
    assert e["log_stderr"] == pytest.approx(means.std(ddof=1) / math.sqrt(N_SAMPLES), rel=1e-10)
    assert e["logs"][0]["over"] == "samples" and e["logs"][0]["reducer"] == "mean"
    assert e["sentence"].startswith(f"the log's stderr {e['log_stderr']:.3f} accounts for the clustering")
    assert (
        f"treating the {N_SAMPLES * EPOCHS} scores as independent gives {e['se_naive']:.3f}" in e["sentence"]
    )

    # the scores travel in the measurement rows: re-analysis reproduces them
    (audit,) = [r for r in rows(out) if r["kind"] == "log_audit"]
    assert audit["scores"]["clusters"]["s03"] == [float(a == "red") for a in seqs["s03"]]
    again = make_cfg("study=draws", "stage=analyze", f"measurements={out / 'measurements.jsonl'}",
                     "study.permutations=999", "study.sims_per_step=100", "mlflow.enabled=false", name="again")  # fmt: skip
    run(again)
    assert json.loads((tmp_path / "again" / "results.json").read_text())["error_bars"] == res["error_bars"]

    html = (out / "report.html").read_text()
    assert "Error bars of the logs&#39; scores" in html or "Error bars of the logs' scores" in html
    assert "Read the clustered standard error (primary)" in html
    metrics = mlflow_metrics(tmp_path)
    assert metrics["error_bars.mockllm/sticky.colours.se_clustered"] == pytest.approx(e["se_clustered"])
    assert metrics["error_bars.mockllm/sticky.colours.log_stderr"] == pytest.approx(e["log_stderr"])
    assert metrics["error_bars.max_design_effect"] == pytest.approx(e["design_effect"])

    # lmaudit compare shows them beside the draws study's columns
    from lmaudit.tracking.compare import fetch_runs, tables

    (table,) = tables(fetch_runs(f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"))
    row = dict(zip(table.header, table.rows[0], strict=True))
    assert float(row["max design effect"]) == pytest.approx(e["design_effect"], rel=1e-3)
    assert float(row["max clustered/log SE"]) == pytest.approx(e["se_clustered"] / e["log_stderr"], rel=1e-3)


def test_scores_the_measurements_hold_wrong_are_refused_in_one_line(make_cfg, tmp_path) -> None:
    log = run_inspect(tmp_path / "logs", "mockllm/sticky", _sequences(6, 0.5), epochs=3, temperature=1.0)
    out, _ = run_draws(make_cfg, log, "first", "mlflow.enabled=false")
    lines = (out / "measurements.jsonl").read_text().splitlines()
    bad = []
    for line in lines:
        row = json.loads(line)
        if row["kind"] == "log_audit":
            row["scores"]["clusters"]["s01"] = [1.0, "C", 0.0]
        bad.append(json.dumps(row))
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join(bad) + "\n")
    cfg = make_cfg(
        "study=draws", "stage=analyze", f"measurements={edited}", "mlflow.enabled=false", name="bad"
    )
    with pytest.raises(
        InputError,
        match=r"record 1: field 'scores\.clusters\.s01' must be a non-empty list of finite numbers",
    ):
        run(cfg)
    assert not (tmp_path / "bad" / "results.json").exists()


def test_an_icc_of_independent_epochs_is_near_zero(make_cfg, tmp_path) -> None:
    # every epoch a fresh draw from one shared distribution: no clustering to speak of
    rng = random.Random(9)
    seqs = {f"s{i:02d}": [rng.choice(("red", "blue")) for _ in range(EPOCHS)] for i in range(N_SAMPLES)}
    log = run_inspect(tmp_path / "logs", "mockllm/fresh", seqs, epochs=EPOCHS, temperature=1.0)
    _, res = run_draws(make_cfg, log, "fresh", "mlflow.enabled=false")
    e = res["error_bars"]["mockllm/fresh"]["colours"]
    # ICC(1) of independent scores has mean about -1/(n - 1) and SD about 0.03 here: within 0.1
    assert abs(e["icc"]) < 0.1 and 0.6 < e["design_effect"] < 1.6
