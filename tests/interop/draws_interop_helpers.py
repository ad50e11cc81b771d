"""Helpers of the draws study's interop tests: inspect_ai runs made in-process with its
``mockllm`` provider answering planted sequences, and the draws pipeline run on their logs."""

from __future__ import annotations

import json
import random
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lmaudit.pipeline import run

COLOURS = ("red", "blue", "green", "white")
# small Monte Carlo settings (the registered ones are in conf/study/draws.yaml)
SMALL = ("study.permutations=999", "study.sims_per_step=100")


def planted(rng: random.Random, n: int, rho: float) -> list[str]:
    """A planted sequence of ``n`` answers: each repeats the one before with probability ``rho``,
    else is a fresh draw from the sequence's own shares over :data:`COLOURS`."""
    weights = [rng.random() + 0.2 for _ in COLOURS]
    out = [rng.choices(COLOURS, weights)[0]]
    while len(out) < n:
        out.append(out[-1] if rng.random() < rho else rng.choices(COLOURS, weights)[0])
    return out


def eval_inspect(
    log_dir: Path,
    model: str,
    inputs: dict[str, str],
    answer: Callable[[str, str, int], str] | None,
    *,
    epochs: int,
    task_name: str,
    mark_epoch: bool = True,
    log_format: str = "eval",
    model_args: dict[str, Any] | None = None,
    **generate: Any,
) -> Path:
    """Run a task of the samples ``inputs`` (id -> input) with ``epochs`` epochs in-process and
    return its log. With ``answer``, ``mockllm`` answers sample ``s`` at epoch ``e`` with
    ``answer(model, s, e)`` (a solver writes the epoch into the prompt; without ``mark_epoch``
    every epoch is asked, and answered, as the first); without it ``model`` must be a real
    provider. ``generate``: inspect's generate config (``temperature``, ``seed``, ``cache`` ...)."""
    from inspect_ai import Task, eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import ModelOutput, ModelUsage
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate as generate_solver
    from inspect_ai.solver import solver

    @solver
    def epoch_in_prompt() -> Any:
        async def solve(state: Any, generate: Any) -> Any:
            state.user_prompt.text = f"{state.user_prompt.text} (epoch {state.epoch})"
            return state

        return solve

    def reply(messages: list[Any], tools: Any, tool_choice: Any, config: Any) -> Any:
        assert answer is not None
        text = messages[-1].text
        sid = next(k for k, v in inputs.items() if text.startswith(v))
        m = re.search(r"\(epoch (\d+)\)$", text)
        out = ModelOutput.from_content(model=model, content=answer(model, sid, int(m.group(1)) if m else 1))
        out.usage = ModelUsage(input_tokens=5, output_tokens=2, total_tokens=7)
        return out

    task = Task(
        dataset=MemoryDataset([Sample(input=v, target="red", id=k) for k, v in inputs.items()]),
        solver=[epoch_in_prompt(), generate_solver()] if mark_epoch else [generate_solver()],
        scorer=match(),
        name=task_name,
    )
    args = {"custom_outputs": reply} if answer is not None else (model_args or {})
    (log,) = eval(
        task,
        model=model,
        model_args=args,
        epochs=epochs,
        log_dir=str(log_dir),
        log_format=log_format,
        display="none",
        **generate,
    )
    assert log.status == "success", log.error
    return Path(log.location)


def run_inspect(
    log_dir: Path,
    model: str,
    sequences: dict[str, list[str]] | None = None,
    *,
    epochs: int,
    n_samples: int | None = None,
    **kw: Any,
) -> Path:
    """A one-word task (:func:`eval_inspect`). With ``sequences`` (sample id -> answers by
    epoch), ``mockllm`` answers sample ``s`` at epoch ``e`` with ``sequences[s][e - 1]``;
    without, ``n_samples`` samples for a real provider."""
    ids = list(sequences) if sequences is not None else [f"q{i}" for i in range(n_samples or 0)]
    inputs = {s: f"Name a colour in one word (sample {s})." for s in ids}

    def answer(model: str, sid: str, epoch: int) -> str:
        assert sequences is not None
        return f"{sequences[sid][epoch - 1].capitalize()}."

    return eval_inspect(
        log_dir,
        model,
        inputs,
        answer if sequences is not None else None,
        epochs=epochs,
        task_name="colours",
        **kw,
    )


def run_draws(
    make_cfg: Callable[..., Any], import_path: Path | str, name: str, *extra: str
) -> tuple[Path, dict[str, Any]]:
    """The draws pipeline on ``import_path`` (``extra``: more overrides): the run folder and its
    results."""
    cfg = make_cfg("study=draws", f"study.import_path={import_path}", *SMALL, *extra, name=name)
    run(cfg)
    out = Path(cfg.out_dir)
    return out, json.loads((out / "results.json").read_text())


def mlflow_metrics(tmp_path: Path) -> dict[str, float]:
    """The last logged value of every metric of the test's MLflow store."""
    db = sqlite3.connect(tmp_path / "mlruns" / "mlflow.db")
    return {k: v for k, v in db.execute("select key, value from latest_metrics")}


def mlflow_tags(tmp_path: Path) -> dict[str, str]:
    db = sqlite3.connect(tmp_path / "mlruns" / "mlflow.db")
    return dict(db.execute("select key, value from tags"))


def rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "measurements.jsonl").read_text().splitlines()]
