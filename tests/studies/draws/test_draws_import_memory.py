"""An imported draws file is streamed: the measure stage keeps one row at a time, the analysis a
compact record per sequence, never the rows (peak traced memory, fixed seeds)."""

from __future__ import annotations

import json
import random
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from lmaudit.provenance.io import atomic_write_jsonl
from lmaudit.studies.base import Measurements
from lmaudit.studies.draws.importer import read_import
from lmaudit.studies.draws.study import DrawsStudy

N = 1_000


def _import_file(path: Path, n: int) -> Path:
    """``n`` sequences of 20 draws over 4 answers: 3 families x 2 sources x 5 conditions x 97 probes."""
    rng = random.Random(17)
    with path.open("w") as fh:
        for i in range(n):
            row = {
                "family": f"m{i % 3}",
                "source": f"e{i % 2}",
                "condition": f"c{i % 5}",
                "probe": f"p{i % 97}",
                "replicate": i // 1000,
                "draws": [rng.choice("ABCD") for _ in range(20)],
            }
            fh.write(json.dumps(row) + "\n")
    return path


def _peak(work: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_measure_stage_keeps_one_row_at_a_time(tmp_path: Path) -> None:
    """Reading, validating and writing the measurement rows as the pipeline's measure stage
    does: 4x the rows may not take noticeably more memory (only one row and the write buffer
    are alive at a time). Holding the rows costs over 1 KB a row, about 4x from N to 4N."""
    small, large = (_import_file(tmp_path / f"in{n}.jsonl", n) for n in (N, 4 * N))
    out = tmp_path / "measurements.jsonl"

    def measure(src: Path) -> int:
        return _peak(lambda: atomic_write_jsonl(out, read_import(src)))

    measure(small)  # first calls fill caches (the JSON decoder, the file system)
    p1, p4 = measure(small), measure(large)
    assert p4 < 1.5 * p1, (p1, p4)
    assert out.read_text().count("\n") == 4 * N


def test_the_analysis_keeps_records_not_rows(make_cfg, tmp_path: Path) -> None:
    """The analyze stage reads the measurement file one row at a time and keeps each sequence
    as a record of 20 shared answers (a tuple of ~200 B and the record), plus the analysis'
    own per-sequence arrays: under 1 KB a row, measured as the peak's growth from N to 4N rows
    (small Monte Carlo settings, so its work arrays grow with the rows too). A row kept as
    parsed costs over 1 KB alone (20 fresh answer strings, the list, the dict)."""
    cfg = make_cfg("study=draws", "study.permutations=9", "study.sims_per_step=2")
    small, large = (_import_file(tmp_path / f"in{n}.jsonl", n) for n in (N, 4 * N))

    def analyze(src: Path) -> int:
        return _peak(lambda: DrawsStudy().analyze(cfg, Measurements(source=str(src), path=src)))

    analyze(small)  # first calls import SciPy and fill caches
    per_row = (analyze(large) - analyze(small)) / (3 * N)
    assert per_row < 1_024, per_row
