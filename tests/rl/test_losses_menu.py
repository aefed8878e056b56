"""The GRPO-family clipping options of `ppo_clip` (asymmetric and dual clip) and the Dr. GRPO
aggregation, on constructed inputs with hand-computed numbers.

Formulas matched: verl 0.8.0.dev (commit b178a3c, 2026-01) `compute_policy_loss_vanilla`
(clip_ratio_low / clip_ratio_high / clip_ratio_c; pg_clipfrac, pg_clipfrac_lower) and
`agg_loss(..., "seq-mean-token-sum-norm", loss_scale_factor=L)`; TRL 1.10.0.dev0 GRPOTrainer
`_compute_loss` (epsilon / epsilon_high, loss_type="dr_grpo": sum / (B * max_completion_length)).
"""

from __future__ import annotations

import math

import pytest
import torch

from swarmrl.config import RLConfig
from swarmrl.registry import PluginError
from swarmrl.rl.aggregation import DR_GRPO_TOKENS, sequence_weights, token_weights
from swarmrl.rl.losses import clip_removes_gradient, make_loss, ppo_clip_loss

# Six tokens of one sequence: ratio r and advantage A chosen so that each lands in one branch.
RATIOS = [1.25, 1.35, 0.7, 4.0, 2.0, 0.5]
ADVS = [1.0, 1.0, -1.0, -1.0, -2.0, 2.0]


def inputs():
    old = torch.zeros(1, 6)
    logp = torch.tensor([[math.log(r) for r in RATIOS]], requires_grad=True)  # ratio = exp(logp - 0)
    return logp, old, torch.tensor([ADVS]), torch.ones(1, 6)


def test_symmetric_clip_by_hand_is_unchanged():
    logp, old, adv, w = inputs()
    loss, m = ppo_clip_loss(logp, old, adv, w, clip_eps=0.2)
    # per token max(-A r, -A clip(r, 0.8, 1.2)):
    #   -1.2 (clip), -1.2 (clip), 0.8 (clip), 4.0, 4.0, -1.0 (r below range, A > 0: unclipped) = 5.4
    assert loss.item() == pytest.approx(5.4, abs=1e-6)
    assert m["clip_frac"].item() == pytest.approx(3 / 6)
    assert "dual_clip_frac" not in m


def test_clip_higher_and_dual_clip_by_hand():
    logp, old, adv, w = inputs()
    loss, m = ppo_clip_loss(logp, old, adv, w, clip_eps=0.2, clip_eps_high=0.28, dual_clip=3.0)
    # range [0.8, 1.28]; dual clip c = 3 caps A < 0 tokens at -A c:
    #   t1 r 1.25 inside now: -1.25        t2 r 1.35 > 1.28, A > 0: -1.28
    #   t3 r 0.7 < 0.8, A < 0: 0.8         t4 A = -1, r 4 > 3: min(4.0, 3.0) = 3.0
    #   t5 A = -2, r 2 < 3: min(4.0, 6.0) = 4.0      t6: -1.0          sum = 4.27
    assert loss.item() == pytest.approx(4.27, abs=1e-6)
    loss.backward()
    # d/dlogp of -A r is -A r where the branch is live, 0 where clipped (flat)
    assert logp.grad[0].tolist() == pytest.approx([-1.25, 0.0, 0.0, 0.0, 4.0, -1.0], abs=1e-6)
    # clipped: t2 (high), t3 (low), t4 (dual) -> 3/6; verl's pg_clipfrac_lower counts t4 alone
    assert m["clip_frac"].item() == pytest.approx(3 / 6)
    assert m["dual_clip_frac"].item() == pytest.approx(1 / 6)


def test_clip_removes_gradient_asymmetric_and_dual():
    ratio, adv = torch.tensor([RATIOS]), torch.tensor([ADVS])
    assert clip_removes_gradient(ratio, adv, 0.2)[0].tolist() == [True, True, True, False, False, False]
    assert clip_removes_gradient(ratio, adv, 0.2, 0.28, 3.0)[0].tolist() == [False, True, True, True, False, False]


def test_make_loss_binds_the_options_and_keeps_defaults_identical():
    assert make_loss(RLConfig()) is ppo_clip_loss  # defaults: the very same function, same numbers
    bound = make_loss(RLConfig(clip_eps_high=0.28, dual_clip=3.0))
    assert bound.clips is True
    logp, old, adv, w = inputs()
    assert bound(logp, old, adv, w, clip_eps=0.2)[0].item() == pytest.approx(4.27, abs=1e-6)
    with pytest.raises(PluginError, match="rl.dual_clip"):
        make_loss(RLConfig(loss="pg", dual_clip=3.0))


def test_dr_grpo_weights_match_trl_and_verl_by_hand():
    # two sequences with 3 and 5 generated tokens, per-token losses (1, 2, 3) and (1, 1, 1, 1, 1)
    w = sequence_weights(torch.tensor([3, 5]), torch.tensor([0, 1]), "dr_grpo")  # [2]
    assert DR_GRPO_TOKENS == 1024
    assert w.tolist() == [1 / 2048, 1 / 2048]  # 1 / (S * L), whatever each sequence's length
    per_token = torch.tensor([[1.0, 2.0, 3.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0]])  # [2, 5]
    mask = torch.tensor([[1.0, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    loss = (per_token * token_weights(mask, w)).sum().item()
    # TRL dr_grpo: (sum of masked token losses) / (B * max_completion_length) = 11 / (2 * 1024)
    assert loss == pytest.approx(11 / 2048, rel=1e-7)
    # verl seq-mean-token-sum-norm with loss_scale_factor = L divides by L only: 11 / 1024,
    # the same direction; swarmrl follows TRL's per-batch scale (B = sequences with tokens).
    assert loss * 2 == pytest.approx(11 / 1024, rel=1e-7)
    # a sequence without generated tokens gets weight 0 and is not counted in S
    assert sequence_weights(torch.tensor([3, 0]), torch.tensor([0, 0]), "dr_grpo").tolist() == [1 / 1024, 0.0]
