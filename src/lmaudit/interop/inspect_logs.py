"""inspect_ai logs as draw sequences: each sample's epochs in epoch order, read with inspect_ai's
own reader (``inspect_ai.log``), and what the log gets wrong for draw-to-draw analysis.

* An epoch whose model call was answered from inspect's cache (``ModelEvent.cache == "read"``)
  is a copy of another draw: excluded and counted. Under a ``CachePolicy(per_epoch=False)``
  every epoch after the first reads the first one's answer; where a sample carries no model
  events to tell, its later epochs are excluded as presumed copies.
* A ``seed`` in the generate config sends every epoch with the same seed: flagged.
* The temperature (the eval's generate config, the plan's, and each model call's) is recorded;
  temperature 0 is flagged as greedy.
* Epochs that ended in an error are excluded; a log that did not finish is flagged.

Only model calls made while solving (before the first score event) count: a grader's calls
do not make the answer.

Each epoch's score of the log's primary scorer (the first in its results) is kept for the
error bars (:mod:`lmaudit.interop.scores`), mapped to a number by inspect's own
``value_to_float`` (C 1, I 0, P 0.5, N 0), with the accuracy and stderr the log reports.

A log is read only when what it holds fits the bound on one input file
(:data:`lmaudit.provenance.io.MAX_INPUT_BYTES`): a ``.json`` log by its size, a ``.eval`` log
(a zip archive) by the sizes its zip directory declares for its entries once expanded, checked
before any entry is read (a 2 MB archive can hold a 2 GB sample).

inspect_ai reads a log inside its own asyncio loop: every call into it holds SIGTERM
(:func:`lmaudit.interrupts.sigterm_deferred`), which is raised between two samples instead of
inside the loop, where asyncio would keep it and the process would never end.
"""

from __future__ import annotations

import math
import os
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lmaudit.errors import InputError
from lmaudit.interop.records import Draw, LogSequence, LogSource, tool_module
from lmaudit.interrupts import sigterm_deferred
from lmaudit.provenance import io
from lmaudit.provenance.io import open_input

__all__ = ["list_logs", "read_log", "require"]


def _api(path: str | Path) -> Any:
    return tool_module("inspect_ai.log", "inspect-ai", path)


def require(path: str | Path) -> None:
    """InputError (one line) when inspect_ai is not installed."""
    _api(path)


def _unreadable(path: str | Path, e: Exception) -> InputError:
    first = (str(e).strip().splitlines() or [""])[0]
    return InputError(f"{path}: inspect_ai could not read this log ({type(e).__name__}: {first})")


def check_size(path: str | Path) -> None:
    """InputError (one line, naming the log and, for a ``.eval`` archive, its largest entry)
    when the log holds more than :data:`lmaudit.provenance.io.MAX_INPUT_BYTES`: a ``.eval``
    archive by the expanded sizes its zip directory declares (Python's ``zipfile``, which
    inspect_ai reads with, never expands an entry past its declared size), anything else by its
    size. Nothing but the zip directory is read."""
    limit = io.MAX_INPUT_BYTES
    with open_input(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        try:
            with zipfile.ZipFile(fh) as z:
                entries = z.infolist()
        except (zipfile.BadZipFile, EOFError, OSError, ValueError):  # a .json log, or a damaged
            entries = []  # archive, which inspect_ai's reader names
    if entries:
        expanded = sum(e.file_size for e in entries)
        if expanded > limit:
            big = max(entries, key=lambda e: e.file_size)
            raise InputError(
                f"{path}: its zip entries expand to {expanded:,} bytes (entry {big.filename!r} alone to "
                f"{big.file_size:,}), more than {limit:,}, the most lmaudit reads from one input file; "
                "refused before reading"
            )
    elif size > limit:
        raise InputError(f"{path}: larger than {limit:,} bytes, the most lmaudit reads from one input file")


def list_logs(folder: str | Path) -> list[Path]:
    """The logs of an inspect ``log_dir`` (recursively, as ``inspect_ai.log.list_eval_logs``
    lists them), in path order."""
    api = _api(folder)
    from urllib.parse import unquote, urlparse

    out = []
    with sigterm_deferred():
        infos = api.list_eval_logs(str(folder), recursive=True)
    for info in infos:
        name = info.name
        out.append(Path(unquote(urlparse(name).path)) if name.startswith("file:") else Path(name))
    return sorted(out)


def _policy(cache: Any) -> dict[str, Any] | None:
    """A cache setting (True, a CachePolicy, or its dict in a plan step) as ``{per_epoch}``."""
    if cache is None or cache is False:
        return None
    if cache is True:
        return {"per_epoch": True}
    per_epoch = cache.get("per_epoch", True) if isinstance(cache, dict) else getattr(cache, "per_epoch", True)
    return {"per_epoch": bool(per_epoch)}


def _solver_calls(sample: Any) -> list[Any]:
    """The sample's model events made while solving (before its first score event)."""
    calls = []
    for event in sample.events or []:
        if event.event == "score":
            break
        if event.event == "model":
            calls.append(event)
    return calls


class _Tally:
    """Settings and counts gathered over a log's header and model calls."""

    def __init__(self) -> None:
        self.temperatures: set[float | None] = set()
        self.seeds: set[int] = set()
        self.policies: list[dict[str, Any]] = []
        self.excluded: dict[str, int] = {}
        self.seeded_calls = self.greedy_calls = self.calls = self.cache_reads = 0
        self.no_events = 0

    def config(self, cfg: Any, *, call: bool) -> None:
        temperature, seed = getattr(cfg, "temperature", None), getattr(cfg, "seed", None)
        policy = _policy(getattr(cfg, "cache", None))
        if policy is not None and policy not in self.policies:
            self.policies.append(policy)
        if seed is not None:
            self.seeds.add(int(seed))
        if call:
            self.calls += 1
            self.temperatures.add(None if temperature is None else float(temperature))
            self.seeded_calls += seed is not None
            self.greedy_calls += temperature is not None and float(temperature) == 0.0
        elif temperature is not None:
            self.temperatures.add(float(temperature))

    @property
    def shared_cache(self) -> bool:
        return any(not p["per_epoch"] for p in self.policies)


def _why(sample: Any, calls: list[Any], tally: _Tally, first: bool) -> str | None:
    """Why this epoch is not an independent draw (None: it is one)."""
    if sample.error is not None:
        return "error"
    if any(c.cache == "read" for c in calls):
        return "cache_read"
    if not calls and tally.shared_cache and not first:
        return "presumed_cache_copy"
    return None


def _prompt(given: Any) -> str:
    """A sample's input as text: the string, or its user messages' text joined by blank lines."""
    if isinstance(given, str):
        return given
    return "\n\n".join(m.text for m in given if getattr(m, "role", None) == "user")


def _samples(api: Any, path: Path) -> Iterator[Any]:
    """The log's samples, one at a time, each read with SIGTERM held."""
    end = object()
    try:
        samples = api.read_eval_log_samples(str(path), all_samples_required=False, exclude_fields={"store"})
        while True:
            with sigterm_deferred():
                sample = next(samples, end)
            if sample is end:
                return
            yield sample
    except (InputError, KeyboardInterrupt):
        raise
    except Exception as e:  # the reader's own errors, named for the user
        raise _unreadable(path, e) from None


def read_log(path: str | Path, name: str) -> tuple[LogSource, list[LogSequence]]:
    """One inspect log: its source (run and task, with the audit) and one sequence per sample.

    ``name`` is how the log is named in results (its path relative to the import path)."""
    path = Path(path)
    api = _api(path)
    check_size(path)
    try:
        with sigterm_deferred():
            header = api.read_eval_log(str(path), header_only=True)
    except Exception as e:
        raise _unreadable(path, e) from None
    spec = header.eval
    if spec.dataset.sample_ids is None and not spec.dataset.samples:
        raise InputError(f"{path}: the log holds no samples (run inspect with log_samples on)")
    task, model = str(spec.task), str(spec.model)
    tally = _Tally()
    tally.config(api.effective_generate_config(header), call=False)
    if header.plan is not None:
        tally.config(header.plan.config, call=False)
        for step in header.plan.steps:
            policy = _policy(step.params.get("cache"))
            if policy is not None and policy not in tally.policies:
                tally.policies.append(policy)
    by_id: dict[str, list[tuple[int, str, list[Any], Any]]] = {}
    scorer = _primary_scorer(header)
    scored: dict[str, list[tuple[int, Any]]] = {}
    for sample in _samples(api, path):
        calls = _solver_calls(sample)
        for c in calls:
            tally.config(c.config, call=True)
        tally.cache_reads += sum(c.cache == "read" for c in calls)
        tally.no_events += not calls
        text = sample.output.completion if sample.output is not None else ""
        by_id.setdefault(str(sample.id), []).append((int(sample.epoch), text, calls, sample))
        scorer = scorer or next(iter(sample.scores or {}), None)
        if scorer is not None and scorer in (sample.scores or {}):
            scored.setdefault(str(sample.id), []).append((int(sample.epoch), sample.scores[scorer].value))
    if not by_id:
        raise InputError(f"{path}: the log holds no samples (status {header.status!r})")
    order = [str(i) for i in spec.dataset.sample_ids or []]
    ids = [i for i in order if i in by_id] + sorted(set(by_id) - set(order))
    source = f"{task}@{spec.run_id}"
    sequences = []
    for sid in ids:
        draws = []
        kept = 0
        for epoch, text, calls, sample in sorted(by_id[sid], key=lambda t: t[0]):
            why = _why(sample, calls, tally, first=not kept)
            kept += why is None
            if why is not None:
                tally.excluded[why] = tally.excluded.get(why, 0) + 1
            draws.append(Draw(epoch, text, why))
        prompt = _prompt(by_id[sid][0][3].input)
        sequences.append(
            LogSequence(model, source, task, f"{task}/{sid}", draws, {"file": name, "sample_id": sid}, prompt)
        )
    src = _source(header, name, source, tally, len(ids))
    src.scores = _scores(header, scorer, scored, [i for i in ids if i in scored])
    return src, sequences


def _primary_scorer(header: Any) -> str | None:
    """The scorer the log's results list first (None: the log has no results)."""
    first = next(iter(getattr(header.results, "scores", None) or []), None)
    return None if first is None else str(first.scorer)


def _scores(
    header: Any, scorer: str | None, scored: dict[str, list[tuple[int, Any]]], ids: list[str]
) -> dict[str, Any] | None:
    """The primary scorer's scores per sample in epoch order, with what the log reports of them
    (None: no sample was scored, or a score is not one value)."""
    if scorer is None or not ids:
        return None
    from inspect_ai.scorer import value_to_float

    if any(isinstance(v, list | dict) for epochs in scored.values() for _, v in epochs):
        return None  # one number per score is what a standard error is of
    to_float = value_to_float()
    entry = next((s for s in getattr(header.results, "scores", None) or [] if str(s.scorer) == scorer), None)
    metrics = getattr(entry, "metrics", None) or {}

    def reported(name: str) -> float | None:
        metric = metrics.get(name)
        value = getattr(metric, "value", None)
        return float(value) if isinstance(value, int | float) and math.isfinite(value) else None

    epochs = getattr(header.eval.config, "epochs", None) or 1
    return {
        "scorer": scorer,
        "clusters": {sid: [to_float(v) for _, v in sorted(scored[sid], key=lambda t: t[0])] for sid in ids},
        "log": {
            "accuracy": reported("accuracy"),
            "stderr": reported("stderr"),
            # inspect reduces a sample's epochs (by the mean unless told otherwise) before its metrics
            "over": "samples" if epochs > 1 else "scores",
            "reducer": (getattr(entry, "reducer", None) or "mean") if epochs > 1 else None,
        },
    }


def _source(header: Any, name: str, source: str, tally: _Tally, n_samples: int) -> LogSource:
    spec = header.eval
    temps = sorted(tally.temperatures, key=lambda t: (t is not None, t or 0.0))
    facts = {
        "task": str(spec.task),
        "run_id": spec.run_id,
        "eval_id": spec.eval_id,
        "model": str(spec.model),
        "status": str(header.status),
        "epochs": getattr(spec.config, "epochs", None),
        "samples": n_samples,
        "model_calls": tally.calls,
        "model_calls_from_cache": tally.cache_reads,
        "temperature": temps,
        "seed": sorted(tally.seeds),
        "cache_policies": tally.policies,
        "greedy": bool(temps) and all(t == 0.0 for t in temps if t is not None) and None not in temps,
    }
    src = LogSource(source, str(spec.model), "inspect", [name], facts)
    ex = tally.excluded
    src.issue(
        "cache_copies",
        ex.get("cache_read", 0),
        "excluded",
        "epochs answered from inspect's cache (ModelEvent.cache = read) are copies of another draw",
    )
    src.issue(
        "presumed_cache_copies",
        ex.get("presumed_cache_copy", 0),
        "excluded",
        "CachePolicy(per_epoch=False) and no model events to check: later epochs presumed copies of the first",
    )
    src.issue(
        "cache_shared_across_epochs",
        int(tally.shared_cache),
        "flagged",
        "a CachePolicy with per_epoch=False serves one answer to every epoch of a sample",
    )
    src.issue(
        "same_seed",
        tally.seeded_calls or int(bool(tally.seeds)),
        "flagged",
        f"every epoch sent with the same seed ({', '.join(map(str, sorted(tally.seeds)))}): epochs are not "
        "independent draws",
    )
    src.issue(
        "greedy",
        tally.greedy_calls,
        "flagged",
        "model calls at temperature 0: repeats of a greedy answer, not draws",
    )
    src.issue("errors", ex.get("error", 0), "excluded", "epochs that ended in an error")
    src.issue(
        "no_model_events",
        tally.no_events,
        "flagged",
        "epochs with no model events: whether a cache answered them cannot be checked",
    )
    src.issue(
        "incomplete",
        int(str(header.status) != "success"),
        "flagged",
        f"the eval did not finish (status {header.status}): samples may be missing",
    )
    return src
