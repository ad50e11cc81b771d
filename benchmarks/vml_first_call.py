"""Does a process's first parallel ``cos`` equal its second? A diagnostic, not a benchmark.

The parent imports torch and then forks ``--runs`` children one after another. Each child
computes a global rotary table of Gemma 3 (``cos`` and ``sin`` of ``positions x inv_freq`` for
positions 0 to ``--tokens`` - 1, as ``RotaryEmbedding`` does) twice on
``--threads`` threads and reports how many values of the first call differ from the second.
With ``--settle`` the child calls :func:`lmaudit.backends.vector_math.settle` first, as the
backends do before a model runs. ``--load N`` keeps N busy processes beside it (a differing
first call was seen on a loaded host). A differing child's tensors are kept under ``--out``.

    python benchmarks/vml_first_call.py [--runs 4000] [--settle] [--load 2] [--threads 2]

No assertion: it prints the counts and exits 0; how often a first call differs is the result.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def _child(args: argparse.Namespace, k: int, write: int) -> None:
    import torch

    torch.set_num_threads(args.threads)
    if args.settle:
        from lmaudit.backends.vector_math import settle

        settle()
    dim = 256  # Gemma 3 270M's head_dim, rope_theta 1e6
    inv = 1.0 / (1e6 ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    pos = torch.arange(args.tokens, dtype=torch.float32)[None]
    freqs = (inv[None, :, None].expand(1, -1, 1) @ pos[:, None, :]).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    c1, s1 = emb.cos(), emb.sin()
    c2, s2 = emb.cos(), emb.sin()
    n_cos, n_sin = int((c1 != c2).sum()), int((s1 != s2).sum())
    if n_cos or n_sin:
        args.out.mkdir(parents=True, exist_ok=True)
        torch.save({"emb": emb, "c1": c1, "c2": c2, "s1": s1, "s2": s2}, args.out / f"child{k}.pt")
    os.write(write, json.dumps([n_cos, n_sin]).encode())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=433)
    parser.add_argument("--settle", action="store_true")
    parser.add_argument("--load", type=int, default=0)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "differs" / "vml_first_call")
    args = parser.parse_args()
    import torch  # noqa: F401  (imported once, before the forks; no parallel region has run)

    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(max(0, args.load))
    ]
    counts: dict[str, int] = {}
    t0 = time.monotonic()
    try:
        for k in range(args.runs):
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child
                os.close(read)
                try:
                    _child(args, k, write)
                finally:
                    os._exit(0)
            os.close(write)
            with os.fdopen(read) as pipe:
                got = pipe.read() or "null"
            os.waitpid(pid, 0)
            counts[got] = counts.get(got, 0) + 1
            if got not in ("[0, 0]",):
                print(f"child {k}: first call differs from the second in [cos, sin] = {got}", flush=True)
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    differing = args.runs - counts.get("[0, 0]", 0)
    print(
        f"{args.runs} children ({'settled' if args.settle else 'not settled'}, {args.threads} threads, "
        f"load {args.load}) in {time.monotonic() - t0:.0f} s: {differing} with a differing first call; "
        f"counts {json.dumps(counts)}"
    )


if __name__ == "__main__":
    main()
