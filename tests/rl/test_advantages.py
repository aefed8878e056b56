"""Advantage estimators: the collective (group-normalised) advantage, by hand."""

from __future__ import annotations

import math

import pytest
import torch

from swarmrl.rl.advantages import ADVANTAGES, collective_advantage, get_advantage


def test_collective_advantage_by_hand():
    scores = torch.tensor([1.0, 0.0, 0.5, 0.5, 1.0, 1.0])
    groups = torch.tensor([0, 0, 0, 0, 1, 1])
    adv = collective_advantage(scores, groups)
    # group 0: mean 0.5, deviations (0.5, -0.5, 0, 0);
    # Bessel variance (0.25 + 0.25) / (4 - 1) = 1/6, std = 0.4082483
    std = math.sqrt(1 / 6)
    expected = [0.5 / (std + 1e-6), -0.5 / (std + 1e-6), 0.0, 0.0, 0.0, 0.0]
    assert adv.tolist() == pytest.approx(expected, rel=1e-6, abs=1e-7)
    assert adv[0].item() == pytest.approx(1.2247419, rel=1e-6)
    # group 1 scored the same everywhere: exactly zero, not a division blow-up
    assert adv[4].item() == 0.0 and adv[5].item() == 0.0
    assert adv.shape == scores.shape


def test_constant_group_and_singleton_group_get_zero():
    adv = collective_advantage(torch.tensor([0.25, 0.25, 0.25, 0.75]), torch.tensor([0, 0, 0, 1]))
    assert adv.tolist() == [0.0, 0.0, 0.0, 0.0]
    assert torch.isfinite(adv).all()


def test_groups_need_not_be_contiguous_or_sorted():
    scores = torch.tensor([0.0, 1.0, 1.0, 0.0, 0.5])
    groups = torch.tensor([7, 3, 7, 3, 7])
    adv = collective_advantage(scores, groups)
    # group 7: (0, 1, 0.5): mean 0.5, Bessel std sqrt((0.25+0.25+0)/2) = 0.5
    # group 3: (1, 0):      mean 0.5, Bessel std sqrt(0.5) = 0.7071068
    g3 = 0.5 / (math.sqrt(0.5) + 1e-6)
    expected = [-0.5 / 0.500001, g3, 0.5 / 0.500001, -g3, 0.0]
    assert adv.tolist() == pytest.approx(expected, rel=1e-6, abs=1e-7)


def test_advantage_is_invariant_to_shifting_scores_within_a_group():
    s = torch.tensor([0.0, 0.25, 1.0, 0.5])
    g = torch.zeros(4, dtype=torch.long)
    assert collective_advantage(s + 3.0, g).tolist() == pytest.approx(collective_advantage(s, g).tolist(), abs=1e-5)
    assert collective_advantage(s, g).sum().item() == pytest.approx(0.0, abs=1e-6)


def test_registry():
    assert get_advantage("collective") is collective_advantage
    assert "collective" in ADVANTAGES
    with pytest.raises(KeyError, match="unknown advantage estimator 'nope'.*collective"):
        get_advantage("nope")
