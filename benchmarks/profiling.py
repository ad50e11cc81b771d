"""Where a benchmark's time goes: one call under ``torch.profiler``, its operators by self CPU time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def torch_profile(fn: Callable[[], Any], rows: int = 15) -> dict[str, Any]:
    """Run ``fn`` once under ``torch.profiler`` (CPU): its wall seconds, the operators' total
    self time, and the ``rows`` operators with the most self time (calls, seconds, share of
    the operators' total)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        fn()
        wall = time.perf_counter() - t0
    events = list(prof.key_averages())
    total = sum(e.self_cpu_time_total for e in events) / 1e6
    top = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:rows]
    return {
        "wall_seconds": wall,
        "operator_seconds": total,
        "top_operators": [
            {
                "op": e.key,
                "calls": e.count,
                "self_seconds": round(e.self_cpu_time_total / 1e6, 4),
                "share": round(e.self_cpu_time_total / 1e6 / total, 4) if total else None,
            }
            for e in top
        ],
    }


def print_profile(title: str, prof: dict[str, Any]) -> None:
    print(
        f"  {title}: {prof['wall_seconds']:.2f} s wall, {prof['operator_seconds']:.2f} s in torch operators"
    )
    for row in prof["top_operators"]:
        print(
            f"    {row['op']:<48} {row['calls']:>7} calls  {row['self_seconds']:>7.3f} s  {row['share']:.1%}"
        )
