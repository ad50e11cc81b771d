"""Fixtures for the judge study's tests."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

import pytest
from judge_helpers import simple_rows, write_candidates
from omegaconf import DictConfig


@pytest.fixture
def judge_cfg(make_cfg, tmp_path) -> Callable[..., DictConfig]:
    """The judge study on the sim judge over ``rows`` (default 12 plain prompts), MLflow off."""

    def _make(
        *overrides: str, rows: list[tuple[str, str, str, str]] | None = None, name: str = "run"
    ) -> DictConfig:
        rows = rows or simple_rows(12)
        digest = hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:12]
        cpath, mpath = write_candidates(tmp_path / f"cands-{digest}", rows)
        return make_cfg(
            "study=judge",
            "model=sim_judge",
            f"study.candidates_path={cpath}",
            f"study.mapping_path={mpath}",
            "mlflow.enabled=false",
            *overrides,
            name=name,
        )

    return _make
