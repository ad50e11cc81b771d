"""Two inspect_ai logs of one task (its ``mockllm`` provider answering planted sequences, one
model per log), each imported as a draws run, then paired with ``lmaudit compare``."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from draws_interop_helpers import planted, rows, run_draws, run_inspect

from lmaudit.console import main
from lmaudit.studies.draws.sequences import encode, sequence_stats

pytest.importorskip("inspect_ai")
pytestmark = pytest.mark.usefixtures("inspect_env")

N_SAMPLES, EPOCHS = 24, 8


def _sequences(seed: int, rho: float) -> dict[str, list[str]]:
    rng = random.Random(seed)
    return {f"s{i:02d}": planted(rng, EPOCHS, rho) for i in range(N_SAMPLES)}


def test_two_inspect_logs_pair_sample_by_sample(make_cfg, tmp_path, capsys) -> None:
    sticky, fresh = _sequences(1, rho=0.7), _sequences(2, rho=0.0)
    log_a = run_inspect(tmp_path / "logs_a", "mockllm/sticky", sticky, epochs=EPOCHS, temperature=1.0)
    log_b = run_inspect(tmp_path / "logs_b", "mockllm/fresh", fresh, epochs=EPOCHS, temperature=1.0)
    out_a, res_a = run_draws(make_cfg, log_a, "a")
    out_b, res_b = run_draws(make_cfg, log_b, "b")
    paired = tmp_path / "paired.json"
    assert main(["compare", str(out_a), str(out_b), "--json", str(paired)]) == 0
    assert "percentile bootstrap over sequences" in capsys.readouterr().out
    (fam,) = json.loads(paired.read_text())["paired"]["families"]
    # one family in each run (named after its model) pair with each other, every sample shared
    assert (fam["family_a"], fam["family_b"]) == ("mockllm/sticky", "mockllm/fresh")
    assert fam["n_sequences"] == N_SAMPLES
    rho = fam["rho_hat"]
    assert rho["a"] == pytest.approx(res_a["families"]["mockllm/sticky"]["rho_hat"], abs=1e-12)
    assert rho["b"] == pytest.approx(res_b["families"]["mockllm/fresh"]["rho_hat"], abs=1e-12)
    # rho_hat from the planted sequences: sum (R - E0) / sum (n - 1 - E0) over informative ones
    for seqs, got in ((sticky, rho["a"]), (fresh, rho["b"])):
        st = sequence_stats(encode(list(seqs.values())))
        inf = st.informative
        assert got == pytest.approx(float((st.repeats - st.e0)[inf].sum() / st.room[inf].sum()), abs=1e-12)
    assert rho["high"] < 0  # planted 0.7 against 0: the interval excludes no difference
    # the samples pair by probe: the same ids in both logs
    probes = {r["probe"] for r in rows(out_a) if r["kind"] == "sequence"}
    assert probes == {r["probe"] for r in rows(out_b) if r["kind"] == "sequence"}
    assert len(probes) == N_SAMPLES and np.isfinite(rho["low"])
