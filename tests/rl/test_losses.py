"""Policy losses: PPO-clip and PG values with per-token weights, clip fraction and masking, by hand."""

from __future__ import annotations

import math

import pytest
import torch

from swarmrl.registry import PluginError
from swarmrl.rl.aggregation import sequence_weights, token_weights
from swarmrl.rl.losses import LOSSES, get_loss, pg_loss, ppo_clip_loss

# One row, six tokens; ratios r = exp(logp - old_logp) chosen by hand, clip_eps = 0.2:
#   pos  ratio  adv  unclipped -A*r  clipped -A*clip(r)  max (pessimistic)
#   0    1.0    +1   -1.0            -1.0                -1.0
#   1    1.5    +1   -1.5            -1.2                -1.2   (clipped: no gradient)
#   2    1.5    -1   +1.5            +1.2                +1.5
#   3    0.5    +1   -0.5            -0.8                -0.5
#   4    0.5    -1   +0.5            +0.8                +0.8   (clipped: no gradient)
#   5    3.0    +5   masked out
RATIOS = [1.0, 1.5, 1.5, 0.5, 0.5, 3.0]
ADV = [1.0, 1.0, -1.0, 1.0, -1.0, 5.0]
MASK = [1, 1, 1, 1, 1, 0]


def inputs():
    old = torch.tensor([[-1.0, -2.0, -0.5, -1.5, -3.0, -2.0]])  # [1, 6]
    logp = (old + torch.log(torch.tensor([RATIOS]))).requires_grad_(True)  # [1, 6]
    return logp, old, torch.tensor([ADV]), torch.tensor([MASK], dtype=torch.float32)


def test_ppo_clip_loss_and_metrics_by_hand():
    logp, old, adv, mask = inputs()
    loss, m = ppo_clip_loss(logp, old, adv, mask / 5, clip_eps=0.2)
    # (-1.0 - 1.2 + 1.5 - 0.5 + 0.8) / 5 = -0.4 / 5
    assert loss.item() == pytest.approx(-0.08, abs=1e-6)
    # the clip removes the gradient at positions 1 (r > 1.2, A > 0) and 4 (r < 0.8, A < 0) only;
    # 2 and 3 are outside the range too, but on the side where the unclipped branch is kept
    assert m["clip_frac"].item() == pytest.approx(2 / 5)
    assert m["ratio_mean"].item() == pytest.approx((1 + 1.5 + 1.5 + 0.5 + 0.5) / 5, abs=1e-6)
    kl = 2 * (0.5 - math.log(1.5)) + 2 * (-0.5 - math.log(0.5))  # sum of (r - 1) - log r
    assert m["approx_kl"].item() == pytest.approx(kl / 5, abs=1e-6)
    loss.backward()
    # d/dlogp of -A*r is -A*r where the unclipped branch is taken, 0 where clipped or masked
    assert logp.grad[0].tolist() == pytest.approx([-1.0 / 5, 0.0, 1.5 / 5, -0.5 / 5, 0.0, 0.0], abs=1e-6)


def test_loss_is_the_weighted_sum_and_metrics_ignore_the_weights_values():
    logp, old, adv, mask = inputs()
    # per-token weights (0.1, 0.2, 0.3, 0.4, 0.5, 0): (-1*0.1 - 1.2*0.2 + 1.5*0.3 - 0.5*0.4 + 0.8*0.5)
    w = torch.tensor([[0.1, 0.2, 0.3, 0.4, 0.5, 0.0]])
    loss, m = ppo_clip_loss(logp, old, adv, w, clip_eps=0.2)
    assert loss.item() == pytest.approx(-0.1 - 0.24 + 0.45 - 0.2 + 0.4, abs=1e-6)  # 0.31
    # metrics stay plain token means over weight > 0
    assert m["clip_frac"].item() == pytest.approx(2 / 5)
    assert m["ratio_mean"].item() == pytest.approx(1.0, abs=1e-6)
    loss.backward()
    assert logp.grad[0].tolist() == pytest.approx([-0.1, 0.0, 1.5 * 0.3, -0.5 * 0.4, 0.0, 0.0], abs=1e-6)


def test_token_mean_weights_reproduce_the_old_minibatch_token_mean():
    # Old API: loss = sum(per_token * mask) / num_tokens over the minibatch, micro-batch by micro-batch.
    g = torch.Generator().manual_seed(3)
    old = -torch.rand(4, 7, generator=g) * 3  # [4, 7]
    logp = old + 0.3 * torch.randn(4, 7, generator=g)  # [4, 7]
    adv = torch.randn(4, 1, generator=g).expand(4, 7)  # [4, 7] flat per sequence
    mask = (torch.rand(4, 7, generator=g) > 0.3).float()  # [4, 7]
    num_tokens = mask.sum()
    ratio = torch.exp(logp - old)
    per_token = torch.maximum(-adv * ratio, -adv * ratio.clamp(0.8, 1.2))
    old_loss = (per_token * mask).sum() / num_tokens
    w = token_weights(mask, sequence_weights(mask.sum(1), torch.tensor([0, 1, 1, 2]), "token_mean"))  # [4, 7]
    # the same minibatch split into two micro-batches, losses summed
    l1, _ = ppo_clip_loss(logp[:2], old[:2], adv[:2], w[:2])
    l2, _ = ppo_clip_loss(logp[2:], old[2:], adv[2:], w[2:])
    assert (l1 + l2).item() == pytest.approx(old_loss.item(), rel=1e-6)
    pg_old = (-adv * logp * mask).sum() / num_tokens
    assert pg_loss(logp, old, adv, w)[0].item() == pytest.approx(pg_old.item(), rel=1e-6)


def test_clip_frac_counts_only_tokens_whose_gradient_the_clip_removes():
    # eps 0.2, every token generated:
    #   pos  ratio  adv   outside [0.8, 1.2]  clip removes the gradient
    #   0    1.3    +1    yes                 yes  (r > 1.2, A > 0)
    #   1    1.3    -1    yes                 no   (-A r = 1.3 > -A clip(r) = 1.2: unclipped kept)
    #   2    0.7    +1    yes                 no
    #   3    0.7    -1    yes                 yes  (r < 0.8, A < 0)
    #   4    1.1    +1    no                  no
    #   5    1.3     0    yes                 no   (no advantage, nothing to remove)
    old = torch.tensor([[-1.0, -0.4, -2.0, -0.9, -1.5, -0.3]])  # [1, 6]
    logp = (old + torch.log(torch.tensor([[1.3, 1.3, 0.7, 0.7, 1.1, 1.3]]))).requires_grad_(True)
    adv = torch.tensor([[1.0, -1.0, 1.0, -1.0, 1.0, 0.0]])
    loss, m = ppo_clip_loss(logp, old, adv, torch.ones(1, 6) / 6, clip_eps=0.2)
    assert m["clip_frac"].item() == pytest.approx(2 / 6)  # counting |r - 1| > eps would say 5 / 6
    loss.backward()
    removed = [g == 0.0 and a != 0.0 for g, a in zip(logp.grad[0].tolist(), adv[0].tolist())]
    assert removed == [True, False, False, True, False, False]  # the same tokens, by the gradient
    assert pg_loss(logp, old, adv, torch.ones(1, 6) / 6)[1]["clip_frac"].item() == 0.0
    assert ppo_clip_loss.clips and not pg_loss.clips


def test_ppo_clip_with_a_wider_clip_range():
    logp, old, adv, mask = inputs()
    # eps = 0.6: nothing is clipped: (-1 - 1.5 + 1.5 - 0.5 + 0.5) / 5
    loss, m = ppo_clip_loss(logp, old, adv, mask / 5, clip_eps=0.6)
    assert loss.item() == pytest.approx(-1.0 / 5, abs=1e-6)
    assert m["clip_frac"].item() == 0.0


def test_zero_weight_positions_do_not_affect_the_loss_or_get_gradient():
    logp, old, adv, mask = inputs()
    _, base_m = ppo_clip_loss(logp, old, adv, mask / 5)
    for fn in (ppo_clip_loss, pg_loss):
        ref, _ = fn(logp, old, adv, mask / 5)
        logp2 = logp.detach().clone()
        logp2[0, 5] = -7.0
        logp2.requires_grad_(True)
        old2, adv2 = old.clone(), adv.clone()
        old2[0, 5], adv2[0, 5] = -4.0, -123.0
        loss, m = fn(logp2, old2, adv2, mask / 5)
        assert loss.item() == pytest.approx(ref.item(), abs=1e-7)
        assert m["ratio_mean"].item() == pytest.approx(base_m["ratio_mean"].item())
        loss.backward()
        assert logp2.grad[0, 5].item() == 0.0
    _, m2 = ppo_clip_loss(logp, old, adv, torch.tensor([[1, 1, 1, 1, 1, 0]]))  # int weights work too
    assert m2["clip_frac"].item() == base_m["clip_frac"].item()


def test_pg_loss_by_hand():
    logp = torch.tensor([[-0.5, -2.0, -1.0], [-0.1, -3.0, -9.0]], requires_grad=True)  # [2, 3]
    old = torch.zeros(2, 3)
    adv = torch.tensor([[2.0, 2.0, 2.0], [-1.0, -1.0, -1.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    loss, m = pg_loss(logp, old, adv, mask / 4)
    # -(2*-0.5 + 2*-2.0 + -1*-0.1 + -1*-3.0) / 4 = -(-1 - 4 + 0.1 + 3) / 4 = 0.475
    assert loss.item() == pytest.approx(0.475, abs=1e-6)
    assert m["clip_frac"].item() == 0.0
    # ratio exp(logp - 0) over the 4 tokens: (e^-0.5 + e^-2 + e^-0.1 + e^-3) / 4
    assert m["ratio_mean"].item() == pytest.approx(
        (math.exp(-0.5) + math.exp(-2) + math.exp(-0.1) + math.exp(-3)) / 4, rel=1e-6)
    loss.backward()
    assert logp.grad.flatten().tolist() == pytest.approx([-0.5, -0.5, 0.0, 0.25, 0.25, 0.0])


def test_pg_with_sequence_mean_weights_by_hand():
    # seq_mean: row 0 has 2 tokens -> w = 1/(2*2); row 1 has 1 token -> w = 1/(2*1)
    logp = torch.tensor([[-1.0, -2.0], [-4.0, 0.0]], requires_grad=True)  # [2, 2]
    adv = torch.tensor([[1.0, 1.0], [1.0, 1.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    w = token_weights(mask, sequence_weights(mask.sum(1), torch.tensor([0, 0]), "seq_mean"))
    loss, _ = pg_loss(logp, torch.zeros(2, 2), adv, w)
    # -( (-1 - 2) / 4 + (-4) / 2 ) = 0.75 + 2 = 2.75
    assert loss.item() == pytest.approx(2.75)


def test_ppo_and_pg_have_the_same_gradient_on_policy():
    # With one update per batch the ratio is 1, so PPO-clip is the plain policy gradient.
    logp = torch.tensor([[-0.3, -1.2, -2.0, -0.7]], requires_grad=True)
    adv = torch.tensor([[0.5, 0.5, -1.5, -1.5]])
    w = torch.tensor([[1.0, 1.0, 1.0, 0.0]]) / 3
    ppo, m = ppo_clip_loss(logp, logp.detach(), adv, w)
    assert m["ratio_mean"].item() == 1.0 and m["clip_frac"].item() == 0.0 and m["approx_kl"].item() == 0.0
    (g_ppo,) = torch.autograd.grad(ppo, logp)
    pg, _ = pg_loss(logp, logp.detach(), adv, w)
    (g_pg,) = torch.autograd.grad(pg, logp)
    assert g_ppo[0].tolist() == pytest.approx(g_pg[0].tolist())
    assert g_pg[0].tolist() == pytest.approx([-0.5 / 3, -0.5 / 3, 1.5 / 3, 0.0])


def test_all_zero_weights_give_zero_loss_and_finite_metrics():
    logp, old, adv, _ = inputs()
    for fn in (ppo_clip_loss, pg_loss):
        loss, m = fn(logp, old, adv, torch.zeros(1, 6))
        assert loss.item() == 0.0
        assert all(math.isfinite(v.item()) and v.item() == 0.0 for v in m.values())


def test_old_positional_call_fails_loudly():
    logp, old, adv, mask = inputs()
    for fn in (ppo_clip_loss, pg_loss):
        with pytest.raises(TypeError):
            fn(logp, old, adv, mask, 5)  # the old (mask, num_tokens) call


def test_registry():
    assert get_loss("ppo_clip") is ppo_clip_loss and get_loss("pg") is pg_loss
    assert {"ppo_clip", "pg"} <= set(LOSSES.names())
    with pytest.raises(PluginError, match="unknown policy loss 'nope'.*pg.*ppo_clip"):
        get_loss("nope")
