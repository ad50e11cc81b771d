"""Every config composes against its schema, and the QQ protocol renders what the seed specifies."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ValidationError

from lmaudit.studies.qq import planning as study

CONF = Path(__file__).resolve().parents[1] / "conf"
# every option of every group: the shared ones, and each study's own (conf/study/<name>/<group>/)
OPTIONS = [
    f"{g}={p.stem}" for g in ("study", "model", "prereg") for p in sorted((CONF / g).glob("*.yaml"))
] + [f"{p.parent.parent.name}/{p.parent.name}={p.stem}" for p in sorted((CONF / "study").glob("*/*/*.yaml"))]


def test_the_option_list_covers_every_study_group():
    groups = {o.split("=")[0] for o in OPTIONS}
    assert {
        "qq/estimand",
        "qq/framing",
        "qq/mapping",
        "qq/items",
        "judge/condition",
        "judge/rubric",
    } <= groups
    assert len(OPTIONS) >= 35


@pytest.mark.parametrize("override", OPTIONS)
def test_every_config_option_composes(make_cfg, override):
    cfg = make_cfg(override)
    group, option = override.split("=")
    if "/" in group:  # a study's own group: it selects that study and lands at cfg.study.<group>
        study, g = group.split("/")
        assert cfg.study.name == study and cfg.study[g] is not None
    elif group == "prereg":
        assert cfg.prereg.name == option and cfg.prereg.predictions
    else:
        assert cfg[group] is not None
    if group == "model":
        assert cfg.model.backend in {"hf", "openai", "sim"} and cfg.model.name


def test_a_misspelt_registration_key_fails_at_composition(make_cfg):
    with pytest.raises((ConfigCompositionException, ValidationError)):
        make_cfg("prereg=qq_sim_mixture", "prereg.predictionz=[]")
    with pytest.raises((ConfigCompositionException, ValidationError)):
        make_cfg("prereg=qq_sim_mixture", "prereg.data=[1]")


def test_the_default_study_of_the_command_line_is_the_configs():
    from lmaudit.config.overrides import DEFAULT_STUDY

    text = (CONF / "config.yaml").read_text()
    assert f"  - study: {DEFAULT_STUDY}" in text


def test_misspelt_key_fails_at_composition(make_cfg):
    with pytest.raises((ConfigCompositionException, ValidationError)):
        make_cfg("study.epsilonn=0.1")
    with pytest.raises((ConfigCompositionException, ValidationError)):
        make_cfg("study.epsilon=not-a-number")


def test_track_m_cells_follow_the_protocol(make_cfg):
    cells = study.cells_for(make_cfg("framing=track_m"))
    # 13 A/B items x 2 mappings + 5 Yes/No items, x 2 orders
    assert len(cells) == (13 * 2 + 5) * 2
    c = next(c for c in cells if c.item.id == "s1-04" and c.mapping == "map2" and c.order == "BA")
    p1, p2y, p2n = c.requests
    assert p1.messages[0]["role"] == "system" and '"A" or "B"' in p1.messages[0]["content"]
    # legend under map-2: option 1 ("A few") -> B, listed in label order
    assert p1.messages[-1]["content"].startswith("A = Many\nB = A few")
    assert p1.messages[-1]["content"].endswith(c.item.question_b)  # order BA asks B first
    # the first answer is committed as exactly the canonical label, then the second question
    assert p2y.messages[-2] == {"role": "assistant", "content": "B"}
    assert p2n.messages[-2] == {"role": "assistant", "content": "A"}
    assert p2y.messages[-1]["content"].startswith("A = Many\nB = A few")
    assert p2y.messages[-1]["content"].endswith(c.item.question_a)
    assert p2y.messages[:-2] == p1.messages  # the shared prefix


def test_header_and_vignette_appear_once_in_the_first_turn(make_cfg):
    cells = study.cells_for(make_cfg("framing=track_m"))
    c = next(c for c in cells if c.item.id == "s1-05")
    user_turns = [m["content"] for m in c.requests[1].messages if m["role"] == "user"]
    assert c.item.header and user_turns[0].startswith(c.item.header)
    assert all(c.item.header not in t for t in user_turns[1:])
    v = next(c for c in cells if c.item.id == "s3-01")
    turns = [m["content"] for m in v.requests[2].messages if m["role"] == "user"]
    assert v.item.vignette in turns[0] and v.item.vignette not in turns[1]
    assert v.labels == ("Yes", "No") and "A = " not in turns[0]


def test_track_p_uses_years_and_no_headers(make_cfg):
    cells = study.cells_for(make_cfg("framing=track_p"))
    items = {c.item.id for c in cells}
    assert items == {"s1-01", "s1-02", "s1-04", "s1-06", "s1-11", "s1-12", "s2-01", "s2-02"}
    c = next(c for c in cells if c.item.id == "s1-11")
    assert "in 2008 would have answered" in c.requests[0].messages[0]["content"]
    assert c.item.header and all(c.item.header not in m["content"] for m in c.requests[1].messages)


def test_fewshot_exemplars_follow_the_mapping(make_cfg):
    cells = study.cells_for(make_cfg("framing=track_m_fewshot"))
    m1 = next(c for c in cells if c.item.id == "s1-04" and c.mapping == "map1")
    m2 = next(c for c in cells if c.item.id == "s1-04" and c.mapping == "map2")
    # exemplar 1 answers its first option: label A under map-1, B under map-2
    assert m1.requests[0].messages[2] == {"role": "assistant", "content": "A"}
    assert m2.requests[0].messages[2] == {"role": "assistant", "content": "B"}
    yn = next(c for c in cells if c.item.id == "s3-01")
    answers = [m["content"] for m in yn.requests[0].messages if m["role"] == "assistant"]
    assert answers == ["Yes", "No"]


def test_plan_digest_covers_the_item_bank(make_cfg, tmp_path):
    cfg = make_cfg()
    a = study.plan(cfg)
    bank = Path(cfg.study["items"].path).read_text()
    changed = tmp_path / "bank.json"
    changed.write_text(bank.replace("honest and trustworthy", "honest and trustworthy at all", 1))
    cfg.study["items"].path = str(changed)
    b = study.plan(cfg)
    assert a["plan_digest"] != b["plan_digest"]
    assert a["inputs"]["items"]["sha256"] != b["inputs"]["items"]["sha256"]
