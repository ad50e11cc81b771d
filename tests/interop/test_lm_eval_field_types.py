"""lm-eval samples and results files whose fields have the wrong type are refused in one line naming
the file, the line and the field, before anything is measured or written: a ``doc_id`` that is a
list or an object (TypeError), a temperature that is a string, a list, too large for a float or
NaN (ValueError, TypeError, OverflowError, or a NaN written into the run's facts until the JSON
writer refused it), ``do_sample`` that is not true or false, a results file whose ``config`` or
``configs`` is not an object (AttributeError), NaN in what the results file contributes. The
files are written as ``lm_eval --log_samples`` writes them (field layout of lm-eval 0.4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_runs import assert_nothing_half_written, error_line, run_cli
from lmaudit.errors import InputError
from lmaudit.interop.lm_eval_samples import read_samples

pytest.importorskip("lm_eval")

DATE = "2024-05-01T10-00-00.000000"
SAMPLES = f"samples_colours_{DATE}.jsonl"
KW = "arguments.gen_args_0.arg_1"


def line(
    doc_id: Any = 0,
    *,
    temperature: Any = 1.0,
    do_sample: Any = True,
    answers: tuple[str, ...] = ("red", "blue", "red"),
) -> dict[str, Any]:
    kwargs = {"until": ["\n"], "do_sample": do_sample, "temperature": temperature}
    return {
        "doc_id": doc_id,
        "doc": {"q": f"Name a colour, item {doc_id}", "a": "red"},
        "target": "red",
        "arguments": {"gen_args_0": {"arg_0": f"Name a colour, item {doc_id}:", "arg_1": kwargs}},
        "resps": [list(answers)],
        "filtered_resps": [answers[0]],
        "filter": "first",
        "metrics": ["exact_match"],
        "doc_hash": f"hash-{doc_id}",
        "prompt_hash": "p",
        "target_hash": "t",
        "exact_match": 1.0,
    }


def results(**over: Any) -> dict[str, Any]:
    doc = {
        "results": {"colours": {"alias": "colours", "exact_match,first": 0.5}},
        "configs": {"colours": {"task": "colours", "output_type": "generate_until", "repeats": 3,
                                "generation_kwargs": {"until": ["\n"], "do_sample": True, "temperature": 1.0}}},
        "config": {"model": "lmaudit-planted", "model_args": "pretrained=m1", "use_cache": None, "gen_kwargs": None},
        "model_name": "m1",
        "model_source": "lmaudit-planted",
    }  # fmt: skip
    doc.update(over)
    return doc


def write(folder: Path, lines: list[str], res: dict[str, Any] | str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    samples = folder / SAMPLES
    samples.write_text("".join(x + "\n" for x in lines))
    if res is not None:
        (folder / f"results_{DATE}.json").write_text(res if isinstance(res, str) else json.dumps(res))
    return samples


def test_the_files_as_lm_eval_writes_them_are_read(tmp_path: Path) -> None:
    samples = write(tmp_path, [json.dumps(line(0)), json.dumps(line(1))], results())
    source, sequences = read_samples(samples, SAMPLES)
    assert source.family == "m1" and len(sequences) == 2
    assert source.facts["temperature"] == [1.0] and source.facts["do_sample"] is True


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (json.dumps(line([1])), "field 'doc_id' must be an integer or a string, got list"),
        (json.dumps(line({"i": 1})), "field 'doc_id' must be an integer or a string, got object"),
        (json.dumps(line(True)), "field 'doc_id' must be an integer or a string, got boolean"),
        (json.dumps(line(temperature="hot")), f"field '{KW}.temperature' must be a number, got string 'hot'"),
        (json.dumps(line(temperature=[1])), f"field '{KW}.temperature' must be a number, got list [1]"),
        (
            json.dumps(line(temperature=10**400)),
            f"field '{KW}.temperature' is a number too large for a float",
        ),
        (json.dumps(line(temperature=float("nan"))), f"field '{KW}.temperature' is NaN, not a finite number"),
        (
            json.dumps(line(temperature=float("-inf"))),
            f"field '{KW}.temperature' is -Infinity, not a finite number",
        ),
        (
            json.dumps(line(do_sample="false")),
            f"field '{KW}.do_sample' must be true or false, got string 'false'",
        ),
        (json.dumps({**line(), "doc_hash": 7}), "field 'doc_hash' must be a string, got integer"),
    ],
    ids=[
        "doc-list",
        "doc-object",
        "doc-bool",
        "temp-str",
        "temp-list",
        "temp-huge",
        "temp-nan",
        "temp-inf",
        "do-sample-str",
        "hash-int",
    ],
)
def test_a_samples_field_of_the_wrong_type_names_file_line_and_field(
    tmp_path: Path, text: str, said: str
) -> None:
    samples = write(tmp_path, [json.dumps(line(0)), text], results())
    with pytest.raises(InputError) as info:
        read_samples(samples, SAMPLES)
    assert str(info.value) == f"{samples}: line 2: {said}"


@pytest.mark.parametrize(
    ("res", "said"),
    [
        (results(config=["model_args", "pretrained=m1"]), "field 'config' must be an object, got list"),
        (results(configs=[{"task": "colours"}]), "field 'configs' must be an object, got list"),
        (
            results(configs={"colours": ["generate_until"]}),
            "field 'configs.colours' must be an object, got list",
        ),
        (
            json.dumps(results()).replace('"repeats": 3', '"repeats": NaN'),
            "field 'configs.colours.repeats' holds NaN or Infinity, not a finite number",
        ),
        (
            json.dumps(results()).replace('"pretrained=m1"', '{"pretrained": "m1", "scale": Infinity}'),
            "field 'config.model_args' holds NaN or Infinity, not a finite number",
        ),
    ],
    ids=["config-list", "configs-list", "task-config-list", "repeats-nan", "model-args-inf"],
)
def test_a_results_field_of_the_wrong_type_names_file_and_field(
    tmp_path: Path, res: dict[str, Any] | str, said: str
) -> None:
    samples = write(tmp_path, [json.dumps(line(0))], res)
    with pytest.raises(InputError) as info:
        read_samples(samples, SAMPLES)
    assert str(info.value) == f"{tmp_path / f'results_{DATE}.json'}: {said}"


def test_a_run_given_a_nan_temperature_ends_in_one_line_with_nothing_half_written(tmp_path: Path) -> None:
    samples = write(
        tmp_path / "m1",
        [json.dumps(line(0)), json.dumps(line(1, temperature=float("nan")))],
        results(),
    )
    out = tmp_path / "run"
    proc = run_cli(
        "study=draws",
        f"study.import_path={samples}",
        f"out_dir={out}",
        f"paths.cache={tmp_path / 'cache'}",
        "mlflow.enabled=false",
        "progress=false",
    )
    assert proc.returncode == 2, proc.stderr
    assert (
        error_line(proc) == f"error: {samples}: line 2: field '{KW}.temperature' is NaN, not a finite number"
    )
    assert_nothing_half_written(out)
