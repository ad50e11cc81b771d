"""QQ measurement of positions: backend requests for every cell, gates G1 and G3, the sampled estimand.

Everything returned is a plain JSON row for ``measurements.jsonl``:

* ``kind: "position"`` - one measured position (see :mod:`.records`);
* ``kind: "g1"`` - gate G1: each label's token pieces in one rendered context;
* ``kind: "g3"`` - gate G3: trajectory samples of one item-order (joint counts, attempts).

The analysis needs nothing else, so any measurement file can be re-analysed without a model.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from lmaudit.backends.base import LabelRequest, SampleRequest, SampleResult
from lmaudit.backends.cached import CachedBackend
from lmaudit.errors import GateG1Error, QQUnavailable
from lmaudit.progress import SettledBar
from lmaudit.studies.qq.config import EstimandConfig, G3Config
from lmaudit.studies.qq.protocol import Cell
from lmaudit.studies.qq.records import SEMANTIC, Measurement


def position_seed(base: int, meta: dict[str, Any], salt: str = "") -> int:
    """A distinct seed per measured position, so no two positions share random draws."""
    key = f"{base}|{salt}|{meta['item']}|{meta['mapping']}|{meta['order']}|{meta['position']}|{meta['first_answer']}"
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") & ((1 << 63) - 1)


def _stratum(cell: Cell) -> str:
    return cell.item.stratum


def _persona(cell: Cell) -> dict[str, Any]:
    """A mixture component's rows name its persona; the plain estimand's rows are unchanged."""
    return {} if cell.persona is None else {"persona": cell.persona}


def _position_row(
    cell: Cell,
    req: LabelRequest,
    probs: dict[str, float],
    other: float,
    top_k: list[list[Any]],
    estimand: str,
    n_draws: int | None = None,
    counts: dict[str, int] | None = None,
    label_token_ids: dict[str, int] | None = None,
    tag: dict[str, Any] | None = None,
) -> dict[str, Any]:
    meta = req.meta
    m = Measurement(
        item=cell.item.id,
        stratum=_stratum(cell),
        mapping=cell.mapping,
        order=cell.order,
        position=int(meta["position"]),
        question=str(meta["question"]),
        first_answer=meta["first_answer"],
        label_of=dict(cell.label_of),
        probs=probs,
        other=max(0.0, other),
        top_k=top_k,
        estimand=estimand,
        n_draws=n_draws,
        counts=counts,
        label_token_ids=dict(label_token_ids or {}),
    )
    return {"kind": "position", **m.to_json(), **_persona(cell), **(tag or {})}


# --- gate G1 -------------------------------------------------------------------------------


def run_g1(cells: list[Cell], backend: Any) -> list[dict[str, Any]]:
    """Check every distinct rendered context; raise with the tokenization shown if any fails."""
    rows: list[dict[str, Any]] = []
    failures: list[str] = []
    if not hasattr(backend, "check_single_token"):
        return rows
    why = getattr(backend, "label_check_refusal", None)
    reason = why() if callable(why) else None
    if reason:  # before any label is asked
        raise QQUnavailable(
            f"qq cannot run on this server: {reason}. draws, choir and judge's verdicts need only sampled "
            "text and run here (docs/servers.md)"
        )
    for cell in cells:
        for req in cell.requests:
            pieces = backend.check_single_token(req)
            rows.append(
                {
                    "kind": "g1",
                    "item": cell.item.id,
                    "mapping": cell.mapping,
                    "order": cell.order,
                    "position": req.meta["position"],
                    "first_answer": req.meta["first_answer"],
                    "pieces": {k: list(v) for k, v in pieces.items()},
                    **_persona(cell),
                }
            )
            for label, toks in pieces.items():
                if len(toks) != 1:
                    failures.append(
                        f"item '{cell.item.id}' ({cell.mapping}, {cell.order}, position "
                        f"{req.meta['position']}): label {label!r} renders as {toks!r}"
                    )
    if failures:
        shown = "\n  ".join(failures[:10])
        more = f"\n  ... and {len(failures) - 10} more" if len(failures) > 10 else ""
        raise GateG1Error(
            "gate G1 failed: canonical labels must be single tokens in the rendered context.\n  "
            + shown
            + more
            + "\nChoose other labels (mapping.labels / mapping.yesno_labels) or another chat template."
        )
    return rows


# --- log-prob estimand ---------------------------------------------------------------------


def measure_logprob(cells: list[Cell], cached: CachedBackend, top_k: int) -> list[dict[str, Any]]:
    requests = [r for c in cells for r in c.requests]
    results = cached.label_logprobs(requests, top_k=top_k, desc="QQ log-probs")
    rows = []
    for i, cell in enumerate(cells):
        for j, req in enumerate(cell.requests):
            res = results[3 * i + j]
            rows.append(
                _position_row(
                    cell,
                    req,
                    dict(res.probs),
                    res.other,
                    [[t, p] for t, p in res.top_k],
                    "logprob",
                    label_token_ids=res.label_token_ids,
                )
            )
    return rows


# --- sampled estimand ----------------------------------------------------------------------


def _sample_request(req: LabelRequest, n: int, temperature: float, top_p: float, seed: int) -> SampleRequest:
    return SampleRequest(
        messages=req.messages,
        n=n,
        temperature=temperature,
        top_p=top_p,
        max_tokens=1,
        seed=seed,
        meta=req.meta,
    )


def normalise_answer(text: str, labels: tuple[str, ...]) -> str | None:
    """The canonical label a sampled answer is, or None (rejected): exact match after stripping."""
    t = text.strip()
    return t if t in labels else None


def measure_sampled(
    cells: list[Cell],
    cached: CachedBackend,
    est: EstimandConfig,
    salt: str = "estimand",
    tag: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """n draws at every forced-branch position; frequencies take the place of probabilities.
    A mixture component draws with its own ``salt`` and names itself in every row (``tag``)."""
    reqs = [(cell, r) for cell in cells for r in cell.requests]
    sreqs = [
        _sample_request(r, est.n, est.temperature, est.top_p, position_seed(est.seed, r.meta, salt))
        for _, r in reqs
    ]
    results = cached.sample(sreqs, desc="QQ samples")
    rows = []
    for (cell, req), res in zip(reqs, results, strict=True):
        counts = {lab: 0 for lab in cell.labels}
        counts["other"] = 0
        for text in res.texts:
            lab = normalise_answer(text, cell.labels)
            counts[lab if lab is not None else "other"] += 1
        n = len(res.texts)
        probs = {lab: counts[lab] / n for lab in cell.labels}
        rows.append(
            _position_row(
                cell, req, probs, counts["other"] / n, [], "sampled", n_draws=n, counts=counts, tag=tag
            )
        )
    return rows


# --- gate G3 -------------------------------------------------------------------------------


@dataclass
class _Drawn:
    accepted: list[str]  # semantic answers, in draw order
    attempts: int


#: One position's rejection sampling: yields its sample requests, is sent each one's result,
#: returns what it accepted.
_Drawing = Generator[SampleRequest, SampleResult, _Drawn]


def _draw_accepted(
    req: LabelRequest,
    label_of: dict[str, str],
    need: int,
    g3: G3Config,
    seed: int,
    accepted_now: Callable[[int], object] = lambda k: None,
) -> _Drawing:
    """Rejection sampling at one position until ``need`` canonical answers are accepted;
    ``accepted_now(k)`` is told each round's ``k`` newly accepted answers.

    A round's request (how many draws, which seed) depends only on this position's own
    earlier rounds, so its draws are the same however many positions are sampled alongside."""
    sem_of = {lab: s for s, lab in label_of.items()}
    accepted: list[str] = []
    attempts = 0
    cap = max(need, 1) * g3.max_attempts_factor
    rnd = 0
    while len(accepted) < need and attempts < cap:
        rate = len(accepted) / attempts if attempts else 1.0
        chunk = min(cap - attempts, max(8, int((need - len(accepted)) / max(rate, 0.05) * 1.1) + 1))
        res = yield _sample_request(
            req, chunk, g3.temperature, g3.top_p, position_seed(seed, req.meta, f"g3-round{rnd}")
        )
        before = len(accepted)
        for text in res.texts:
            attempts += 1
            lab = normalise_answer(text, tuple(label_of.values()))
            if lab is not None:
                accepted.append(sem_of[lab])
                if len(accepted) == need:
                    break
        accepted_now(len(accepted) - before)
        rnd += 1
    return _Drawn(accepted=accepted, attempts=attempts)


def _draw_all(cached: CachedBackend, drawings: list[_Drawing]) -> list[_Drawn]:
    """Run the positions' rejection sampling side by side: each round's requests of all the
    positions still short of their answers go to the backend in one call (the hf backend then
    reads its vocabulary head once for all of their prompts)."""
    out: list[_Drawn | None] = [None] * len(drawings)
    pending: dict[int, SampleRequest] = {}

    def advance(i: int, result: SampleResult | None) -> None:
        try:
            pending[i] = next(drawings[i]) if result is None else drawings[i].send(result)
        except StopIteration as stop:
            out[i] = stop.value

    for i in range(len(drawings)):
        advance(i, None)
    while pending:
        idx = list(pending)
        results = cached.sample([pending.pop(i) for i in idx], progress=False)
        for i, res in zip(idx, results, strict=True):
            advance(i, res)
    return [d for d in out if d is not None]


def g3_trajectories(cell: Cell, cached: CachedBackend, g3: G3Config, n: int, attempt: int) -> dict[str, Any]:
    """``n`` accepted joint trajectories: first answer sampled, committed, second answer sampled."""
    return g3_trajectories_many([cell], cached, g3, n, attempt)[0]


def g3_trajectories_many(
    cells: list[Cell], cached: CachedBackend, g3: G3Config, n: int, attempt: int
) -> list[dict[str, Any]]:
    """:func:`g3_trajectories` of each cell (the same rows, the same draws), their positions
    sampled side by side: all first positions, then all second positions."""
    if not cells:
        return []
    seed = g3.seed + 7919 * (attempt - 1)
    # its own bar: accepted answers, n per first position and n per cell's second positions
    # (a position that gives up at max_attempts_factor leaves the bar short, as the check is)
    with SettledBar(
        total=2 * n * len(cells),
        desc="G3 check" if attempt == 1 else f"G3 check (retry {attempt - 1})",
        unit="answer",
        disable=not cached.progress,
        leave=True,
    ) as bar:
        firsts = _draw_all(
            cached, [_draw_accepted(c.requests[0], c.label_of, n, g3, seed, bar.update) for c in cells]
        )
        second_jobs: list[tuple[int, str, _Drawing]] = []
        for k, (cell, first) in enumerate(zip(cells, firsts, strict=True)):
            for a, req in zip(SEMANTIC, cell.requests[1:], strict=True):
                need = first.accepted.count(a)
                if need:
                    second_jobs.append((k, a, _draw_accepted(req, cell.label_of, need, g3, seed, bar.update)))
        seconds = _draw_all(cached, [job for _, _, job in second_jobs])
    rows: list[dict[str, Any]] = []
    for k, (cell, first) in enumerate(zip(cells, firsts, strict=True)):
        counts = {f"{a}{b}": 0 for a in SEMANTIC for b in SEMANTIC}
        attempts = {"position1": first.attempts}
        mine = {a: d for (j, a, _), d in zip(second_jobs, seconds, strict=True) if j == k}
        for a in SEMANTIC:
            second = mine.get(a)
            attempts[f"position2_{a}"] = 0 if second is None else second.attempts
            for b in [] if second is None else second.accepted:
                counts[f"{a}{b}"] += 1
        accepted = sum(counts.values())
        rows.append(
            {
                "kind": "g3",
                "item": cell.item.id,
                "mapping": cell.mapping,
                "order": cell.order,
                "attempt": attempt,
                "n": n,
                "seed": seed,
                "temperature": g3.temperature,
                "top_p": g3.top_p,
                "joint_counts": counts,
                "accepted": accepted,
                "attempts": attempts,
                "complete": accepted == n,
            }
        )
    return rows


def g3_cells(cells: list[Cell], g3: G3Config) -> list[Cell]:
    """The spot-check cells: the configured items, both orders, under their first mapping."""
    chosen: list[Cell] = []
    for item_id in g3.items:
        mine = [c for c in cells if c.item.id == item_id]
        if not mine:
            continue
        first_mapping = mine[0].mapping
        chosen += [c for c in mine if c.mapping == first_mapping]
    return chosen
