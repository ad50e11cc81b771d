"""Prefix-sharing batched next-token forward passes for the ``hf`` backend.

Only the next-token distribution after each prompt is ever needed, so:

* the model is asked for ``logits_to_keep=1``: the vocabulary head (262k rows for Gemma 3)
  runs on one position per row instead of every position;
* prompts that share a token prefix share its computation. The requests of a chunk are put
  in a compressed token trie (:func:`build_prefix_tree`); the trie is run level by level, each
  level one batched forward that continues the key/value cache of its parent nodes
  (:func:`next_token_logits`). A QQ cell's position-1 prompt is an internal node and its two
  position-2 prompts are its children; a system prompt shared by many cells is one node above.

Within a level, segments are *left*-padded, so every row's last real token is at the last
position (``logits_to_keep=1`` stays valid) and padding sits between the parent's cache and
the segment. Pads are masked out of attention and real tokens get explicit position ids, so
each row computes what an unpadded forward would (checked against a naive forward in the
tests). Attention windows count cache slots, pads included, so a chunk whose padded length
could reach a model's sliding window is walked depth-first without padding instead (one row
per forward, each child continuing a copy of its parent's cache: still shared, still exact).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

#: Internal trie nodes shorter than this are not run on their own: their tokens are repeated in
#: each child instead (an extra batched forward costs more than re-running a few tokens).
DEFAULT_MIN_SHARED_TOKENS = 12


@dataclass
class PrefixNode:
    """A trie node: the token segment ``ids[rep][start:end]``, continuing its parent's cache."""

    start: int
    end: int
    rep: int
    parent: int
    depth: int
    ends: list[int] = field(default_factory=list)  # requests whose ids end exactly here
    has_children: bool = False


@dataclass
class ForwardStats:
    """Counters of the work done (for benchmarks and describe())."""

    forward_calls: int = 0
    tokens_real: int = 0  # tokens fed to the model, excluding padding
    tokens_padded: int = 0  # tokens fed to the model, including padding
    requests: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "forward_calls": self.forward_calls,
            "tokens_real": self.tokens_real,
            "tokens_padded": self.tokens_padded,
            "requests": self.requests,
        }


def _lcp(a: Sequence[int], b: Sequence[int], start: int) -> int:
    n = min(len(a), len(b))
    i = start
    while i < n and a[i] == b[i]:
        i += 1
    return i


def build_prefix_tree(
    ids: Sequence[Sequence[int]], members: Sequence[int], min_shared: int = DEFAULT_MIN_SHARED_TOKENS
) -> list[PrefixNode]:
    """Compressed token trie over ``ids[i] for i in members`` (which must share a first token).

    ``members`` must be sorted by their id sequences. Returns the nodes in breadth-first
    order (parents before children); node 0 is the root (the members' common prefix).
    """
    nodes: list[PrefixNode] = []

    def add(group: Sequence[int], start: int, parent: int, depth: int, is_root: bool) -> None:
        end = _lcp(ids[group[0]], ids[group[-1]], start)  # sorted: LCP of first and last = of all
        ends = [i for i in group if len(ids[i]) == end]
        rest = [i for i in group if len(ids[i]) > end]
        runs: list[list[int]] = []
        for i in rest:  # contiguous runs by next token (members are sorted)
            if runs and ids[runs[-1][0]][end] == ids[i][end]:
                runs[-1].append(i)
            else:
                runs.append([i])
        if not is_root and runs and end - start < min_shared:
            # Too short to be worth its own forward: fold the segment into each consumer.
            for i in ends:
                nodes.append(PrefixNode(start, end, i, parent, depth, [i]))
            for run in runs:
                add(run, start, parent, depth, False)
            return
        me = len(nodes)
        nodes.append(PrefixNode(start, end, group[0], parent, depth, ends, bool(runs)))
        for run in runs:
            add(run, end, me, depth + 1, False)

    add(list(members), 0, -1, 0, True)
    order = sorted(range(len(nodes)), key=lambda k: nodes[k].depth)  # stable: BFS by depth
    remap = {old: new for new, old in enumerate(order)}
    out = [nodes[k] for k in order]
    for node in out:
        if node.parent >= 0:
            node.parent = remap[node.parent]
    return out


def plan_chunks(ids: Sequence[Sequence[int]], batch_size: int) -> list[list[int]]:
    """Split request indices into chunks of at most ``batch_size`` sharing a first token.

    Requests are sorted by token ids so prompts with shared prefixes are adjacent; a full
    chunk is cut where neighbouring prompts share the fewest tokens.
    """
    order = sorted(range(len(ids)), key=lambda i: list(ids[i]))
    chunks: list[list[int]] = []
    cur: list[int] = []
    for i in order:
        if cur and ids[cur[-1]][:1] != ids[i][:1]:
            chunks.append(cur)
            cur = []
        cur.append(i)
        if len(cur) > batch_size:
            lo = max(1, batch_size // 2)
            cut = min(range(lo, len(cur)), key=lambda k: (_lcp(ids[cur[k - 1]], ids[cur[k]], 0), -k))
            chunks.append(cur[:cut])
            cur = cur[cut:]
    if cur:
        chunks.append(cur)
    return chunks


def _sliding_window(model: Any) -> int | None:
    cfg = getattr(model, "config", None)
    window = getattr(cfg, "sliding_window", None)
    if window is None or getattr(cfg, "use_sliding_window", True) is False:
        return None
    return int(window)


@torch.inference_mode()
def _run_tree(
    model: Any,
    ids: Sequence[Sequence[int]],
    nodes: list[PrefixNode],
    pad_id: int,
    stats: ForwardStats,
) -> Iterator[tuple[int, torch.Tensor]]:
    """Run a prefix tree level by level; yield (request index, next-token logits [V])."""
    device = next(model.parameters()).device
    depth_of = [n.depth for n in nodes]
    max_depth = max(depth_of)
    row_of: dict[int, int] = {}  # node index -> row in its level's batch
    real_len = torch.zeros(0, dtype=torch.long)  # per row of previous level: real tokens so far
    mask_prev = torch.zeros(0, 0, dtype=torch.long)
    cache: Any = None
    for depth in range(max_depth + 1):
        level = [k for k in range(len(nodes)) if depth_of[k] == depth]
        seg_lens = [nodes[k].end - nodes[k].start for k in level]
        width = max(seg_lens)
        batch = len(level)
        input_ids = torch.full((batch, width), pad_id, dtype=torch.long)
        seg_mask = torch.zeros(batch, width, dtype=torch.long)
        for r, k in enumerate(level):
            n = nodes[k]
            seg = ids[n.rep][n.start : n.end]
            if seg_lens[r]:
                input_ids[r, width - seg_lens[r] :] = torch.tensor(seg, dtype=torch.long)
                seg_mask[r, width - seg_lens[r] :] = 1
        if depth == 0:
            base = torch.zeros(batch, dtype=torch.long)
            full_mask = seg_mask
            past_len = 0
        else:
            parent_rows = torch.tensor([row_of[nodes[k].parent] for k in level], dtype=torch.long)
            base = real_len[parent_rows]
            full_mask = torch.cat([mask_prev[parent_rows], seg_mask], dim=1)
            past_len = mask_prev.shape[1]
            cache.batch_select_indices(parent_rows.to(device))
        offsets = torch.arange(width, dtype=torch.long) - (width - torch.tensor(seg_lens)).unsqueeze(1)
        position_ids = (base.unsqueeze(1) + offsets).clamp(min=0)
        has_next = depth < max_depth
        out = model(
            input_ids=input_ids.to(device),
            attention_mask=full_mask.to(device),
            position_ids=position_ids.to(device),
            cache_position=torch.arange(past_len, past_len + width, device=device),
            past_key_values=cache,
            use_cache=has_next,
            logits_to_keep=1,
        )
        stats.forward_calls += 1
        stats.tokens_real += sum(seg_lens)
        stats.tokens_padded += batch * width
        logits = out.logits[:, -1, :]
        for r, k in enumerate(level):
            for i in nodes[k].ends:
                yield i, logits[r]
        if has_next:
            cache = out.past_key_values
            row_of = {k: r for r, k in enumerate(level)}
            real_len = base + torch.tensor(seg_lens, dtype=torch.long)
            mask_prev = full_mask


def next_token_logits(
    model: Any,
    ids: Sequence[Sequence[int]],
    *,
    batch_size: int,
    pad_id: int,
    stats: ForwardStats,
    min_shared: int = DEFAULT_MIN_SHARED_TOKENS,
    on_chunk: Callable[[int], None] | None = None,
) -> Iterator[tuple[int, torch.Tensor]]:
    """Yield ``(i, logits)`` — next-token logits after ``ids[i]`` — for every request, chunk by chunk.

    Order of yield is not the input order. ``on_chunk(n)`` is called after each chunk of ``n``
    requests (progress bars).
    """
    if any(len(seq) == 0 for seq in ids):
        raise ValueError("cannot score an empty prompt")
    window = _sliding_window(model)
    for chunk in plan_chunks(ids, batch_size):
        nodes = build_prefix_tree(ids, chunk, min_shared)
        if window is not None and _padded_slots(nodes) >= window - 1:
            # Padding would shift the attention window: walk the tree unpadded instead.
            yield from _run_tree_unpadded(model, ids, nodes, stats)
        else:
            yield from _run_tree(model, ids, nodes, pad_id, stats)
        stats.requests += len(chunk)
        if on_chunk is not None:
            on_chunk(len(chunk))


@torch.inference_mode()
def _run_tree_unpadded(
    model: Any, ids: Sequence[Sequence[int]], nodes: list[PrefixNode], stats: ForwardStats
) -> Iterator[tuple[int, torch.Tensor]]:
    """Depth-first, one row per forward, no padding: each child continues a copy of its parent's
    cache. Slower than the level-batched walk but exact for any attention window."""
    device = next(model.parameters()).device
    children: dict[int, list[int]] = {}
    for k, node in enumerate(nodes):
        children.setdefault(node.parent, []).append(k)

    def visit(k: int, cache: Any) -> Iterator[tuple[int, torch.Tensor]]:
        node = nodes[k]
        kids = children.get(k, [])
        positions = torch.arange(node.start, node.end, device=device)
        out = model(
            input_ids=torch.tensor([list(ids[node.rep][node.start : node.end])], device=device),
            position_ids=positions.unsqueeze(0),
            cache_position=positions,
            past_key_values=cache,
            use_cache=bool(kids),
            logits_to_keep=1,
        )
        stats.forward_calls += 1
        stats.tokens_real += node.end - node.start
        stats.tokens_padded += node.end - node.start
        for i in node.ends:
            yield i, out.logits[0, -1]
        for j, kid in enumerate(kids):  # the last child may consume the parent's cache itself
            yield from visit(
                kid, out.past_key_values if j == len(kids) - 1 else copy.deepcopy(out.past_key_values)
            )

    yield from visit(0, None)


def _padded_slots(nodes: list[PrefixNode]) -> int:
    widths: dict[int, int] = {}
    for n in nodes:
        widths[n.depth] = max(widths.get(n.depth, 0), n.end - n.start)
    return sum(widths.values())
