"""The ``hf`` model config and the ``hf`` backend agree: every field a config sets is a keyword
of the backend with the same default (one source: the schema), and the fields that say how the
model runs in-process (``device``, ``pack_tokens``) stay out of the plan, so the plans, and the
cache keys, of the registered runs do not change."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from omegaconf import DictConfig

from lmaudit.backends.hf.backend import HFBackend
from lmaudit.backends.hf.config import HF_DEFAULTS, HFModelConfig
from lmaudit.backends.hf.packed.forward import next_token_logits
from lmaudit.config.execution import EXECUTION_FIELDS, RUNNER_FIELDS, execution_problems
from lmaudit.studies.registry import get_study

REPO = Path(__file__).resolve().parents[2]
#: schema fields the registry reads, not the backend: its name, the display name, the framing hint
NOT_THE_BACKENDS = {"backend", "name", "base_model", *RUNNER_FIELDS}


def _keywords(fn: Callable[..., Any]) -> dict[str, Any]:
    return {n: p.default for n, p in inspect.signature(fn).parameters.items() if p.default is not p.empty}


def test_every_config_field_is_a_backend_keyword_with_the_schema_s_default() -> None:
    keywords = _keywords(HFBackend.__init__)
    declared = {f.name for f in fields(HFModelConfig)} - NOT_THE_BACKENDS
    assert declared <= set(keywords), sorted(declared - set(keywords))
    assert {"device", "pack_tokens", "batch_size"} <= declared
    assert {k: keywords[k] for k in declared if k in HF_DEFAULTS} == {
        k: HF_DEFAULTS[k] for k in declared if k in HF_DEFAULTS
    }
    # the value every run used: the cache layer cut calls at 16 whatever the backend said
    assert (HF_DEFAULTS["batch_size"], HF_DEFAULTS["device"], HF_DEFAULTS["pack_tokens"]) == (16, "cpu", 512)
    assert _keywords(next_token_logits)["pack_tokens"] == HF_DEFAULTS["pack_tokens"]


def test_device_and_pack_tokens_are_execution_fields_with_a_relation_to_the_runner() -> None:
    assert {"device", "pack_tokens"} <= set(EXECUTION_FIELDS) and not {"device", "pack_tokens"} & set(
        RUNNER_FIELDS
    )
    assert execution_problems({"runner": "lightning", "device": "cuda:0"}) == [
        "model.device = 'cuda:0' applies only in-process; with model.runner=lightning the ranks are "
        "placed by model.accelerator"
    ]
    assert execution_problems({"runner": "inprocess", "device": "cuda:0"}) == []


def test_a_composed_hf_config_declares_them_and_the_plan_leaves_them_out(
    make_cfg: Callable[..., DictConfig],
) -> None:
    cfg = make_cfg("model=gemma3_270m")
    assert (cfg.model.device, cfg.model.pack_tokens, cfg.model.batch_size) == ("cpu", 512, 16)
    other = make_cfg("model=gemma3_270m", "model.device=cuda:0", "model.pack_tokens=64")
    qq = get_study("qq")
    assert "device" not in qq.plan_config(cfg)["model"]
    assert qq.plan_config(other) == qq.plan_config(cfg)


@pytest.mark.parametrize("run", ["qq_pilot_track_m", "qq_smollm2_track_m"])
def test_a_registered_hf_run_s_plan_records_the_model_it_recorded(
    run: str, make_cfg: Callable[..., DictConfig]
) -> None:
    plan = REPO / "results" / "qq" / run / "plan.json"
    if not plan.is_file():
        pytest.skip(f"{plan} not pulled (dvc pull)")
    recorded = json.loads(plan.read_text())["config"]["model"]
    assert get_study("qq").plan_config(make_cfg(f"prereg={run}"))["model"] == recorded
