"""alpaca_eval's own ``PairwiseAnnotator`` (0.6.6) with a stub completion function in place of an
API, for ``test_judge_alpaca_eval.py::test_alpaca_eval_own_annotator``.

Run as ``python alpaca_eval_annotate.py OUT_DIR`` with ``PYTHONPATH`` set to alpaca_eval's own
directory (``scripts/install_judge_tools.sh``): alpaca_eval's pins conflict with lmaudit's
dependencies, so it runs in a process of its own and this script never imports lmaudit. It
annotates each (ref, model) pair twice, the outputs given in both orders, and writes

- ``OUT_DIR/annotations.json``: the annotations as alpaca_eval saves them (no shown order);
- ``OUT_DIR/shown.json``: for each saved annotation, in the same order, the output the stub
  judge was shown first.

The test imports :data:`QUALITY` and :func:`planted` from here (no alpaca_eval at import time)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

QUALITY = {
    f"task {i}": q for i, q in enumerate((0.40, 0.47, 0.50, 0.55, 0.62, 0.80))
}  # the model's; ref is 0.5


def planted(q_first: float, q_second: float) -> str:
    """The stub judge: the output shown first wins unless it is worse by 0.1 or more."""
    return "Output (a)" if q_first - q_second > -0.1 else "Output (b)"


def quality(text: str) -> float:
    task = text.split(" answer ")[1]
    return 0.5 if text.startswith("ref") else QUALITY[task]


def main(out: Path) -> None:
    import pandas as pd
    from alpaca_eval.annotators import PairwiseAnnotator

    cfg_dir = out / "configs/stub_judge"
    cfg_dir.mkdir(parents=True)
    (cfg_dir / "prompt.txt").write_text(
        "{instruction}\nOutput (a): {output_1}\nOutput (b): {output_2}\nBest:"
    )
    (cfg_dir / "configs.yaml").write_text(
        "stub_judge:\n  prompt_template: stub_judge/prompt.txt\n  fn_completion_parser: regex_parser\n"
        "  completion_parser_kwargs:\n    outputs_to_match:\n      1: 'Output \\(a\\)'\n      2: 'Output \\(b\\)'\n"
        "  batch_size: 1\n"
    )
    shown: dict[tuple[int, str], str] = {}  # (run, instruction) -> the output shown first
    state = {"run": 0}

    def stub(prompts: list[str], **_: object) -> dict[str, list[str]]:
        completions = []
        for p in prompts:
            m = re.fullmatch(r"(.*)\nOutput \(a\): (.*)\nOutput \(b\): (.*)\nBest:", p, flags=re.S)
            assert m is not None, p
            inst, a, b = m.groups()
            shown[(state["run"], inst)] = a
            completions.append(planted(quality(a), quality(b)))
        return {"completions": completions}

    ref = [{"instruction": t, "output": f"ref answer {t}", "generator": "ref"} for t in QUALITY]
    mod = [{"instruction": t, "output": f"model answer {t}", "generator": "model"} for t in QUALITY]
    annotator = PairwiseAnnotator(
        annotators_config=str(cfg_dir), fn_completions=stub, is_avoid_reannotations=False
    )
    runs = []
    for r, (one, two) in enumerate(((ref, mod), (mod, ref))):
        state["run"] = r
        runs.append(annotator.annotate_head2head(outputs_1=one, outputs_2=two))
    # as alpaca_eval saves them
    pd.DataFrame(runs[0] + runs[1]).to_json(out / "annotations.json", orient="records", indent=2)
    first = [shown[(r, a["instruction"])] for r, run_ in enumerate(runs) for a in run_]
    (out / "shown.json").write_text(json.dumps(first, indent=2))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
