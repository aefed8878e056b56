"""Advantage estimators on per-sequence inputs, every number checked against hand computation."""

from __future__ import annotations

import math

import pytest
import torch

from swarmrl.registry import PluginError
from swarmrl.rl.advantages import (ADVANTAGES, collective_advantage, get_advantage, grpo_advantage,
                                   per_role_advantage, rloo_advantage)

E = 1e-6


def one_seq_per_rollout(scores: list[float], groups: list[int]):
    """The single-agent layout: sequence i is rollout i, all the same role."""
    n = len(scores)
    return (torch.tensor(scores), torch.tensor(groups), torch.arange(n), torch.zeros(n, dtype=torch.long))


# --- collective ---------------------------------------------------------------------------------

def test_collective_advantage_by_hand():
    adv = collective_advantage(*one_seq_per_rollout([1.0, 0.0, 0.5, 0.5, 1.0, 1.0], [0, 0, 0, 0, 1, 1]))
    # group 0: mean 0.5, deviations (0.5, -0.5, 0, 0);
    # Bessel variance (0.25 + 0.25) / (4 - 1) = 1/6, std = 0.4082483
    std = math.sqrt(1 / 6)
    expected = [0.5 / (std + E), -0.5 / (std + E), 0.0, 0.0, 0.0, 0.0]
    assert adv.tolist() == pytest.approx(expected, rel=1e-6, abs=1e-7)
    assert adv[0].item() == pytest.approx(1.2247419, rel=1e-6)
    # group 1 scored the same everywhere: exactly zero, not a division blow-up
    assert adv[4].item() == 0.0 and adv[5].item() == 0.0
    assert adv.shape == (6,)


def test_constant_group_and_singleton_group_get_exactly_zero():
    # 0.1 is not exact in float32: (r - mean) / eps would give rounding noise, not 0
    adv = collective_advantage(*one_seq_per_rollout([0.1, 0.1, 0.1, 0.75], [0, 0, 0, 1]))
    assert adv.tolist() == [0.0, 0.0, 0.0, 0.0]


def test_groups_need_not_be_contiguous_or_sorted():
    adv = collective_advantage(*one_seq_per_rollout([0.0, 1.0, 1.0, 0.0, 0.5], [7, 3, 7, 3, 7]))
    # group 7: (0, 1, 0.5): mean 0.5, Bessel std sqrt((0.25+0.25+0)/2) = 0.5
    # group 3: (1, 0):      mean 0.5, Bessel std sqrt(0.5) = 0.7071068
    g3 = 0.5 / (math.sqrt(0.5) + E)
    expected = [-0.5 / 0.500001, g3, 0.5 / 0.500001, -g3, 0.0]
    assert adv.tolist() == pytest.approx(expected, rel=1e-6, abs=1e-7)


def test_collective_counts_each_rollout_once_and_is_flat_over_its_agents():
    # group 0: rollout 10 has 3 agents (reward 1), rollout 11 has 1 agent (reward 0).
    # Counted per rollout: (1, 0), mean 0.5, Bessel std sqrt(0.5) -> +-0.5/0.7071078.
    # (Counted per sequence it would be (1,1,1,0): mean 0.75 — the wrong baseline.)
    rewards = torch.tensor([1.0, 1.0, 1.0, 0.0, 2.0, 2.0])
    groups = torch.tensor([0, 0, 0, 0, 5, 5])
    rollouts = torch.tensor([10, 10, 10, 11, 12, 13])
    roles = torch.tensor([0, 1, 1, 0, 0, 0])
    adv = collective_advantage(rewards, groups, rollouts, roles)
    a = 0.5 / (math.sqrt(0.5) + E)
    assert adv.tolist() == pytest.approx([a, a, a, -a, 0.0, 0.0], rel=1e-6)


def test_collective_broadcasts_the_rollout_mean_when_agent_rewards_differ():
    # rollout 0: agents (1, 0) -> team reward 0.5; rollout 1: 0. Group (0.5, 0): std sqrt(0.125)
    rewards = torch.tensor([1.0, 0.0, 0.0])
    adv = collective_advantage(rewards, torch.tensor([0, 0, 0]), torch.tensor([0, 0, 1]), torch.tensor([0, 1, 0]))
    a = 0.25 / (math.sqrt(0.125) + E)
    assert adv.tolist() == pytest.approx([a, a, -a], rel=1e-6)


def test_advantage_is_invariant_to_shifting_rewards_within_a_group():
    args = one_seq_per_rollout([0.0, 0.25, 1.0, 0.5], [0, 0, 0, 0])
    shifted = (args[0] + 3.0, *args[1:])
    for fn in (collective_advantage, grpo_advantage, rloo_advantage, per_role_advantage):
        assert fn(*shifted).tolist() == pytest.approx(fn(*args).tolist(), abs=1e-5)
        assert fn(*args).sum().item() == pytest.approx(0.0, abs=1e-6)


def test_rollout_with_inconsistent_groups_is_an_error():
    with pytest.raises(ValueError, match="different group ids"):
        collective_advantage(torch.tensor([1.0, 1.0]), torch.tensor([0, 1]), torch.tensor([0, 0]), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="1-D of one length"):
        collective_advantage(torch.tensor([1.0, 1.0]), torch.tensor([0]), torch.tensor([0, 0]), torch.tensor([0, 1]))


# --- grpo ---------------------------------------------------------------------------------------

def test_grpo_equals_collective_when_the_reward_is_shared():
    rewards = torch.tensor([1.0, 1.0, 1.0, 0.0, 0.5, 0.5, 0.3, 0.9])
    groups = torch.tensor([0, 0, 0, 0, 0, 0, 1, 1])
    rollouts = torch.tensor([0, 0, 0, 1, 2, 2, 3, 4])
    roles = torch.tensor([0, 1, 1, 0, 0, 1, 0, 0])
    assert torch.equal(grpo_advantage(rewards, groups, rollouts, roles),
                       collective_advantage(rewards, groups, rollouts, roles))


def test_grpo_uses_each_sequences_own_reward_against_the_rollout_baseline():
    # group 0: rollout 0 agents (1.0, 0.5) -> 0.75; rollout 1 agent (0.25) -> 0.25.
    # Baseline over rollouts (0.75, 0.25): mean 0.5, Bessel std sqrt(0.125) = 0.3535534.
    # group 1: rollouts (0.4, 0.4) but agents (0.2, 0.6) and (0.4): no spread -> 0.
    rewards = torch.tensor([1.0, 0.5, 0.25, 0.2, 0.6, 0.4])
    groups = torch.tensor([0, 0, 0, 1, 1, 1])
    rollouts = torch.tensor([0, 0, 1, 2, 2, 3])
    roles = torch.tensor([0, 1, 0, 0, 1, 0])
    adv = grpo_advantage(rewards, groups, rollouts, roles)
    s = math.sqrt(0.125) + E
    assert adv.tolist() == pytest.approx([0.5 / s, 0.0, -0.25 / s, 0.0, 0.0, 0.0], abs=1e-6)
    # collective instead gives both agents of rollout 0 the same 0.25 / s
    col = collective_advantage(rewards, groups, rollouts, roles)
    assert col[:3].tolist() == pytest.approx([0.25 / s, 0.25 / s, -0.25 / s], abs=1e-6)


# --- rloo ---------------------------------------------------------------------------------------

def test_rloo_by_hand():
    # group 0 rollouts (1, 0, 0.5): 1 - (0+0.5)/2 = 0.75; 0 - (1+0.5)/2 = -0.75; 0.5 - 0.5 = 0
    # group 1 is a single rollout: 0
    adv = rloo_advantage(*one_seq_per_rollout([1.0, 0.0, 0.5, 0.9], [0, 0, 0, 1]))
    assert adv.tolist() == pytest.approx([0.75, -0.75, 0.0, 0.0], abs=1e-7)


def test_rloo_dedupes_rollouts_and_keeps_the_reward_scale():
    # rollout 0 (3 agents, reward 2), rollout 1 (1 agent, reward 0), one group.
    # Per rollout: 2 - 0 = 2 for each of rollout 0's agents, 0 - 2 = -2 for rollout 1.
    adv = rloo_advantage(torch.tensor([2.0, 2.0, 2.0, 0.0]), torch.zeros(4, dtype=torch.long),
                         torch.tensor([0, 0, 0, 1]), torch.tensor([0, 1, 1, 0]))
    assert adv.tolist() == [2.0, 2.0, 2.0, -2.0]


# --- per_role -----------------------------------------------------------------------------------

def test_per_role_by_hand():
    # group 0, two rollouts of a voting-like workflow: role 0 = generator (x2), role 1 = aggregator.
    #   rollout 0: generators 1.0, 0.0; aggregator 1.0      rollout 1: generators 0.5, 0.5; aggregator 0.0
    # generators (1, 0, 0.5, 0.5): mean 0.5, Bessel std sqrt(0.5/3) = 0.4082483
    # aggregator (1, 0): mean 0.5, Bessel std sqrt(0.5) = 0.7071068
    # group 1, role 0 only, (0.3, 0.3): constant -> 0
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.5, 0.5, 0.0, 0.3, 0.3])
    groups = torch.tensor([0, 0, 0, 0, 0, 0, 1, 1])
    rollouts = torch.tensor([0, 0, 0, 1, 1, 1, 2, 3])
    roles = torch.tensor([0, 0, 1, 0, 0, 1, 0, 0])
    adv = per_role_advantage(rewards, groups, rollouts, roles)
    g = 0.5 / (math.sqrt(0.5 / 3) + E)
    a = 0.5 / (math.sqrt(0.5) + E)
    assert adv.tolist() == pytest.approx([g, -g, a, 0.0, 0.0, -a, 0.0, 0.0], abs=1e-6)


def test_per_role_with_one_agent_per_role_equals_collective():
    rewards = torch.tensor([1.0, 1.0, 0.0, 0.0, 0.5, 0.5])
    groups = torch.zeros(6, dtype=torch.long)
    rollouts = torch.tensor([0, 0, 1, 1, 2, 2])
    roles = torch.tensor([0, 1, 0, 1, 0, 1])
    assert per_role_advantage(rewards, groups, rollouts, roles).tolist() == pytest.approx(
        collective_advantage(rewards, groups, rollouts, roles).tolist(), abs=1e-7)


# --- registry -----------------------------------------------------------------------------------

def test_every_estimator_handles_an_empty_batch():
    empty = (torch.zeros(0), torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long),
             torch.zeros(0, dtype=torch.long))
    for name in ("collective", "grpo", "rloo", "per_role"):
        assert get_advantage(name)(*empty).shape == (0,)


def test_registry():
    assert get_advantage("collective") is collective_advantage
    assert get_advantage("grpo") is grpo_advantage
    assert get_advantage("rloo") is rloo_advantage
    assert get_advantage("per_role") is per_role_advantage
    assert {"collective", "grpo", "rloo", "per_role"} <= set(ADVANTAGES.names())
    with pytest.raises(PluginError, match="unknown advantage estimator 'nope'.*collective"):
        get_advantage("nope")
