"""The judge study's config schema: ``cfg.study`` and its groups ``conf/study/judge/{condition,rubric,wrapper}``.

YAML files only override these dataclasses; every default lives here."""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import MISSING

from lmaudit.config.ranges import ranged


@dataclass
class JudgeConditionSpec:
    id: str = MISSING  # P0, PA, PB, PAB, SWAP ...
    wrap: list[str] = ranged(
        factory=list, distinct=True, subset=("A", "B")
    )  # displayed sides that get the wrapper: A and/or B
    swap: bool = False  # responses A and B exchanged (the parent study's position design)
    description: str = ""


@dataclass
class JudgeConditionSetConfig:
    name: str = MISSING  # the set's name (run names); one job judges every condition of the set
    reference: str = "P0"  # the condition every other one is compared with
    conditions: list[JudgeConditionSpec] = field(default_factory=list)


@dataclass
class JudgeWrapperConfig:
    name: str = MISSING
    prefix: str = MISSING  # added before the unchanged response string
    suffix: str = MISSING  # added after it


@dataclass
class JudgeRubricConfig:
    name: str = MISSING
    text: str = MISSING  # the frozen pairwise rubric
    # the judge prompt; placeholders {rubric} {prompt} {response_a} {response_b}, filled in one pass
    template: str = MISSING
    system: str | None = None  # an optional system turn (None: the rubric lives in the user turn)
    readout_turn: str = MISSING  # log-prob readout: one extra user turn after the judge prompt


@dataclass
class JudgeRetryConfig:
    max_attempts: int = ranged(2, ge=1)  # attempts per judgment, the first included (1: no retry)


@dataclass
class JudgeStudyConfig:
    name: str = "judge"
    candidates_path: str = "data/judge/demo/candidates.jsonl"
    mapping_path: str | None = "data/judge/demo/mapping.json"  # hidden from the judge; read to unblind
    prompt_ids: list[str] | None = None  # None: every prompt of the candidate set
    k: int = ranged(1, ge=1)  # independent judgments per prompt and condition
    temperature: float = ranged(0.7, ge=0)
    top_p: float = ranged(1.0, gt=0, le=1)
    max_tokens: int = ranged(64, ge=1)
    seed: int = 20261007  # every judgment's seed derives from it (recorded per judgment)
    isolation: str = ranged(
        "fresh", choices=("fresh", "shared")
    )  # fresh | shared (shared reproduces a deviation and is recorded as one)
    retry: JudgeRetryConfig = field(default_factory=JudgeRetryConfig)
    readout: bool = True  # P(A), P(B), P(TIE) where the backend has the log-prob contract
    readout_labels: dict[str, str] = field(default_factory=lambda: {"A": "A", "B": "B", "TIE": "TIE"})
    top_k: int = ranged(10, ge=1)
    alpha: float = ranged(0.05, gt=0, lt=1)  # exact intervals and tests
    import_dir: str | None = None  # a folder of lmaudit result files: the older spelling of import_path
    # analyse judgments recorded elsewhere instead of judging: a folder of lmaudit result files
    # (results_<condition>.json), a FastChat <judge>_pair.jsonl or AlpacaEval annotations with the
    # shown order recorded (docs/interop.md, "Judge"); the format is recognised from the content
    import_path: str | None = None
    import_format: str = ranged("auto", choices=("auto", "lmaudit", "fastchat", "alpaca_eval"))
    # FastChat model_answer files (a folder of <model>.jsonl, or one file): the answers' lengths
    # for a FastChat import whose judge prompts do not hold them (docs/interop.md, "Length")
    answers_path: str | None = None
    # the study's groups (conf/study/judge/<group>/), chosen with judge/<group>=<option>
    condition: JudgeConditionSetConfig = MISSING
    rubric: JudgeRubricConfig = MISSING
    wrapper: JudgeWrapperConfig = MISSING
