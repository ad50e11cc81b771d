"""How ``run.py`` speaks to a new user: its own errors for options and keys that do not exist
(``+key`` included), ``--help``, one line for a backend that cannot answer, and run names that
say which run it is."""

from __future__ import annotations

import json
import shutil
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from cli_runs import run_cli, scratch_paths
from lmaudit.errors import InputError
from lmaudit.pipeline import run

REPO = Path(__file__).resolve().parents[1]


def _run(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    return run_cli(
        *scratch_paths(tmp_path),
        "progress=false",
        *overrides,
    )


def _error(proc: subprocess.CompletedProcess[str]) -> str:
    """The one ``error:`` line a refused run ends with (no traceback)."""
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert [x for x in lines if x.startswith("error: ")] == lines[-1:], proc.stderr
    return lines[-1]


# --- errors of our own ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arg", "said"),
    [
        ("framing=track_x", "the qq study's framing group has no option 'track_x' (options: track_m, "),
        ("model=sim_projectiv", "did you mean sim_projective?"),
        ("judge/condition=P1", "(options: P0, PA, PAB, PB, SWAP, all, position, wrapper)"),
    ],
)
def test_a_wrong_group_option_lists_the_real_options(tmp_path: Path, arg: str, said: str) -> None:
    proc = _run(tmp_path, arg, "stage=plan")
    line = _error(proc)
    assert proc.returncode == 2 and line.startswith(f"error: {arg}: ") and said in line, line
    assert "_framing" not in line and "_sim" not in line and "_condition" not in line
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("arg", ["+study.epsilonn=0.1", "study.epsilonn=0.1"])
def test_a_misspelt_key_is_refused_even_with_a_plus(tmp_path: Path, arg: str) -> None:
    proc = _run(tmp_path, "model=sim_projective", "items=sim_demo", arg, "stage=plan")
    line = _error(proc)
    assert proc.returncode == 2
    assert line.startswith(f"error: {arg}: 'study' has no key 'epsilonn' (keys: name, estimand, framing, ")
    assert line.endswith("; did you mean study.epsilon?")
    assert not (tmp_path / "results").exists()  # nothing planned, nothing frozen


def test_a_composed_config_with_an_added_key_is_refused_in_process(make_cfg) -> None:
    cfg = make_cfg("model=sim_projective", "items=sim_demo", "+study.gates.g3.nn=5", "stage=plan")
    with pytest.raises(InputError, match=r"study\.gates\.g3\.nn .*did you mean study\.gates\.g3\.n\?"):
        run(cfg)


def test_a_misspelt_option_value_gets_the_real_one(tmp_path: Path) -> None:
    proc = _run(tmp_path, "stage=analyse")
    line = _error(proc)
    assert proc.returncode == 2
    assert line == (
        "error: stage=analyse: 'stage' has no option 'analyse' "
        "(options: plan, freeze, measure, analyze, report, all); did you mean analyze?"
    )
    assert not (tmp_path / "results").exists()


def test_a_composed_config_with_a_misspelt_option_value_gets_the_real_one(make_cfg) -> None:
    with pytest.raises(InputError, match=r"stage = 'analyse' is out of range .*; did you mean analyze\?$"):
        run(make_cfg("model=sim_projective", "items=sim_demo", "stage=analyse"))


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("study=draws", "study.n_draws=5"), "; did you mean study.n?"),
        (("study.n_draws=5",), "; did you mean study.estimand.n or study.gates.g3.n?"),
        (("estimand=sampled", "estimand.temp=0.5"), "; did you mean study.estimand.temperature?"),
        (("study.gates.g3.nn=5",), "; did you mean study.gates.g3.n?"),
    ],
)
def test_a_key_that_does_not_exist_gets_the_real_keys(
    tmp_path: Path, args: tuple[str, ...], said: str
) -> None:
    proc = _run(tmp_path, *args, "stage=plan")
    line = _error(proc)
    assert proc.returncode == 2 and line.endswith(said), line
    assert " (keys: " in line
    if "study=draws" in args:  # every key the study declares, the real one among them
        assert "(keys: name, probes_path, " in line and ", n, temperature, " in line
    assert not (tmp_path / "results").exists()


def test_a_llama_cpp_server_that_is_not_running_ends_in_how_to_start_it(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = _run(
        tmp_path,
        "model=llamacpp",
        f"model.base_url=http://127.0.0.1:{port}/v1",
        "items=sim_demo",
        "mlflow.enabled=false",
        f"out_dir={tmp_path / 'run'}",
    )
    line = _error(proc)
    assert proc.returncode == 1
    command = (
        'python -m llama_cpp.server --model "$(lmaudit gguf-path gemma3-270m)" '
        "--model_alias gemma3-270m --port {port} --logits_all true"
    )
    assert line == (
        f"error: cannot reach http://127.0.0.1:{port}/v1 ([Errno 111] Connection refused); "
        f"start the documented server: {command.format(port=port)} (docs/servers.md)"
    )
    assert (proc.stdout + proc.stderr).count("cannot reach") == 1  # said once
    assert command.format(port=8080) in (REPO / "README.md").read_text()  # the README's own


def test_adding_to_a_free_form_field_stays_allowed(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _run(
        tmp_path,
        "model=sim_projective",
        "items=sim_demo",
        "+model.params.note=1",
        "stage=plan",
        f"out_dir={out}",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads((out / "plan.json").read_text())["config"]["model"]["params"] == {"note": 1}


def test_help_describes_studies_stages_and_groups(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "run.py", "--help"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    for line in (
        "  qq (default)     Question-order effects and the QQ equality (seed 000).",
        "  judge            Does a content-preserving change of presentation flip an LLM judge (seed 001)?",
        "  plan      validate every input",
        "  all       plan, measure, analyze and report (the default)",
        "    framing: track_m, track_m_fewshot (default), track_p",
        "    ensemble: demo, embedded (default), model, sim",
        "  study=draws: no groups of its own",
    ):
        assert line in text, line
    assert "model: gemma3_270m (default), llamacpp," in text and "ollama, openai," in text
    assert "_framing" not in text and "_hf" not in text and "powered by Hydra" not in text


@pytest.mark.parametrize(
    ("model", "cause"),
    [
        (
            ["model=openai", "model.base_url=http://127.0.0.1:9/v1", "model.max_retries=0"],
            "cannot reach http://127.0.0.1:9/v1",
        ),
        (
            ["model=openai", "model.base_url=http://nohost.invalid/v1", "model.max_retries=0"],
            "cannot reach http://nohost.invalid/v1",
        ),
        (["model=qwen3_4b", "model.model=nope/nope"], "model 'nope/nope' is not available offline"),
    ],
)
def test_a_backend_that_cannot_answer_ends_in_one_line(tmp_path: Path, model: list[str], cause: str) -> None:
    proc = _run(tmp_path, *model, "items=sim_demo", "mlflow.enabled=false", f"out_dir={tmp_path / 'run'}")
    line = _error(proc)
    assert proc.returncode == 1 and line.startswith("error: ") and cause in line, line


# --- run names that identify the run ------------------------------------------------------


def _run_dir(proc: subprocess.CompletedProcess[str]) -> Path:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Path(next(x for x in proc.stdout.splitlines() if " run dir " in x).split(" run dir ", 1)[1])


def test_an_override_that_changes_what_is_measured_changes_the_run_name(tmp_path: Path) -> None:
    default = _run_dir(_run(tmp_path, "stage=plan"))  # the design first, the model last
    assert default == tmp_path / "results/qq/track_m_fewshot-counterbalanced-logprob-gemma3-270m"
    base = ("model=sim_projective", "items=sim_demo", "stage=plan", "mlflow.enabled=false")
    one = _run_dir(_run(tmp_path, *base, "items.ids=[s1-01,s1-04]"))
    other = _run_dir(_run(tmp_path, *base, "items.ids=[s2-01,s3-01]"))
    bank = _run_dir(_run(tmp_path, *base))
    readable = "track_m_fewshot-counterbalanced-logprob-sim-projective-"
    assert len({one, other, bank}) == 3 and all(p.name.startswith(readable) for p in (one, other, bank))
    assert _run_dir(_run(tmp_path, *base, "items.ids=[s1-01,s1-04]")) == one  # the same design
    # what the name already says, or what is not measured, adds nothing
    assert _run_dir(_run(tmp_path, "model=sim_projective", "stage=plan", "framing=track_p")).name == (
        "track_p-counterbalanced-logprob-sim-projective"
    )
    assert _run_dir(_run(tmp_path, "model=sim_projective", "stage=plan", "study.epsilon=0.02")).name == (
        "track_m_fewshot-counterbalanced-logprob-sim-projective"
    )
    assert _run_dir(_run(tmp_path, *base, "run_name=mine")).name == "mine"
    assert _run_dir(_run(tmp_path, "prereg=qq_sim_mixture", "stage=plan")).name == "qq_sim_mixture"


def test_external_measurements_are_named_by_their_source(tmp_path: Path) -> None:
    made = tmp_path / "made"
    proc = _run(tmp_path, "model=sim_projective", "items=sim_demo", "mlflow.enabled=false", f"out_dir={made}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    lab = tmp_path / "lab-x.jsonl"
    shutil.copy(made / "measurements.jsonl", lab)
    out = _run_dir(_run(tmp_path, "stage=analyze", f"measurements={lab}", "items=sim_demo"))
    assert out == tmp_path / "results/qq/lab-x"
    record = json.loads((out / "audit_record.json").read_text())
    assert record["mlflow"]["run_name"] == "lab-x"
    con = sqlite3.connect(tmp_path / "mlruns" / "mlflow.db")
    assert [n for (n,) in con.execute("select name from runs")] == ["lab-x"]
    con.close()
    report = (out / "report.html").read_text()
    assert '<tr><th>Model</th><td class="mono">lab-x</td></tr>' in report


def test_the_choir_demo_run_names_its_ensemble(tmp_path: Path) -> None:
    out = _run_dir(_run(tmp_path, "study=choir", "stage=plan"))
    assert out.name == "infinity-embedded-gemma3-270m+smollm2-135m-g1"  # the default: two real models
    out = _run_dir(_run(tmp_path, "study=choir", "ensemble=demo", "stage=plan"))
    assert out.name == "infinity-demo-gemma3-270m+sim-alpha+sim-beta+sim-gamma-g1"
