"""lm-evaluation-harness samples files as draw sequences: each doc's ``resps`` in order, the
model named by the ``results_<date>.json`` lm-eval writes beside them, and what the files get
wrong for draw-to-draw analysis.

lm-eval writes ``samples_<task>_<date>.jsonl`` and ``results_<date>.json`` under an output
folder per model (``lm_eval --output_path ... --log_samples``); file names are read with
lm-eval's own helpers (``lm_eval.utils``). It has no reader for the samples lines: they are
JSON, one a doc and filter.

* One line per filter repeats the same doc and the same ``resps``: de-duplicated, counted.
* Repeats made without ``do_sample`` are greedy (identical answers, served from lm-eval's
  cache when ``use_cache`` is set): flagged, and the family named as greedy.
* A samples file with no results file beside it, or whose results file names no model
  (lm-eval then makes up a random name), cannot be tied to a model: its family is
  ``unidentified:<folder>``, flagged, and it is still analysed.

Each doc's score (the first metric its line names, of the first filter's line: lm-eval's filter
reduces a doc's repeats to one answer and scores that) is kept for the error bars
(:mod:`lmaudit.interop.scores`), with the value and stderr the results file reports for it.

Fields read are checked for the types lm-eval writes (``doc_id`` an integer or a string,
``doc_hash`` a string, a doc's ``temperature`` a finite number, ``do_sample`` true or false, the
results file's ``config``, ``configs`` and task config objects, and no NaN or Infinity in what the
results file contributes to the run's facts): anything else is refused in one line naming the
file, the line and the field, before anything is measured or written.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lmaudit.errors import InputError, StrictJsonError
from lmaudit.interop.records import Draw, LogSequence, LogSource, tool_module
from lmaudit.provenance.io import MAX_INPUT_BYTES, open_input, read_utf8
from lmaudit.provenance.jsoncheck import bounded_loads, json_type

__all__ = ["files_read", "list_samples", "read_samples", "results_path", "task_of"]


def _utils(path: str | Path) -> Any:
    return tool_module("lm_eval.utils", "lm-eval", path)


def results_path(samples: str | Path) -> Path:
    """The ``results_<date>.json`` lm-eval wrote with ``samples`` (it may not exist)."""
    samples = Path(samples)
    return samples.parent / f"results_{_utils(samples).get_file_datetime(samples.name)}.json"


def task_of(samples: str | Path) -> str:
    """The task a samples file is of: ``samples_<task>_<date>.jsonl``."""
    name = Path(samples).name
    if not name.startswith("samples_") or name.count("_") < 2:
        raise InputError(f"{samples}: not named as lm-eval names samples files (samples_<task>_<date>.jsonl)")
    return name[len("samples_") : name.rfind("_")]


def files_read(samples: str | Path) -> list[Path]:
    """The samples file and, when it exists, the results file beside it."""
    res = results_path(samples)
    return [Path(samples), res] if res.is_file() else [Path(samples)]


def list_samples(folder: str | Path) -> list[Path]:
    """Every samples file under an lm-eval output folder, with its results file, in path order."""
    utils = _utils(folder)
    names = utils.get_sample_results_filenames([p.as_posix() for p in Path(folder).rglob("samples_*.jsonl")])
    out: list[Path] = []
    for name in sorted(names):
        out += files_read(name)
    return out


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The samples lines as lm-eval wrote them (metrics may hold NaN, which lm-eval writes)."""
    with open_input(path) as fh:
        for lineno, raw in enumerate(iter(lambda: fh.readline(MAX_INPUT_BYTES + 1), b""), start=1):
            if not raw.strip():
                continue
            try:
                obj = bounded_loads(raw.decode("utf-8"))
            except StrictJsonError as e:
                raise InputError(f"{path}: line {lineno}: {e}") from None
            except (UnicodeDecodeError, ValueError) as e:
                raise InputError(f"{path}: line {lineno}: not valid JSON ({e})") from None
            if not isinstance(obj, dict):
                raise InputError(f"{path}: line {lineno}: expected a JSON object, got {type(obj).__name__}")
            yield lineno, obj


def _model(results: dict[str, Any] | None, samples: Path) -> tuple[str, str | None]:
    """``(family, why it is unidentified or None)``."""
    unknown = f"unidentified:{samples.parent.name}"
    if results is None:
        return unknown, f"no results file beside it ({results_path(samples).name})"
    name = results.get("model_name")
    args = (results.get("config") or {}).get("model_args")
    given = [str(v) for v in args.values()] if isinstance(args, dict) else [str(args or "")]
    # lm-eval takes the name from model_args (pretrained=, model=, path=, engine= ...) and makes
    # up a random one when there is none: a name model_args does not hold identifies nothing
    if not isinstance(name, str) or not name or not any(name in g for g in given):
        return unknown, "the results file names no model (model_args has no pretrained=, model= or path=)"
    return name, None


_GEN_KWARGS = "arguments.gen_args_0.arg_1"  # where lm-eval writes a doc's generation kwargs


def _gen_kwargs(obj: dict[str, Any]) -> dict[str, Any]:
    args = obj.get("arguments")
    first = args.get("gen_args_0") if isinstance(args, dict) else None
    kw = first.get("arg_1") if isinstance(first, dict) else None
    return kw if isinstance(kw, dict) else {}


def _temperature(kw: dict[str, Any], where: str) -> float | None:
    """The doc's temperature (None: not given); InputError unless it is a finite number."""
    temp = kw.get("temperature")
    if temp is None:
        return None
    field = f"{_GEN_KWARGS}.temperature"
    if isinstance(temp, bool) or not isinstance(temp, int | float):
        raise InputError(f"{where}: field {field!r} must be a number, got {json_type(temp)} {temp!r:.40}")
    try:
        value = float(temp)
    except OverflowError:
        raise InputError(f"{where}: field {field!r} is a number too large for a float") from None
    if not math.isfinite(value):
        raise InputError(f"{where}: field {field!r} is {json.dumps(temp)}, not a finite number")
    return value


def _do_sample(kw: dict[str, Any], where: str) -> bool:
    flag = kw.get("do_sample")
    if flag is not None and not isinstance(flag, bool):
        raise InputError(
            f"{where}: field '{_GEN_KWARGS}.do_sample' must be true or false, got {json_type(flag)} {flag!r:.40}"
        )
    return bool(flag)


def _check_doc(obj: dict[str, Any], where: str) -> None:
    """The identifying fields of a samples line have the types lm-eval writes."""
    doc = obj["doc_id"]
    if isinstance(doc, bool) or not isinstance(doc, int | str):
        raise InputError(f"{where}: field 'doc_id' must be an integer or a string, got {json_type(doc)}")
    if not isinstance(obj["doc_hash"], str):
        raise InputError(f"{where}: field 'doc_hash' must be a string, got {json_type(obj['doc_hash'])}")


def _object(value: Any, where: str, field: str) -> dict[str, Any]:
    """A results-file field that must be a JSON object when present (``{}`` when absent or null)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"{where}: field {field!r} must be an object, got {json_type(value)}")
    return value


def _finite(where: str, fields: dict[str, Any]) -> None:
    """What the results file contributes to the run's facts (``fields``: JSON path -> value)
    holds no NaN or Infinity: the facts are written as JSON, which has neither."""
    for field, value in fields.items():
        try:
            json.dumps(value, allow_nan=False)
        except ValueError:
            raise InputError(f"{where}: field {field!r} holds NaN or Infinity, not a finite number") from None


def _answers(obj: dict[str, Any], where: str, output_type: str | None) -> list[str]:
    resps = obj.get("resps")
    if (
        isinstance(resps, list)
        and len(resps) == 1
        and isinstance(resps[0], list)
        and resps[0]
        and all(isinstance(r, str) for r in resps[0])
        and output_type in (None, "generate_until")
    ):
        return list(resps[0])
    raise InputError(
        f"{where}: field 'resps' holds no sampled answers (task output_type {output_type!r}); only "
        "generate_until tasks make draws"
    )


def _score(obj: dict[str, Any]) -> tuple[str, float] | None:
    """The line's first metric and its value (None: no metric named, or not one finite number)."""
    names = obj.get("metrics")
    name = names[0] if isinstance(names, list) and names and isinstance(names[0], str) else None
    value = obj.get(name) if name is not None else None
    if name is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return (name, float(value)) if math.isfinite(value) else None


def _scores(
    scores: dict[Any, tuple[str, float] | None],
    docs: dict[Any, tuple[int, str, list[str], str | None]],
    task: str,
    reported: Any,
) -> dict[str, Any] | None:
    """Each doc's score of one metric (one score per doc), with what the results file reports of
    it (None: a doc has no number under the metric the first doc names)."""
    first = next(iter(scores.values()), None)
    if first is None or any(v is None or v[0] != first[0] for v in scores.values()):
        return None
    metric = first[0]
    flt = next(iter(docs.values()))[3] or "none"
    reported = reported if isinstance(reported, dict) else {}

    def number(key: str) -> float | None:
        value = reported.get(key)
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        return float(value) if ok else None

    return {
        "scorer": f"{metric},{flt}",
        "clusters": {str(d): [v[1]] for d, v in scores.items() if v is not None},
        "log": {
            "accuracy": number(f"{metric},{flt}"),
            "stderr": number(f"{metric}_stderr,{flt}"),
            "over": "docs",
            "reducer": flt,
        },
    }


def read_samples(path: str | Path, name: str) -> tuple[LogSource, list[LogSequence]]:
    """One samples file: its source (the run's results file, with the audit) and one sequence per
    doc. ``name`` is how the file is named in results (its path relative to the import path)."""
    path = Path(path)
    task = task_of(path)
    res_file = results_path(path)
    results = None
    if res_file.is_file():
        try:
            results = bounded_loads(read_utf8(res_file))
        except StrictJsonError as e:
            raise InputError(f"{res_file}: {e}") from None
        except ValueError as e:
            raise InputError(f"{res_file}: not valid JSON ({e})") from None
        if not isinstance(results, dict):
            raise InputError(f"{res_file}: expected a JSON object (lm-eval's results)")
    config = _object((results or {}).get("config"), str(res_file), "config")
    configs = _object((results or {}).get("configs"), str(res_file), "configs")
    task_cfg = _object(configs.get(task), str(res_file), f"configs.{task}")
    family, unidentified = _model(results, path)
    output_type = task_cfg.get("output_type")
    source = res_file.name if results is not None else path.name
    docs: dict[Any, tuple[int, str, list[str], str | None]] = {}
    scores: dict[Any, tuple[str, float] | None] = {}
    duplicates = disagree = greedy = no_sample = seeded = 0
    temperatures: set[float | None] = set()
    filters: list[str] = []
    for lineno, obj in _lines(path):
        where = f"{path}: line {lineno}"
        for key in ("doc_id", "doc_hash", "resps"):
            if key not in obj:
                raise InputError(f"{where}: missing field {key!r} (not an lm-eval samples line)")
        _check_doc(obj, where)
        answers = _answers(obj, where, output_type)
        flt = obj.get("filter")
        if isinstance(flt, str) and flt not in filters:
            filters.append(flt)
        kw = _gen_kwargs(obj)
        temp, sampled = _temperature(kw, where), _do_sample(kw, where)  # checked on every line
        doc = obj["doc_id"]
        if doc in docs:  # the same doc again, for another filter
            duplicates += 1
            disagree += docs[doc][2] != answers
            continue
        temperatures.add(temp)
        no_sample += not sampled
        greedy += not sampled or temp == 0.0
        seeded += kw.get("seed") is not None
        docs[doc] = (lineno, str(obj["doc_hash"]), answers, flt if isinstance(flt, str) else None)
        scores[doc] = _score(obj)
    if not docs:
        raise InputError(f"{path}: no samples (the file is empty)")
    sequences = [
        LogSequence(
            family,
            source,
            task,
            doc_hash,
            [Draw(i, t) for i, t in enumerate(answers)],
            {"file": name, "doc_id": doc, "line": lineno},
        )
        for doc, (lineno, doc_hash, answers, _) in docs.items()  # lm-eval's doc order
    ]
    temps = sorted(temperatures, key=lambda t: (t is not None, t or 0.0))
    facts = {
        "task": task,
        "model_source": (results or {}).get("model_source") or config.get("model"),
        "model_name": (results or {}).get("model_name"),
        "model_args": config.get("model_args"),
        "output_type": output_type,
        "repeats": task_cfg.get("repeats"),
        "generation_kwargs": task_cfg.get("generation_kwargs"),
        "gen_kwargs_override": config.get("gen_kwargs"),
        "use_cache": config.get("use_cache"),
        "filters": filters,
        "docs": len(docs),
        "temperature": temps,
        "do_sample": len(docs) - no_sample == len(docs),
        "greedy": greedy == len(docs),
    }
    _finite(
        str(res_file),
        {
            "model_source": facts["model_source"],
            "model_name": facts["model_name"],
            "config.model_args": facts["model_args"],
            f"configs.{task}.output_type": output_type,
            f"configs.{task}.repeats": facts["repeats"],
            f"configs.{task}.generation_kwargs": facts["generation_kwargs"],
            "config.gen_kwargs": facts["gen_kwargs_override"],
            "config.use_cache": facts["use_cache"],
        },
    )
    files = [name] + ([Path(name).with_name(res_file.name).as_posix()] if results is not None else [])
    src = LogSource(source, family, "lm_eval", files, facts)
    src.scores = _scores(scores, docs, task, ((results or {}).get("results") or {}).get(task))
    src.issue(
        "filter_duplicates",
        duplicates,
        "de-duplicated",
        "lm-eval writes one line per filter: the same doc and the same resps again",
    )
    src.issue(
        "filter_lines_disagree", disagree, "flagged", "lines of one doc whose resps differ between filters"
    )
    cache = f" and served from lm-eval's cache ({config.get('use_cache')})" if config.get("use_cache") else ""
    src.issue(
        "no_do_sample",
        no_sample,
        "flagged",
        f"docs whose repeats were made without do_sample: greedy, identical{cache}, not draws",
    )
    src.issue("greedy", greedy, "flagged", "docs generated greedily (no do_sample, or temperature 0)")
    src.issue("same_seed", seeded, "flagged", "docs whose repeats were all sent with one seed")
    src.issue(
        "unidentified_model", int(unidentified is not None), "flagged", f"model unknown: {unidentified}"
    )
    return src, sequences
