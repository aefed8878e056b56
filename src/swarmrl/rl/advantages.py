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
- `contribution`: credit beyond flat: (1 - beta) * `collective` + beta * the agent's verified
  contribution (rl/credit.py) normalised within its group (`rl.contribution_coef` = beta).
- `leave_one_out`: the same mix with the agent's difference reward (rl/credit.py
  `leave_one_out`: the score lost without its decided items and what was built on them).

Options. An estimator may take keyword-only options after the four tensors and list their
names in the function attribute `options`; `compute_advantages` (the trainer's one call) passes
exactly those: `scale_rewards` (`rl.scale_rewards`), `contribution_coef`, and the per-sequence
scores `contribution` and `leave_one_out` ([S] each, from rl/batch.py `collect_sequences`). It also applies
`rl.drop_zero_spread_groups` (DAPO's dynamic sampling), whatever the estimator.

Where a group has no spread (all rewards equal, or a single member) the advantage is exactly
0, decided by comparing max and min — not by `(r - mean) / eps`, which turns float rounding
of the mean into a spurious signal of size 1e-7 / 1e-6.
"""

from __future__ import annotations

from typing import Callable

import torch

from swarmrl.config import RLConfig
from swarmrl.registry import Registry

AdvantageFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
ADVANTAGES: Registry[AdvantageFn] = Registry("advantage estimator", classes=False)
EPS = 1e-6  # verl's GRPO epsilon in (r - mean) / (std + eps); TRL 1.10 uses 1e-4
SCALES = ("group", "batch", "none")


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

def _scaled(values: torch.Tensor, reward: torch.Tensor, group: torch.Tensor, scale_rewards: str) -> torch.Tensor:
    """(values - group mean of `reward`) / scale, 0 where the group has no spread.  [R] -> [R].

    values: the numerator's reward per member ([R], the rollout's own or, for grpo, already
    broadcast); reward, group: [R] one entry per rollout. TRL 1.10 `scale_rewards`: `group` =
    the group's Bessel std, `batch` = the Bessel std of every rollout reward given (the step's
    batch, each rollout once), `none` = no division (Dr. GRPO).
    """
    if scale_rewards not in SCALES:
        raise ValueError(f"scale_rewards must be one of {SCALES}, got {scale_rewards!r}")
    mean, std, _, flat = _segment_stats(reward, group)  # [R] each
    if scale_rewards == "batch":
        std = _segment_stats(reward, torch.zeros_like(group))[1]  # [R] one segment: the whole batch
    adv = values - mean if scale_rewards == "none" else (values - mean) / (std + EPS)  # [R]
    return torch.where(flat, torch.zeros_like(adv), adv)  # [R]


@ADVANTAGES.register("collective")
def collective_advantage(rewards: torch.Tensor, groups: torch.Tensor, rollouts: torch.Tensor,
                         roles: torch.Tensor, *, scale_rewards: str = "group") -> torch.Tensor:
    """RLCR's flat collective advantage.  [S] x 4 -> [S].

    The rollout's reward is normalised among the rollouts of its group, each rollout counted
    once (a 4-agent rollout is not 4 samples of the baseline): (r - mean) / (std + 1e-6),
    Bessel std; 0 for a constant group. The value is broadcast to every sequence of the
    rollout, whatever its own reward: one number per rollout (invariant 4). `scale_rewards`
    as in `grpo`.
    """
    _check(rewards, groups, rollouts, roles)
    reward, group, seq_to_rollout = _per_rollout(rewards, groups, rollouts)  # [R], [R], [S]
    return _scaled(reward, reward, group, scale_rewards)[seq_to_rollout]  # [S]


collective_advantage.options = ("scale_rewards",)


@ADVANTAGES.register("grpo")
def grpo_advantage(rewards: torch.Tensor, groups: torch.Tensor, rollouts: torch.Tensor,
                   roles: torch.Tensor, *, scale_rewards: str = "group") -> torch.Tensor:
    """GRPO (Shao et al. 2024; verl `compute_grpo_outcome_advantage`).  [S] x 4 -> [S].

    The group mean and Bessel std are taken over the group's *rollouts* (each counted once,
    its reward the mean of its sequences'), and each sequence is scored with its *own*
    reward: (r_s - mean) / (std + 1e-6). `scale_rewards` (TRL 1.10 GRPOTrainer semantics):
    `group` divides by the group's std (above), `batch` by the std of all the step's rollout
    rewards, `none` not at all: r_s - mean (Dr. GRPO). TRL adds 1e-4 to the std, here 1e-6.

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
    if scale_rewards not in SCALES:
        raise ValueError(f"scale_rewards must be one of {SCALES}, got {scale_rewards!r}")
    mean, std, _, flat = (x[seq_to_rollout] for x in _segment_stats(reward, group))  # [S] each
    if scale_rewards == "batch":
        std = _segment_stats(reward, torch.zeros_like(group))[1][seq_to_rollout]  # [S]
    adv = rewards - mean if scale_rewards == "none" else (rewards - mean) / (std + EPS)  # [S]
    return torch.where(flat, torch.zeros_like(rewards), adv)  # [S]


grpo_advantage.options = ("scale_rewards",)


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


@ADVANTAGES.register("contribution")
def contribution_advantage(rewards: torch.Tensor, groups: torch.Tensor, rollouts: torch.Tensor,
                           roles: torch.Tensor, *, contribution: torch.Tensor | None = None,
                           contribution_coef: float = 0.5, scale_rewards: str = "group") -> torch.Tensor:
    """Credit beyond flat.  [S] x 4, contribution [S] -> [S].

    A_s = (1 - beta) * collective_s + beta * z_s, where collective_s is the `collective`
    advantage of the sequence's rollout and z_s the sequence's contribution score c_s
    (rl/credit.py: the credit of items its agent decided, plus that of items others decided
    with a verified result it had posted) normalised among all *sequences* of its group:
    (c_s - mean) / (Bessel std + 1e-6), 0 when the group's contributions are all equal.
    Within one rollout, agents that contributed more get more; across rollouts the team's
    outcome still counts through the first term. beta = 0 is `collective` exactly.
    """
    _check(rewards, groups, rollouts, roles)
    if contribution is None or contribution.shape != rewards.shape:
        raise ValueError("the contribution estimator needs per-sequence contribution scores of shape "
                         f"{tuple(rewards.shape)} (rl/batch.py collect_sequences fills them)")
    flat_adv = collective_advantage(rewards, groups, rollouts, roles, scale_rewards=scale_rewards)  # [S]
    c = contribution.to(rewards.dtype)  # [S]
    mean, std, _, flat = _segment_stats(c, groups)  # [S] each, over the group's sequences
    z = torch.where(flat, torch.zeros_like(c), (c - mean) / (std + EPS))  # [S]
    return (1.0 - contribution_coef) * flat_adv + contribution_coef * z  # [S]


contribution_advantage.options = ("contribution", "contribution_coef", "scale_rewards")


@ADVANTAGES.register("leave_one_out")
def leave_one_out_advantage(rewards: torch.Tensor, groups: torch.Tensor, rollouts: torch.Tensor,
                            roles: torch.Tensor, *, leave_one_out: torch.Tensor | None = None,
                            contribution_coef: float = 0.5, scale_rewards: str = "group") -> torch.Tensor:
    """`contribution` with each agent's difference reward (rl/credit.py `leave_one_out`) in place
    of its contribution score.  [S] x 4, leave_one_out [S] -> [S]."""
    if leave_one_out is None:
        raise ValueError("the leave_one_out estimator needs per-sequence difference rewards "
                         "(rl/batch.py collect_sequences fills them)")
    return contribution_advantage(rewards, groups, rollouts, roles, contribution=leave_one_out,
                                  contribution_coef=contribution_coef, scale_rewards=scale_rewards)


leave_one_out_advantage.options = ("leave_one_out", "contribution_coef", "scale_rewards")


def zero_spread(rewards: torch.Tensor, groups: torch.Tensor, rollouts: torch.Tensor) -> torch.Tensor:
    """Sequences whose group's rollout rewards are all equal (or a group of one rollout): bool [S]."""
    reward, group, seq_to_rollout = _per_rollout(rewards, groups, rollouts)  # [R], [R], [S]
    return _segment_stats(reward, group)[3][seq_to_rollout]  # [S]


def compute_advantages(fn: AdvantageFn, cfg: RLConfig, rewards: torch.Tensor, groups: torch.Tensor,
                       rollouts: torch.Tensor, roles: torch.Tensor, per_seq: dict[str, torch.Tensor] | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """The trainer's call: (advantage [S], keep [S] bool, metrics). `per_seq`: per-sequence
    scores by option name ({"contribution": [S], "leave_one_out": [S]}).

    Passes `fn` the options it lists in `fn.options`; a `rl.scale_rewards` other than `group`
    for an estimator without that option is an error, not a silent no-op. With
    `rl.drop_zero_spread_groups`, the sequences of groups without reward spread get `keep`
    False (the trainer leaves them out of the update) and advantage 0; `adv/groups_dropped`
    counts those groups and `adv/groups_dropped_frac` is their share of the step's groups.
    DAPO (verl's `filter_groups`) drops a group when the std of its rewards is 0 and then
    samples more groups to refill the batch; here nothing is re-sampled (a step's rollouts are
    a function of (seed, step)), and a group of one rollout (the others lost to infra errors)
    is dropped too, where verl keeps it: its advantage is 0 under every built-in estimator.
    """
    wanted = getattr(fn, "options", ())
    if cfg.scale_rewards != "group" and "scale_rewards" not in wanted:
        raise ValueError(f"rl.scale_rewards={cfg.scale_rewards} but rl.advantage={cfg.advantage!r} has no "
                         "scale_rewards option")
    given = {"scale_rewards": cfg.scale_rewards, "contribution_coef": cfg.contribution_coef, **(per_seq or {})}
    adv = fn(rewards, groups, rollouts, roles, **{k: given[k] for k in wanted if k in given})  # [S]
    keep = torch.ones_like(rewards, dtype=torch.bool)  # [S]
    metrics: dict[str, float] = {}
    if cfg.drop_zero_spread_groups:
        flat = zero_spread(rewards, groups, rollouts)  # [S]
        keep = ~flat
        adv = torch.where(keep, adv, torch.zeros_like(adv))  # [S]
        n_groups = int(torch.unique(groups).numel())
        dropped = int(torch.unique(groups[flat]).numel())
        metrics = {"adv/groups_dropped": float(dropped), "adv/groups_dropped_frac": dropped / max(n_groups, 1)}
    return adv, keep, metrics
