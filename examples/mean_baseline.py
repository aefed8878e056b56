"""`mean_baseline`: a custom advantage estimator in one file (`rl.advantage` plugin).

Each sequence's advantage is its own reward minus the mean reward of its group (the
rollouts of one problem, each rollout counted once however many agents it has), with no
division by the std: the reward's scale is kept, and a group with no spread gets exactly 0.

    swarmrl train configs/tiny_test.yaml --out runs/mb rl.advantage=examples/mean_baseline.py:mean_baseline

Signature (rl/advantages.py): fn(rewards [S], groups [S], rollouts [S], roles [S]) -> [S].
"""

from __future__ import annotations

import torch


def mean_baseline(rewards: torch.Tensor, groups: torch.Tensor, rollouts: torch.Tensor,
                  roles: torch.Tensor) -> torch.Tensor:
    """r_s - mean over the group's rollouts of the rollout reward.  [S] x 4 -> [S]."""
    _, seq_rollout = torch.unique(rollouts, return_inverse=True)  # [S] in 0..R-1
    n_roll = int(seq_rollout.max()) + 1 if rollouts.numel() else 0
    ones = torch.ones_like(rewards)
    per_roll = torch.zeros(n_roll, dtype=rewards.dtype).index_add_(0, seq_rollout, rewards)
    per_roll = per_roll / torch.zeros(n_roll, dtype=rewards.dtype).index_add_(0, seq_rollout, ones)  # [R]
    roll_group = torch.zeros(n_roll, dtype=torch.long).index_copy_(0, seq_rollout, groups.long())  # [R]
    _, g_inv = torch.unique(roll_group, return_inverse=True)  # [R] in 0..G-1
    n_group = int(g_inv.max()) + 1 if n_roll else 0
    total = torch.zeros(n_group, dtype=rewards.dtype).index_add_(0, g_inv, per_roll)
    count = torch.zeros(n_group, dtype=rewards.dtype).index_add_(0, g_inv, torch.ones_like(per_roll))
    mean = (total / count)[g_inv][seq_rollout]  # [S] the group mean of each sequence
    hi = torch.full((n_group,), -torch.inf, dtype=rewards.dtype).scatter_reduce(0, g_inv, per_roll, "amax")
    lo = torch.full((n_group,), torch.inf, dtype=rewards.dtype).scatter_reduce(0, g_inv, per_roll, "amin")
    flat = (hi == lo)[g_inv][seq_rollout]  # [S] no spread among the group's rollouts
    return torch.where(flat, torch.zeros_like(rewards), rewards - mean)
