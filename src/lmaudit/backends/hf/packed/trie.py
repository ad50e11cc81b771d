"""The token structure of packed label scoring: prefix tries, their depth-first layout, and
scoring units (pure functions of token ids; the forward passes are in
:mod:`lmaudit.backends.hf.packed.forward`).

* :func:`build_prefix_tree`: the compressed token trie of prompts sharing a first token; each
  node is a token segment computed once;
* :func:`pack_forest`: one trie per first token, laid out depth-first as one token stream (a
  parent always before its children);
* :func:`scoring_units`: the sorted prompts cut into units of equal trie size, each scored as
  its own forest, so a unit's arithmetic depends on its prompts only.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

#: Internal trie nodes shorter than this are folded into their children. Packing makes a
#: node cost nothing beyond its tokens, so by default nothing is folded.
DEFAULT_MIN_SHARED_TOKENS = 1
#: At most this many trie tokens per scoring unit (:func:`scoring_units`).
DEFAULT_UNIT_TOKENS = 4096


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


def lcp(a: Sequence[int], b: Sequence[int], start: int) -> int:
    """The length of the common prefix of ``a`` and ``b``, known to be at least ``start``."""
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
        end = lcp(ids[group[0]], ids[group[-1]], start)  # sorted: LCP of first and last = of all
        ends = [i for i in group if len(ids[i]) == end]
        rest = [i for i in group if len(ids[i]) > end]
        runs: list[list[int]] = []
        for i in rest:  # contiguous runs by next token (members are sorted)
            if runs and ids[runs[-1][0]][end] == ids[i][end]:
                runs[-1].append(i)
            else:
                runs.append([i])
        if not is_root and runs and end - start < min_shared:
            # Too short to be worth its own node: fold the segment into each consumer.
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


@dataclass
class PackedForest:
    """The tries of a call laid out depth-first as one token stream.

    Node ``n`` owns stream indices ``first[n] .. first[n] + length[n] - 1``; its subtree ends
    before ``sub_end[n]``; ``parent[n]`` is -1 for a root.
    """

    tokens: list[int]
    positions: list[int]
    node_of: list[int]
    parent: list[int]
    first: list[int]
    length: list[int]
    sub_end: list[int]
    ends: list[list[int]]


def pack_forest(ids: Sequence[Sequence[int]], min_shared: int = DEFAULT_MIN_SHARED_TOKENS) -> PackedForest:
    """One trie per first token, nodes in depth-first pre-order (prompts in sorted order)."""
    if any(len(seq) == 0 for seq in ids):
        raise ValueError("cannot score an empty prompt")
    order = sorted(range(len(ids)), key=lambda i: list(ids[i]))
    groups: list[list[int]] = []
    for i in order:
        if groups and ids[groups[-1][0]][:1] == ids[i][:1]:
            groups[-1].append(i)
        else:
            groups.append([i])
    out = PackedForest([], [], [], [], [], [], [], [])
    for group in groups:
        nodes = build_prefix_tree(ids, group, min_shared)
        children: dict[int, list[int]] = {}
        for k, node in enumerate(nodes):
            children.setdefault(node.parent, []).append(k)
        stack: list[tuple[int, int]] = [(0, -1)]  # (node in this trie, parent in the forest)
        visited: list[int] = []
        while stack:
            k, parent = stack.pop()
            node = nodes[k]
            me = len(out.first)
            visited.append(me)
            out.parent.append(parent)
            out.first.append(len(out.tokens))
            out.length.append(node.end - node.start)
            out.sub_end.append(0)
            out.ends.append(list(node.ends))
            out.tokens.extend(ids[node.rep][node.start : node.end])
            out.positions.extend(range(node.start, node.end))
            out.node_of.extend([me] * (node.end - node.start))
            stack.extend((kid, me) for kid in reversed(children.get(k, [])))
        for me in reversed(visited):  # children were visited after their parent
            out.sub_end[me] = max(out.sub_end[me], out.first[me] + out.length[me])
            if out.parent[me] >= 0:
                p = out.parent[me]
                out.sub_end[p] = max(out.sub_end[p], out.sub_end[me])
    return out


def scoring_units(ids: Sequence[Sequence[int]], unit_tokens: int = DEFAULT_UNIT_TOKENS) -> list[list[int]]:
    """The prompts' indices sorted by their ids (ties by index), cut into ``k`` units of about
    equal trie size: the call's trie holds ``T`` tokens (a prompt adds the tokens beyond its
    common prefix with the prompt before it), ``k = ceil(T / unit_tokens)``, and a unit closes
    after the prompt that takes the running trie count past the next multiple of ``T / k``.

    Equal units keep the Lightning runner's ranks (whole units each) equally busy; a rank scores
    each unit it is given as one unit (``next_token_logits(..., unit_tokens=None)``)."""
    order = sorted(range(len(ids)), key=lambda i: (list(ids[i]), i))
    if not order:
        return []
    added = [len(ids[order[0]])] + [
        len(ids[b]) - lcp(ids[a], ids[b], 0) for a, b in itertools.pairwise(order)
    ]
    total = sum(added)
    k = max(1, -(-total // max(1, unit_tokens)))
    units: list[list[int]] = [[]]
    running = 0
    for i, c in zip(order, added, strict=True):
        running += c
        units[-1].append(i)
        if len(units) < k and running * k >= total * len(units):
            units.append([])
    return [u for u in units if u]
