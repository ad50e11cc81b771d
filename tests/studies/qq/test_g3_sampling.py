"""Gate G3's rejection sampling: the spot-check cells sampled side by side give the rows of
the protocol run one cell and one round at a time, in fewer backend calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lmaudit.backends.base import SampleRequest
from lmaudit.backends.cached import CachedBackend
from lmaudit.backends.registry import build_backend
from lmaudit.provenance.cache import ResponseCache
from lmaudit.studies.qq.config import G3Config
from lmaudit.studies.qq.planning import _typed, cells_for
from lmaudit.studies.qq.positions import g3_cells, g3_trajectories, g3_trajectories_many, position_seed
from lmaudit.studies.qq.protocol import Cell
from lmaudit.studies.qq.records import SEMANTIC


def _reference_row(cell: Cell, cached: CachedBackend, g3: G3Config, n: int, attempt: int) -> dict[str, Any]:
    """The G3 protocol written out plainly, one position and one backend call per round:
    draw the first answer until ``n`` are canonical, then each committed branch's second
    answer as often as the first gave it. A round asks for the draws still needed at the
    acceptance rate so far, with 10% to spare (at least 8), its seed salted by the round."""
    seed = g3.seed + 7919 * (attempt - 1)

    def accept(req: Any, need: int) -> tuple[list[str], int]:
        sem = {lab: s for s, lab in cell.label_of.items()}
        got: list[str] = []
        tried, rnd, cap = 0, 0, max(need, 1) * g3.max_attempts_factor
        while len(got) < need and tried < cap:
            rate = len(got) / tried if tried else 1.0
            ask = min(cap - tried, max(8, int((need - len(got)) / max(rate, 0.05) * 1.1) + 1))
            salt = f"g3-round{rnd}"
            one = SampleRequest(
                messages=req.messages,
                n=ask,
                temperature=g3.temperature,
                top_p=g3.top_p,
                max_tokens=1,
                seed=position_seed(seed, req.meta, salt),
                meta=req.meta,
            )
            for text in cached.sample([one], progress=False)[0].texts:
                tried += 1
                if text.strip() in sem:
                    got.append(sem[text.strip()])
                    if len(got) == need:
                        break
            rnd += 1
        return got, tried

    first, tried1 = accept(cell.requests[0], n)
    counts = {f"{a}{b}": 0 for a in SEMANTIC for b in SEMANTIC}
    attempts = {"position1": tried1}
    for a, req in zip(SEMANTIC, cell.requests[1:], strict=True):
        second, tried = accept(req, first.count(a)) if first.count(a) else ([], 0)
        attempts[f"position2_{a}"] = tried
        for b in second:
            counts[f"{a}{b}"] += 1
    done = sum(counts.values())
    return {
        "kind": "g3",
        "item": cell.item.id,
        "mapping": cell.mapping,
        "order": cell.order,
        "attempt": attempt,
        "n": n,
        "seed": seed,
        "temperature": g3.temperature,
        "top_p": g3.top_p,
        "joint_counts": counts,
        "accepted": done,
        "attempts": attempts,
        "complete": done == n,
    }


@pytest.mark.parametrize("other_mass", [0.0, 0.45])
def test_side_by_side_g3_rows_are_the_protocols(make_cfg: Any, tmp_path: Path, other_mass: float) -> None:
    """Same rows (counts, attempts, seeds) as the plain protocol, whatever the acceptance rate
    (with 45% non-canonical answers positions need several rounds, finishing at different
    ones); each call asks for every position still short, so there are fewer calls."""
    cfg = make_cfg("model=sim_repetition", f"+model.params.other_mass={other_mass}", name="g3")
    g3 = _typed(cfg.study.gates.g3, G3Config)
    spot = g3_cells(cells_for(cfg), g3)
    assert len(spot) == 4  # two items, both orders, first mapping

    def cached(tag: str) -> tuple[CachedBackend, list[int]]:
        backend = build_backend(cfg.model)
        calls: list[int] = []
        real = backend.sample

        def sample(requests: list[SampleRequest]) -> Any:
            calls.append(len(requests))
            return real(requests)

        backend.sample = sample
        return CachedBackend(backend, ResponseCache(tmp_path / tag), progress=False), calls

    ref_backend, ref_calls = cached("reference")
    reference = [_reference_row(c, ref_backend, g3, g3.n, attempt=2) for c in spot]
    many_backend, many_calls = cached("many")
    got = g3_trajectories_many(spot, many_backend, g3, g3.n, attempt=2)
    assert json.dumps(got) == json.dumps(reference)  # key order too: it is the file's
    assert all(r["complete"] for r in got) and {r["seed"] for r in got} == {g3.seed + 7919}
    if other_mass:
        assert all(r["attempts"]["position1"] > g3.n for r in got)  # rejections happened
        assert len(ref_calls) > 2 * len(spot)  # some positions took several rounds
    assert sum(many_calls) == sum(ref_calls)  # the same requests...
    assert len(many_calls) < len(ref_calls) and max(many_calls) >= len(spot)  # ...in fewer calls
    one_backend, _ = cached("one")
    assert [g3_trajectories(c, one_backend, g3, g3.n, attempt=2) for c in spot] == reference


def test_side_by_side_g3_with_positions_left_short(make_cfg: Any, tmp_path: Path) -> None:
    """With 90% non-canonical answers and room for only 2n attempts, positions stop short (at
    different rounds), some branches need no draws or get none; the rows are the protocol's."""
    cfg = make_cfg(
        "model=sim_repetition",
        "+model.params.other_mass=0.9",
        "study.gates.g3.max_attempts_factor=2",
        name="g3",
    )
    g3 = _typed(cfg.study.gates.g3, G3Config)
    spot = g3_cells(cells_for(cfg), g3)
    backend = build_backend(cfg.model)
    reference = [
        _reference_row(c, CachedBackend(backend, ResponseCache(tmp_path / "ref"), progress=False), g3, n, 1)
        for c in spot
        for n in (0, 1, 37)
    ]
    cached = CachedBackend(backend, ResponseCache(tmp_path / "many"), progress=False)
    got = [row for n in (0, 1, 37) for row in g3_trajectories_many(spot, cached, g3, n, 1)]
    by_key = {(r["item"], r["order"], r["n"]): r for r in got}
    assert json.dumps([by_key[(r["item"], r["order"], r["n"])] for r in reference]) == json.dumps(reference)
    short = [r for r in got if r["n"] == 37]
    assert not any(r["complete"] for r in short)  # 2 x 37 attempts give ~7 canonical answers
    assert all(r["attempts"]["position1"] == 2 * 37 for r in short)
    assert all(0 in r["attempts"].values() for r in got if r["n"] == 1)  # a branch nobody took
    assert all(r["accepted"] == 0 and r["complete"] for r in got if r["n"] == 0)


def test_measure_appends_each_cells_retry_after_its_first_attempt(make_cfg: Any, tmp_path: Path) -> None:
    """measure.position_rows' G3 rows: for each spot-check cell in order, attempt 1, then attempt 2
    exactly when attempt 1 failed its check (alpha = 0.999: intervals too narrow to pass)."""
    from lmaudit.studies.qq import measure as qq_measure
    from lmaudit.studies.qq.diagnostics import g3_check
    from lmaudit.studies.qq.gates import g3_counts

    cfg = make_cfg("model=sim_repetition", "study.gates.g3.alpha=0.999", "study.gates.g3.n=40", name="g3")
    g3 = _typed(cfg.study.gates.g3, G3Config)
    cached = CachedBackend(build_backend(cfg.model), ResponseCache(tmp_path / "cache"), progress=False)
    rows = qq_measure.position_rows(cfg, cached)
    g3_rows = [r for r in rows if r["kind"] == "g3"]
    logprob = [r for r in rows if r["kind"] == "position"]
    expected: list[tuple[str, str, int]] = []
    for cell in g3_cells(cells_for(cfg), g3):
        first = next(
            r for r in g3_rows if (r["item"], r["order"], r["attempt"]) == (cell.item.id, cell.order, 1)
        )
        joint = qq_measure._cell_joint(logprob, cell)
        expected.append((cell.item.id, cell.order, 1))
        if not (first["complete"] and g3_check(joint, g3_counts(first), g3.alpha).passed):
            expected.append((cell.item.id, cell.order, 2))
    assert [(r["item"], r["order"], r["attempt"]) for r in g3_rows] == expected
    assert len(expected) > 4  # at alpha = 0.999 some cells are retried
    assert {r["n"] for r in g3_rows if r["attempt"] == 2} == {g3.retry_n}
