"""A minimal study from another package: asks each question ``n`` times through the cached
sampling contract and reports the share of the most frequent answer per question.

It is registered only through its entry point (``lmaudit.studies``), has no YAML under
``conf/`` (its schema is its config) and writes no file itself.
"""

from __future__ import annotations

import html
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig

from lmaudit.backends.base import SampleRequest
from lmaudit.errors import InputError
from lmaudit.studies import Measured, Measurements, Plan, RunContext, Study, StudyResult, StudyResults


@dataclass
class TinyConfig:
    name: str = "tiny"
    questions: list[str] = field(default_factory=lambda: ["Name a colour.", "Pick a colour."])
    n: int = 12
    seed: int = 7


@dataclass(frozen=True)
class QuestionTally:
    n: int
    mode: str
    mode_share: float


class TinyResults(StudyResults, kw_only=True):
    """The study's results: the most frequent answer of each question and its share."""

    study: str
    questions: dict[str, QuestionTally]

    @property
    def mean_mode_share(self) -> float:
        return sum(q.mode_share for q in self.questions.values()) / len(self.questions)

    def headline(self) -> float | None:
        return self.mean_mode_share

    def metrics(self) -> dict[str, float]:
        return {"mean_mode_share": self.mean_mode_share}

    def tags(self) -> dict[str, str]:
        return {"n_questions": str(len(self.questions))}

    def summary(self) -> str:
        return f"tiny: {len(self.questions)} questions, mean mode share {self.mean_mode_share:.3f}"


class TinyStudy(Study):
    name = "tiny"
    config = TinyConfig
    result_type = TinyResults

    def default_run_name(self, cfg: DictConfig) -> str:
        return f"{cfg.model.name}-n{cfg.study.n}"

    def _requests(self, cfg: DictConfig) -> list[SampleRequest]:
        s = self.settings(cfg)
        if s.n < 1:
            raise InputError(f"study: field 'n' must be >= 1, got {s.n}")
        return [
            SampleRequest(
                messages=({"role": "user", "content": q},), n=s.n, seed=s.seed + i, meta={"probe": f"q{i}"}
            )
            for i, q in enumerate(s.questions)
        ]

    def plan(self, ctx: RunContext) -> Plan:
        reqs = self._requests(ctx.cfg)
        body = {
            "study": self.name,
            "config": self.plan_config(ctx.cfg),
            "inputs": {},
            "requests": [{"messages": list(r.messages), "n": r.n, "seed": r.seed} for r in reqs],
        }
        return Plan.make(body, len(reqs))

    def artifacts(self, plan: Plan) -> dict[str, bytes]:
        return {
            "questions.txt": "".join(r["messages"][0]["content"] + "\n" for r in plan["requests"]).encode()
        }

    def measure(self, plan: Plan, backend: Any, ctx: RunContext) -> Measured:
        reqs = self._requests(ctx.cfg)
        results = backend.sample(reqs, desc="tiny")
        rows = [
            {"question": r.messages[0]["content"], "seed": r.seed, "answers": list(res.texts)}
            for r, res in zip(reqs, results, strict=True)
        ]
        return Measured(
            rows, artifacts={"answers.txt": "".join(" ".join(r["answers"]) + "\n" for r in rows).encode()}
        )

    def analyze(self, cfg: DictConfig, measurements: Measurements) -> StudyResult:
        per = {}
        for i, row in enumerate(measurements.rows, start=1):
            answers = row.get("answers")
            if not isinstance(answers, list) or not answers:
                raise InputError(
                    f"{measurements.source}: record {i}: field 'answers' must be a non-empty list"
                )
            answer, count = Counter(answers).most_common(1)[0]
            per[row["question"]] = QuestionTally(len(answers), answer, count / len(answers))
        return self.result(TinyResults(study=self.name, questions=per))

    def report(self, result: StudyResult, ctx: RunContext) -> str:
        assert isinstance(result.results, TinyResults)
        rows = "".join(
            f"<tr><td>{html.escape(q)}</td><td>{html.escape(v.mode)}</td><td>{v.mode_share:.3f}</td></tr>"
            for q, v in result.results.questions.items()
        )
        return f"<!doctype html><title>tiny</title><table>{rows}</table>"

    def plot_data(self, result: StudyResult) -> dict[str, list[dict[str, Any]]]:
        assert isinstance(result.results, TinyResults)
        return {
            "mode_share": [
                {"question": q, "share": v.mode_share} for q, v in result.results.questions.items()
            ]
        }


__all__ = ["Path", "TinyConfig", "TinyResults", "TinyStudy"]
