"""The mixture's log-prob path through a real forward pass (a tiny random Gemma 3): temperature
components cost no model call beyond their persona's, the plain estimand's requests keep the
plain run's cache keys, and a tempered component's q is the one an independent forward pass
gives with ``P_T(y | y or n) = sigmoid((l_y - l_n) / T)``.

Tolerance 1e-6 on probabilities and q: the determinism contract's 1e-5 on fresh label
probabilities of different batch compositions, tightened because the reference is float64."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests" / "backends"))

from tiny_hf import make_backend, naive_probs, one_thread, reference_model, tiny_checkpoint  # noqa: E402

from lmaudit.backends.cached import CachedBackend  # noqa: E402
from lmaudit.backends.hf.packed.forward import ForwardStats  # noqa: E402
from lmaudit.provenance.cache import ResponseCache  # noqa: E402
from lmaudit.studies.qq import envelope as env  # noqa: E402
from lmaudit.studies.qq.analysis import analyze_rows  # noqa: E402
from lmaudit.studies.qq.measure import position_rows as measure  # noqa: E402
from lmaudit.studies.qq.planning import cells_for, mixture_cells  # noqa: E402

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)
TOL = 1e-6
BASE = (
    "model=sim_projective",  # the config's model is not used: the tiny backend is passed in
    "framing=track_m",
    "study.items.ids=[s1-01,s3-01]",
    "study.gates.g3.enabled=false",
    "mlflow.enabled=false",
)
MIX = (
    "estimand=mixture",
    f"study.estimand.mixture.personas_path={REPO / 'data/qq/personas.jsonl'}",
    "study.estimand.mixture.personas=[none,iowa-farmer]",
    "study.estimand.mixture.temperatures=[0.5,1.0,2.0]",
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_checkpoint(tmp_path_factory.mktemp("tiny-gemma3"), "gemma3")


def test_temperatures_read_the_personas_forward_pass(make_cfg: Any, tmp_path: Path, tiny: Path) -> None:
    backend = make_backend(tiny)
    cached = CachedBackend(backend, ResponseCache(tmp_path / "cache"), progress=False)
    cfg = make_cfg(*BASE, *MIX)
    plain, extra = cells_for(cfg), mixture_cells(cfg)
    backend.stats = ForwardStats()
    rows = measure(cfg, cached)
    scored = 3 * (len(plain) + len(extra))
    # one forward pass per prompt, whatever the temperatures
    assert backend.stats.as_dict()["requests"] == scored
    assert cached.cache.stats.misses == scored

    # the plain estimand alone, from the same cache: nothing new to ask, the same rows
    again = measure(make_cfg(*BASE), cached)
    assert cached.cache.stats.misses == scored
    mixed_plain = [r for r in rows if r["kind"] == "position" and "persona" not in r]
    assert [r for r in again if r["kind"] == "position"] == mixed_plain

    res = analyze_rows(cfg, rows, "<tiny>").to_json()
    comps = {c["id"]: c for c in res["mixture"]["components"]}
    assert comps["none/T1"]["items"] == res["mixture"]["plain"]["items"]  # the plain estimand is a component
    reference = reference_model(tiny)
    token = {
        (r["item"], r["mapping"], r["order"], r["position"], r["first_answer"]): r["label_token_ids"]
        for r in rows
        if r["kind"] == "position" and r.get("persona") == "iowa-farmer"
    }
    for temperature in (0.5, 2.0):
        got = {it["item"]: it["q"] for it in comps[f"iowa-farmer/T{temperature:g}"]["items"]}
        for item in ("s1-01", "s3-01"):
            qs = []
            for mapping in sorted({c.mapping for c in extra if c.item.id == item}):
                x = []
                for order, position, first in env.POSITIONS:
                    cell = next(c for c in extra if c.key == (item, mapping, order))
                    req = cell.requests[0 if position == 1 else (1 if first == "y" else 2)]
                    ids = token[(item, mapping, order, position, first)]
                    probs = naive_probs(reference, backend.encode(req.messages))
                    l_y, l_n = (float(np.log(probs[ids[cell.label_of[s]]])) for s in ("y", "n"))
                    x.append(1.0 / (1.0 + np.exp(-(l_y - l_n) / temperature)))
                qs.append(float(env.qq_statistics(np.array(x))[0]))
            assert got[item] == pytest.approx(float(np.mean(qs)), abs=TOL), (item, temperature)
