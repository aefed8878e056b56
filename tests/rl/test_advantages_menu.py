"""`scale_rewards` (group / batch / none), zero-spread group filtering and the `contribution`
estimator, on hand-built inputs with hand-computed numbers.

`scale_rewards` follows TRL 1.10.0.dev0 GRPOTrainer `_generate_and_score_completions`:
advantage = r - group mean, divided by the group's std (`group`), by the std of the whole
batch (`batch`), or not at all (`none`); Bessel std as `torch.std`. TRL adds 1e-4 to the std;
swarmrl keeps verl's 1e-6 (E below). DAPO's dynamic sampling drops groups whose rewards all
equal; swarmrl drops them from the update without re-sampling.
"""

from __future__ import annotations

import math

import pytest
import torch

from swarmrl.config import RLConfig
from swarmrl.rl.advantages import (collective_advantage, compute_advantages, contribution_advantage,
                                   grpo_advantage, leave_one_out_advantage, rloo_advantage, zero_spread)

E = 1e-6
# one sequence per rollout (TRL's layout): groups 0 (4 rollouts), 1 (2 rollouts), 2 (flat)
REWARDS = [1.0, 0.0, 0.5, 0.5, 1.0, 0.0, 0.2, 0.2]
GROUPS = [0, 0, 0, 0, 1, 1, 2, 2]


def single(rewards=REWARDS, groups=GROUPS):
    n = len(rewards)
    return torch.tensor(rewards), torch.tensor(groups), torch.arange(n), torch.zeros(n, dtype=torch.long)


def test_scale_rewards_group_is_the_default():
    g0, g1 = math.sqrt(1 / 6), math.sqrt(0.5)  # Bessel stds of (1, 0, .5, .5) and (1, 0)
    expected = [0.5 / (g0 + E), -0.5 / (g0 + E), 0.0, 0.0, 0.5 / (g1 + E), -0.5 / (g1 + E), 0.0, 0.0]
    assert grpo_advantage(*single()).tolist() == pytest.approx(expected, rel=1e-6, abs=1e-7)
    assert grpo_advantage(*single(), scale_rewards="group").tolist() == grpo_advantage(*single()).tolist()


def test_scale_rewards_batch_by_hand():
    # all 8 rewards: mean 3.4 / 8 = 0.425; squared deviations sum to 1.135; Bessel std sqrt(1.135 / 7)
    b = math.sqrt(1.135 / 7)
    assert b == pytest.approx(0.4026697, rel=1e-6)
    expected = [0.5 / (b + E), -0.5 / (b + E), 0.0, 0.0, 0.5 / (b + E), -0.5 / (b + E), 0.0, 0.0]
    for fn in (grpo_advantage, collective_advantage):
        assert fn(*single(), scale_rewards="batch").tolist() == pytest.approx(expected, rel=1e-6, abs=1e-7)


def test_scale_rewards_none_is_the_centred_reward():
    expected = [0.5, -0.5, 0.0, 0.0, 0.5, -0.5, 0.0, 0.0]
    for fn in (grpo_advantage, collective_advantage):
        assert fn(*single(), scale_rewards="none").tolist() == pytest.approx(expected, abs=1e-7)


def test_batch_std_counts_each_rollout_once():
    # rollout rewards (1, 0 | 2, 0): rollout 10 has three agents. Over rollouts: mean 0.75,
    # squared deviations .0625 + .5625 + 1.5625 + .5625 = 2.75, Bessel std sqrt(2.75 / 3)
    rewards = torch.tensor([1.0, 1.0, 1.0, 0.0, 2.0, 0.0])
    args = (rewards, torch.tensor([0, 0, 0, 0, 5, 5]), torch.tensor([10, 10, 10, 11, 12, 13]), torch.zeros(6).long())
    b = math.sqrt(2.75 / 3) + E
    a, c = 0.5 / b, 1.0 / b
    assert grpo_advantage(*args, scale_rewards="batch").tolist() == pytest.approx([a, a, a, -a, c, -c], rel=1e-6)


def test_bad_scale_is_an_error():
    with pytest.raises(ValueError, match="scale_rewards"):
        grpo_advantage(*single(), scale_rewards="std")


def test_zero_spread_groups_are_dropped_and_counted():
    assert zero_spread(*single()[:3]).tolist() == [False] * 6 + [True, True]
    adv, keep, m = compute_advantages(rloo_advantage, RLConfig(advantage="rloo", drop_zero_spread_groups=True),
                                      *single())
    assert keep.tolist() == [True] * 6 + [False, False]
    assert m == {"adv/groups_dropped": 1.0, "adv/groups_dropped_frac": pytest.approx(1 / 3)}
    # rloo on group 0: r - mean of the other three: 1 - 1/3, 0 - 2/3, .5 - .5, .5 - .5
    assert adv.tolist() == pytest.approx([2 / 3, -2 / 3, 0.0, 0.0, 1.0, -1.0, 0.0, 0.0], abs=1e-6)
    adv2, keep2, m2 = compute_advantages(rloo_advantage, RLConfig(advantage="rloo"), *single())
    assert keep2.all() and m2 == {} and adv2.tolist() == adv.tolist()


def test_scale_rewards_for_an_estimator_without_the_option_is_an_error():
    with pytest.raises(ValueError, match="scale_rewards"):
        compute_advantages(rloo_advantage, RLConfig(advantage="rloo", scale_rewards="none"), *single())


def team_layout():
    """One group of two rollouts: rollout 0 = (ceo, e1, e2) scored 0.75, rollout 1 = (ceo, e1)
    scored 0.25; contributions (0, 0.5, 0.25) and (0.25, 0)."""
    rewards = torch.tensor([0.75, 0.75, 0.75, 0.25, 0.25])
    groups, rollouts = torch.zeros(5, dtype=torch.long), torch.tensor([0, 0, 0, 1, 1])
    roles = torch.tensor([0, 1, 1, 0, 1])
    return (rewards, groups, rollouts, roles), torch.tensor([0.0, 0.5, 0.25, 0.25, 0.0])


def test_contribution_estimator_by_hand():
    args, contrib = team_layout()
    # collective: rollout rewards (.75, .25), mean .5, Bessel std sqrt(.125): +-0.25 / (sqrt(.125) + E)
    coll = 0.25 / (math.sqrt(0.125) + E)
    # contributions over the group's 5 sequences: mean 0.2, deviations (-.2, .3, .05, .05, -.2),
    # squares sum 0.175, Bessel std sqrt(0.175 / 4)
    s = math.sqrt(0.175 / 4) + E
    z = [-0.2 / s, 0.3 / s, 0.05 / s, 0.05 / s, -0.2 / s]
    got = contribution_advantage(*args, contribution=contrib, contribution_coef=0.5)
    expected = [0.5 * coll + 0.5 * z[0], 0.5 * coll + 0.5 * z[1], 0.5 * coll + 0.5 * z[2],
                -0.5 * coll + 0.5 * z[3], -0.5 * coll + 0.5 * z[4]]
    assert got.tolist() == pytest.approx(expected, rel=1e-6)
    assert got[1].item() == pytest.approx(0.5 * 0.7071048 + 0.5 * 1.4342615, rel=1e-5)
    # beta = 0 is the collective advantage exactly; beta = 1 is the contribution alone
    zero = contribution_advantage(*args, contribution=contrib, contribution_coef=0.0)
    assert zero.tolist() == collective_advantage(*args).tolist()
    assert contribution_advantage(*args, contribution=contrib, contribution_coef=1.0).tolist() == \
        pytest.approx(z, rel=1e-6)


def test_contribution_estimator_needs_contributions():
    args, _ = team_layout()
    with pytest.raises(ValueError, match="contribution"):
        contribution_advantage(*args)


def test_compute_advantages_passes_contributions_and_the_coefficient():
    args, contrib = team_layout()
    loo = torch.tensor([0.0, 0.75, 0.25, 0.25, 0.0])
    per_seq = {"contribution": contrib, "leave_one_out": loo}
    adv, keep, _ = compute_advantages(contribution_advantage, RLConfig(advantage="contribution",
                                                                       contribution_coef=0.25), *args, per_seq)
    assert keep.all()
    assert adv.tolist() == contribution_advantage(*args, contribution=contrib, contribution_coef=0.25).tolist()
    # leave_one_out: the same mix on the difference rewards
    adv, _, _ = compute_advantages(leave_one_out_advantage, RLConfig(advantage="leave_one_out"), *args, per_seq)
    assert adv.tolist() == contribution_advantage(*args, contribution=loo, contribution_coef=0.5).tolist()
    with pytest.raises(ValueError, match="difference rewards"):
        leave_one_out_advantage(*args)
