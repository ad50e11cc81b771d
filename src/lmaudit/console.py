"""The ``lmaudit`` console command: utilities around the Hydra entry point ``run.py``.

``lmaudit compare`` (runs side by side from MLflow, or two run folders paired item by item, or only their designs side by side), ``lmaudit log`` (log a finished run
directory to MLflow later), ``lmaudit report`` (rebuild a run's report from its records), ``lmaudit prepare-model`` (convert the embedded models once; used by
``make install`` and the DVC stage), ``lmaudit gguf-path`` (an embedded model's GGUF file, for llama.cpp), ``lmaudit digest`` (file SHA-256s as recorded), ``lmaudit cache compact`` (a
response cache folder into packs, optionally only the keys some runs used).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lmaudit.provenance.digest import file_sha256
from lmaudit.provenance.io import atomic_write_json, atomic_write_text
from lmaudit.terminal import printable


def main(argv: list[str] | None = None) -> int:
    """``lmaudit`` console entry: utilities around the Hydra entry point ``run.py``."""
    parser = argparse.ArgumentParser(prog="lmaudit", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    pm = sub.add_parser(
        "prepare-model", help="convert the embedded models' GGUF files once and cache the transformers copies"
    )
    pm.add_argument(
        "--model",
        action="append",
        help="an embedded model (embedded:gemma3-270m, embedded:smollm2-135m; default: every one)",
    )
    pm.add_argument(
        "--record", help="write a JSON record of the converted model (digests, versions) here (one --model)"
    )
    gp = sub.add_parser("gguf-path", help="print an embedded model's GGUF file (for llama.cpp's server)")
    gp.add_argument("model", nargs="?", default="gemma3-270m", help="gemma3-270m (default) or smollm2-135m")
    c = sub.add_parser(
        "compare",
        help="compare runs from MLflow, one table per study with a legend of its columns; or pair "
        "two run folders of one study item by item, their designs side by side first (lmaudit "
        "compare RUN_A RUN_B); --design: only how two run folders' designs differ",
    )
    c.add_argument(
        "runs",
        nargs="*",
        metavar="RUN",
        help="two run folders of one study (results.json, plan.json): paired item by item, B - A",
    )
    c.add_argument(
        "--design",
        action="store_true",
        help="with two run folders: only their designs side by side (plan.json's config and inputs: "
        "the keys that differ, then those that agree), for runs of any design or study",
    )
    c.add_argument("--json", help="with two run folders: also write the comparison as JSON here")
    c.add_argument("--mlruns", default="mlruns", help="the MLflow store folder (default: mlruns)")
    c.add_argument(
        "--experiment", action="append", help="experiment name(s) (default: all lmaudit experiments)"
    )
    c.add_argument("--sweep", help="only the jobs of this sweep (its parent run id)")
    c.add_argument("--last", type=int, help="only the newest N runs")
    c.add_argument("--csv", help="also write every run as one CSV table here (a study column first)")
    c.add_argument("--markdown", help="also write the tables and their legends as Markdown here")
    lg = sub.add_parser("log", help="log a finished run directory to MLflow (one its run could not log)")
    lg.add_argument("run_dir", help="the run directory (results.json, report.html, audit_record.json)")
    lg.add_argument(
        "--tracking-uri",
        help="the MLflow store (default: the one the run's audit record names, e.g. sqlite:///mlruns/mlflow.db)",
    )
    lg.add_argument(
        "--again", action="store_true", help="log a run that is already logged to that store once more"
    )
    rp = sub.add_parser(
        "report", help="rebuild a run folder's report.html from its records (no model, no MLflow)"
    )
    rp.add_argument(
        "run_dirs",
        nargs="+",
        metavar="run_dir",
        help="run folders (results.json, plan.json, audit_record.json), each rebuilt in turn",
    )
    rp.add_argument("--conf", default="conf", help="the config folder (default: conf, beside run.py)")
    d = sub.add_parser("digest", help="print the SHA-256 of files (as recorded in plans and audit records)")
    d.add_argument("paths", nargs="+")
    _add_cache_parser(sub.add_parser("cache", help="response cache maintenance (lmaudit cache compact)"))
    args = parser.parse_args(argv)
    if args.cmd == "prepare-model":
        return _prepare_models(args.model, args.record)
    if args.cmd == "gguf-path":
        from lmaudit.backends.hf.embedded import embedded_gguf_path
        from lmaudit.errors import BackendError

        name = args.model if args.model.startswith("embedded:") else f"embedded:{args.model}"
        try:
            print(embedded_gguf_path(model=name))
        except BackendError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
    elif args.cmd == "log":
        from lmaudit.errors import InputError
        from lmaudit.pipeline.mlflow_run import log_run_dir

        try:
            logged = log_run_dir(Path(args.run_dir), uri=args.tracking_uri, again=args.again)
        except InputError as e:
            return _refused(e)
        return 0 if logged else 1
    elif args.cmd == "report":
        from lmaudit.errors import InputError
        from lmaudit.pipeline.rebuild import rebuild_report

        try:
            for run_dir in args.run_dirs:
                print(rebuild_report(Path(run_dir), Path(args.conf)))
        except InputError as e:
            return _refused(e)
    elif args.cmd == "compare" and (args.runs or args.design):
        return _compare_paired(args.runs, args.json, design_only=args.design)
    elif args.cmd == "compare":
        from lmaudit.tracking.compare import fetch_runs, table, tables, to_csv, to_markdown, to_text
        from lmaudit.tracking.mlflow_log import tracking_uri

        if not (Path(args.mlruns) / "mlflow.db").exists():
            print(f"error: no MLflow store at {args.mlruns}/mlflow.db (run a study first)", file=sys.stderr)
            return 2
        try:
            runs = fetch_runs(
                tracking_uri(args.mlruns), args.experiment, parent_run_id=args.sweep, last=args.last
            )
        except ValueError as e:
            return _refused(e)
        except Exception as e:  # a damaged store: one line, not the database driver's traceback
            first = (str(e).strip().splitlines() or [""])[0]
            print(
                f"error: the MLflow store {args.mlruns}/mlflow.db cannot be read "
                f"({type(e).__name__}: {printable(first)[:300]})",
                file=sys.stderr,
            )
            return 1
        print(to_text(tables(runs)), end="")
        if args.csv:  # every run in one table, a study column first
            atomic_write_text(args.csv, to_csv(*table(runs)))
        if args.markdown:  # one table per study, each with its legend
            atomic_write_text(args.markdown, to_markdown(tables(runs)))
    elif args.cmd == "cache":
        return _cache(args)
    elif args.cmd == "digest":
        for p in args.paths:
            print(f"{file_sha256(p)}  {p}")
    return 0


def _refused(e: Exception) -> int:
    """Bad input: ``e`` as one printable line on stderr, and the exit code 2."""
    print(f"error: {printable(str(e))}", file=sys.stderr)
    return 2


def _compare_paired(runs: list[str], json_path: str | None, *, design_only: bool = False) -> int:
    """``lmaudit compare [--design] RUN_A RUN_B``: see :mod:`lmaudit.tracking.paired`."""
    from lmaudit.errors import InputError
    from lmaudit.tracking.paired import DesignReport, PairedReport, compare_designs
    from lmaudit.tracking.paired_studies import compare_runs

    if len(runs) != 2:
        what = "compares the designs of" if design_only else "pairs"
        print(f"error: lmaudit compare {what} two run folders, got {len(runs)}", file=sys.stderr)
        return 2
    report: DesignReport | PairedReport
    try:
        report = compare_designs(*runs) if design_only else compare_runs(*runs)
    except InputError as e:
        return _refused(e)
    print(report.to_text(), end="")
    if json_path:
        atomic_write_json(json_path, report.to_json())
    return 0


def _prepare_models(models: list[str] | None, record: str | None) -> int:
    """Convert the embedded models (each once; a converted copy is reused) and print their folders;
    ``record``: a JSON record of one model's conversion (what identifies its weights, no path)."""
    from importlib.metadata import version

    from lmaudit.backends.hf.embedded import EMBEDDED, embedded_model, ensure_embedded_model, gguf_sha256
    from lmaudit.errors import BackendError

    names = models or list(EMBEDDED)
    if record and len(names) != 1:
        print("error: --record records one model: name it with --model", file=sys.stderr)
        return 2
    for name in (n if n.startswith("embedded:") else f"embedded:{n}" for n in names):
        try:
            path = ensure_embedded_model(model=embedded_model(name).model)
        except BackendError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(path)
        if record:
            weights = sorted(Path(path).glob("*.safetensors"))
            atomic_write_json(
                record,
                {
                    "model": name,
                    "gguf_sha256": gguf_sha256(name),
                    # the conversion's (GGUF to safetensors) and the forward's
                    "transformers": version("transformers"),
                    "weights_sha256": {w.name: file_sha256(w) for w in weights},
                },
            )
    return 0


def _add_cache_parser(parser: argparse.ArgumentParser) -> None:
    k = parser.add_subparsers(dest="cache_cmd", required=True).add_parser(
        "compact",
        help="move every entry of a cache folder into packs (sorted by key, content-named), optionally "
        "keeping only the keys some runs used",
    )
    k.add_argument("dir", help="the cache folder (paths.cache of the runs, e.g. cache/qq/qq_pilot_track_m)")
    k.add_argument(
        "--keep-from",
        action="append",
        metavar="PATH",
        help="keep only these keys: a key list (one a line) or a run directory / its measurements.jsonl "
        "(the run's cache_keys.txt); repeat to keep the union",
    )


def _cache(args: argparse.Namespace) -> int:
    """``lmaudit cache compact``: see :mod:`lmaudit.provenance.compact`."""
    from lmaudit.errors import CacheBusy, InputError
    from lmaudit.provenance.cache import ResponseCache
    from lmaudit.provenance.compact import compact, read_keys

    try:
        keep = None if not args.keep_from else set().union(*(read_keys(p) for p in args.keep_from))
        report = compact(ResponseCache(Path(args.dir)), keep)
    except (InputError, CacheBusy) as e:
        return _refused(e)
    print(report.summary())
    return 0
