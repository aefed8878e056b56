"""Advantage estimators (a registry: every entry has the same signature).

One *sequence* is one agent's trajectory in one rollout. Every estimator maps per-sequence
rewards to one scalar per sequence:

    fn(rewards: [S] float, groups: [S] long, rollouts: [S] long, roles: [S] long) -> [S]

`groups` is the problem id of the sequence's rollout (the rollouts of one problem form a
group), `rollouts` the rollout id, `roles` the role-type id (all generators share one id).
The trainer applies each sequence's scalar flat to every token that sequence generated.

Built-in estimators (`rl.advantage`; a `module:fn` spec loads a user's function of the same
signature):
- `collective` (RLCR; docs/ARCHITECTURE.md, "Invariants"): one flat advantage per rollout,
  the rollout's reward normalised among the rollouts of its problem; every agent of the
  rollout gets it.
- `grpo`: GRPO / verl group normalisation, with each sequence's *own* reward in the numerator.
- `rloo`: REINFORCE leave-one-out baseline over the other rollouts of the group, no std.
- `per_role`: normalised per (problem, role type), a baseline per role as in per-role
  adapters (the "isolated policy" of Zeng et al. 2026 trained each role against its peers).

Where a group has no spread (all rewards equal, or a single member) the advantage is exactly
0, decided by comparing max and min — not by `(r - mean) / eps`, which turns float rounding
of the mean into a spurious signal of size 1e-7 / 1e-6.
"""

from __future__ import annotations

from typing import Callable

import torch

from swarmrl.registry import Registry

AdvantageFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
ADVANTAGES: Registry[AdvantageFn] = Registry("advantage estimator", classes=False)
EPS = 1e-6  # verl's GRPO epsilon in (r - mean) / (std + eps)


def register_advantage(name: str) -> Callable[[AdvantageFn], AdvantageFn]:
    """Decorator adding an estimator under `name` (a duplicate name is a PluginError)."""
    return ADVANTAGES.register(name)


def get_advantage(name: str) -> AdvantageFn:
    """A registered name, or a `package.module:fn` / `path/file.py:fn` spec -> the estimator."""
    return ADVANTAGES.get(name)


# --- segment statistics (pure tensor helpers) ------------------------------------------------

def _segment_stats(values: torch.Tensor, seg: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-member mean, Bessel std, member count and "no spread" flag of each member's segment.

    values: [N] float, seg: [N] long (any ids, not necessarily contiguous or sorted).
    Returns four [N] tensors, each member getting its segment's statistic.
    """
    _, inv = torch.unique(seg, return_inverse=True)  # [N] in 0..G-1
    g = int(inv.max()) + 1 if inv.numel() else 0
    count = torch.zeros(g, dtype=values.dtype).index_add_(0, inv, torch.ones_like(values))  # [G]
    mean = torch.zeros(g, dtype=values.dtype).index_add_(0, inv, values) / count  # [G]
    sq = torch.zeros(g, dtype=values.dtype).index_add_(0, inv, (values - mean[inv]) ** 2)  # [G]
    std = torch.sqrt(sq / (count - 1).clamp(min=1))  # [G] Bessel, as torch.std and verl
    hi = torch.full((g,), -torch.inf, dtype=values.dtype).scatter_reduce(0, inv, values, "amax")  # [G]
    lo = torch.full((g,), torch.inf, dtype=values.dtype).scatter_reduce(0, inv, values, "amin")  # [G]
    flat = hi == lo  # [G] constant segment, including a segment of one
    return mean[inv], std[inv], count[inv], flat[inv]


def _per_rollout(rewards: torch.Tensor, groups: torch.Tensor, rollouts: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Dedupe sequences to rollouts so that a rollout counts once however many agents it has.

    rewards, groups, rollouts: [S]. Returns (rollout_reward [R], rollout_group [R],
    seq_to_rollout [S] in 0..R-1). A rollout's reward is the mean of its sequences' rewards,
    which is *the* collective reward when it is shared (RLCR); with per-agent rewards it is
    the team's mean.
    """
    _, inv = torch.unique(rollouts, return_inverse=True)  # [S] in 0..R-1
    r = int(inv.max()) + 1 if inv.numel() else 0
    n = torch.zeros(r, dtype=rewards.dtype).index_add_(0, inv, torch.ones_like(rewards))  # [R]
    reward = torch.zeros(r, dtype=rewards.dtype).index_add_(0, inv, rewards) / n  # [R]
    g_hi = torch.full((r,), torch.iinfo(torch.long).min).scatter_reduce(0, inv, groups.long(), "amax")  # [R]
    g_lo = torch.full((r,), torch.iinfo(torch.long).max).scatter_reduce(0, inv, groups.long(), "amin")  # [R]
    if not torch.equal(g_hi, g_lo):
        raise ValueError("sequences of one rollout carry different group ids")
    return reward, g_hi, inv


def _check(rewards: torch.Tensor, groups: torch.Tensor, rollouts: torch.Tensor, roles: torch.Tensor) -> None:
    shapes = {t.shape for t in (rewards, groups, rollouts, roles)}
    if len(shapes) != 1 or rewards.dim() != 1:
        raise ValueError(f"rewards, groups, rollouts, roles must be 1-D of one length; got {sorted(shapes)}")


# --- estimators --------------------------------------------------------------------------------

@ADVANTAGES.register("collective")
def collective_advantage(rewards: torch.Tensor, groups: torch.Tensor, rollouts: torch.Tensor,
                         roles: torch.Tensor) -> torch.Tensor:
    """RLCR's flat collective advantage.  [S] x 4 -> [S].

    The rollout's reward is normalised among the rollouts of its group, each rollout counted
    once (a 4-agent rollout is not 4 samples of the baseline): (r - mean) / (std + 1e-6),
    Bessel std; 0 for a constant group. The value is broadcast to every sequence of the
    rollout, whatever its own reward: one number per rollout (invariant 4).
    """
    _check(rewards, groups, rollouts, roles)
    reward, group, seq_to_rollout = _per_rollout(rewards, groups, rollouts)  # [R], [R], [S]
    mean, std, _, flat = _segment_stats(reward, group)  # [R] each
    adv = torch.where(flat, torch.zeros_like(reward), (reward - mean) / (std + EPS))  # [R]
    return adv[seq_to_rollout]  # [S]


@ADVANTAGES.register("grpo")
def grpo_advantage(rewards: torch.Tensor, groups: torch.Tensor, rollouts: torch.Tensor,
                   roles: torch.Tensor) -> torch.Tensor:
    """GRPO (Shao et al. 2024; verl `compute_grpo_outcome_advantage`).  [S] x 4 -> [S].

    The group mean and Bessel std are taken over the group's *rollouts* (each counted once,
    its reward the mean of its sequences'), and each sequence is scored with its *own*
    reward: (r_s - mean) / (std + 1e-6).

    Honest note: when the reward is shared by every agent of a rollout — the collective
    reward this project trains on — this is exactly `collective`. It differs only when
    rewards differ per sequence (per-agent shaping, per-role graders): then agents of one
    rollout get different advantages against the same group baseline. A group whose
    rollout rewards are all equal gets 0 for all its sequences, even if its sequences'
    own rewards differ: with std 0 the division would turn those differences into ±1e6.
    Departure from verl: verl gives a group of one mean 0 / std 1 (the raw reward); here a
    group of one carries no comparison and gets 0, as in `collective`.
    """
    _check(rewards, groups, rollouts, roles)
    reward, group, seq_to_rollout = _per_rollout(rewards, groups, rollouts)  # [R], [R], [S]
    mean, std, _, flat = _segment_stats(reward, group)  # [R] each
    mean, std, flat = mean[seq_to_rollout], std[seq_to_rollout], flat[seq_to_rollout]  # [S] each
    return torch.where(flat, torch.zeros_like(rewards), (rewards - mean) / (std + EPS))  # [S]


@ADVANTAGES.register("rloo")
def rloo_advantage(rewards: torch.Tensor, groups: torch.Tensor, rollouts: torch.Tensor,
                   roles: torch.Tensor) -> torch.Tensor:
    """REINFORCE leave-one-out (Ahmadian et al. 2024).  [S] x 4 -> [S].

    r_s - mean_{j != i} r_j where i is the sequence's rollout and j runs over the *other*
    rollouts of its group (each counted once, reward = mean of its sequences'). No std
    division: the scale of the reward is kept. A group of one rollout gets 0.
    """
    _check(rewards, groups, rollouts, roles)
    reward, group, seq_to_rollout = _per_rollout(rewards, groups, rollouts)  # [R], [R], [S]
    mean, _, count, _ = _segment_stats(reward, group)  # [R], [R]
    others = (mean * count - reward) / (count - 1).clamp(min=1)  # [R] mean of the other rollouts
    adv = rewards - others[seq_to_rollout]  # [S]
    return torch.where(count[seq_to_rollout] > 1, adv, torch.zeros_like(adv))  # [S]


@ADVANTAGES.register("per_role")
def per_role_advantage(rewards: torch.Tensor, groups: torch.Tensor, rollouts: torch.Tensor,
                       roles: torch.Tensor) -> torch.Tensor:
    """A baseline per (problem, role type).  [S] x 4 -> [S].

    Each sequence's reward is normalised among the sequences of the same role type in the
    same group: (r_s - mean) / (std + 1e-6), Bessel std over those *sequences* (not deduped
    by rollout: three generators of one rollout are three samples of the generator role),
    0 when they are all equal. With a shared reward and one agent per role per rollout this
    equals `collective`; a role with multiplicity k sees each rollout reward k times, which
    leaves the mean unchanged but shrinks the Bessel std slightly.
    """
    _check(rewards, groups, rollouts, roles)
    _, key = torch.unique(torch.stack([groups.long(), roles.long()], dim=1), dim=0, return_inverse=True)  # [S]
    mean, std, _, flat = _segment_stats(rewards, key)  # [S] each
    return torch.where(flat, torch.zeros_like(rewards), (rewards - mean) / (std + EPS))  # [S]
