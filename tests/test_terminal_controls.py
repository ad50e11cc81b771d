"""Names from imported data reach the terminal with their control characters escaped: an ESC
sequence in a log someone sent (set the title, clear the screen, write the clipboard with OSC 52)
is shown, never obeyed, in the summary line, the errors and ``lmaudit compare``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

from lmaudit.console import main as lmaudit_main
from lmaudit.terminal import printable

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1"}
TITLE = "\x1b]0;pwned\x07"  # sets the terminal's title
CLIPBOARD = "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # OSC 52: writes the clipboard
CLEAR = "\x9b2J"  # C1 CSI: clears the screen
FAMILY, SOURCE = f"model{TITLE}a", f"exp{CLIPBOARD}{CLEAR}"


def _controls(text: str) -> list[str]:
    """The control characters of ``text`` but line ends (category Cc: C0, DEL, C1)."""
    return sorted({c for c in text if unicodedata.category(c) == "Cc" and c != "\n"})


def test_printable_escapes_exactly_the_control_characters() -> None:
    # checked against Unicode's own category Cc over the first 0x3000 code points
    for cp in range(0x3000):
        c = chr(cp)
        shown = printable(f"a{c}b")
        if unicodedata.category(c) == "Cc":
            assert shown in (f"a\\x{cp:02x}b", "a\\nb", "a\\rb", "a\\tb") and not _controls(shown)
        else:
            assert shown == f"a{c}b"
    assert printable(TITLE) == "\\x1b]0;pwned\\x07" and printable(CLEAR) == "\\x9b2J"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "run.py", *args], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=600
    )


def test_a_hostile_import_prints_its_names_escaped(tmp_path, capsys) -> None:
    rows = [json.loads(line) for line in (REPO / "data/draws/example_import.jsonl").read_text().splitlines()]
    names = {"model-a": FAMILY, "model-b": "model-b"}
    data = tmp_path / "import.jsonl"
    data.write_text(
        "".join(json.dumps({**r, "family": names[r["family"]], "source": SOURCE}) + "\n" for r in rows)
    )
    proc = _run(
        "study=draws",
        f"study.import_path={data}",
        "study.permutations=99",
        "study.sims_per_step=20",
        f"out_dir={tmp_path / 'run'}",
        f"paths.mlruns={tmp_path / 'mlruns'}",
        "progress=false",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _controls(proc.stdout) == [] and _controls(proc.stderr) == []
    summary = next(line for line in proc.stdout.splitlines() if line.startswith("draws: "))
    assert "model\\x1b]0;pwned\\x07a: T=" in summary
    # the results keep the names as they are: only what is printed is escaped
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert FAMILY in results["families"]

    capsys.readouterr()
    assert lmaudit_main(["compare", "--mlruns", str(tmp_path / "mlruns")]) == 0
    listed = capsys.readouterr().out
    assert _controls(listed) == [] and "model\\x1b]0;pwned\\x07a" in listed


def test_an_error_naming_an_imported_file_prints_it_escaped(tmp_path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / f"run{TITLE}.eval").write_bytes(b"not a zip archive")  # a log someone sent
    proc = _run("study=draws", f"study.import_path={folder}", f"out_dir={tmp_path / 'run'}", "progress=false")
    assert proc.returncode == 2, proc.stderr
    assert _controls(proc.stderr) == [] and "run\\x1b]0;pwned\\x07.eval" in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ")
