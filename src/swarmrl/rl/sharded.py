"""The pure parts of a sharded learner (learner.strategy ddp | fsdp): who backpropagates what.

Every rank holds the whole step (distributed/torchrun.py gathers the rollouts), so every rank
computes the same advantages and the same per-token weights over the WHOLE minibatch
(rl/aggregation.py). The loss of a minibatch is a weighted sum over its sequences, so the sum
over ranks of each rank's partial loss (its share of the sequences, with those global weights)
is exactly the minibatch loss, and the sum of the ranks' gradients is its gradient. Nothing
here communicates: these functions decide the shares, identically on every rank.
"""

from __future__ import annotations

import heapq

import numpy as np


def token_share(lengths: list[int], rank: int, world: int) -> list[int]:
    """The indices (ascending) of the sequences rank `rank` of `world` backpropagates: balanced
    by tokens, so no rank waits long for the slowest at the gradient reduction.

    Longest first, each to the rank with the fewest tokens so far (ties: the lower rank; equal
    lengths: the lower index), so the split depends on the lengths alone and every rank
    computes the same one."""
    if not 0 <= rank < world:
        raise ValueError(f"rank {rank} is not in 0..{world - 1}")
    loads = [(0, r) for r in range(world)]  # (tokens so far, rank): a heap
    mine: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        tokens, r = heapq.heappop(loads)
        if r == rank:
            mine.append(i)
        heapq.heappush(loads, (tokens + lengths[i], r))
    return sorted(mine)


def cluster_share(lengths: list[int], clusters: list[int], shared: list[int], rank: int, world: int) -> list[int]:
    """Like `token_share`, but whole clusters of sequences that share a prompt prefix go to one
    rank (rl/prefix.py `prefix_clusters`), so the prefix still runs once; a cluster weighs what
    the learner runs for it: the prefix once, then each member's remainder."""
    groups: dict[int, list[int]] = {}
    for i, c in enumerate(clusters):
        groups.setdefault(c, []).append(i)
    members = list(groups.values())  # in order of each cluster's first sequence
    cost = [shared[m[0]] + sum(lengths[i] - shared[i] for i in m) for m in members]
    return sorted(i for k in token_share(cost, rank, world) for i in members[k])


def contiguous_share(n: int, rank: int, world: int) -> list[int]:
    """Indices 0..n-1 split into `world` contiguous blocks (np.array_split's sizes): rank
    `rank`'s block. Used for rollout shards, so each rank runs whole, adjacent problem groups."""
    if not 0 <= rank < world:
        raise ValueError(f"rank {rank} is not in 0..{world - 1}")
    return np.array_split(np.arange(n), world)[rank].tolist()


def sum_tree(trees: list[dict]) -> dict:
    """Key-wise sum of nested dicts of floats (e.g. every rank's loss sums, or its per-role token
    sums): a key missing from one dict counts as 0. Summed in rank order, so every rank gets the
    same floats."""
    out: dict = {}
    for tree in trees:
        for k, v in tree.items():
            if isinstance(v, dict):
                out[k] = sum_tree([out.get(k, {}), v])
            else:
                out[k] = out.get(k, 0.0) + v
    return out


def rank_idle(phase: str, busy: list[list[float]]) -> dict[str, float]:
    """How evenly the ranks shared `phase`: busy[r][k] is rank r's own seconds of work (not its
    waits) in the phase's k-th span, and every span ends where the ranks wait for each other (a
    collective). `perf/{phase}_rank_idle` is the share of the ranks' time spent waiting for the
    slowest, 1 - sum_k mean_r / sum_k max_r: per span, because a rank that is ahead at one span
    still waits there, however the totals balance. `perf/{phase}_rank_busy_max_s` is
    sum_k max_r, the phase's work at the pace of its slowest rank. {} for one rank or no work."""
    spans = np.asarray(busy, dtype=float)  # [ranks, spans]
    if spans.ndim != 2 or spans.shape[0] < 2 or spans.max(initial=0.0) <= 0:
        return {}
    slowest = float(spans.max(axis=0).sum())
    return {f"perf/{phase}_rank_idle": 1.0 - float(spans.mean(axis=0).sum()) / slowest,
            f"perf/{phase}_rank_busy_max_s": slowest}
