"""Policy losses: PPO-clip and PG values, clip fraction and masking, checked by hand."""

from __future__ import annotations

import math

import pytest
import torch

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
    loss, m = ppo_clip_loss(logp, old, adv, mask, num_tokens=5, clip_eps=0.2)
    # (-1.0 - 1.2 + 1.5 - 0.5 + 0.8) / 5 = -0.4 / 5
    assert loss.item() == pytest.approx(-0.08, abs=1e-6)
    assert m["clip_frac"].item() == pytest.approx(4 / 5)  # |r - 1| > 0.2 at positions 1-4
    assert m["ratio_mean"].item() == pytest.approx((1 + 1.5 + 1.5 + 0.5 + 0.5) / 5, abs=1e-6)
    kl = 2 * (0.5 - math.log(1.5)) + 2 * (-0.5 - math.log(0.5))  # sum of (r - 1) - log r
    assert m["approx_kl"].item() == pytest.approx(kl / 5, abs=1e-6)
    loss.backward()
    # d/dlogp of -A*r is -A*r where the unclipped branch is taken, 0 where clipped or masked
    assert logp.grad[0].tolist() == pytest.approx([-1.0 / 5, 0.0, 1.5 / 5, -0.5 / 5, 0.0, 0.0], abs=1e-6)


def test_ppo_clip_divides_by_the_minibatch_token_count():
    logp, old, adv, mask = inputs()
    loss10, _ = ppo_clip_loss(logp, old, adv, mask, num_tokens=10, clip_eps=0.2)
    assert loss10.item() == pytest.approx(-0.04, abs=1e-6)


def test_ppo_clip_with_a_wider_clip_range():
    logp, old, adv, mask = inputs()
    # eps = 0.6: nothing is clipped: (-1 - 1.5 + 1.5 - 0.5 + 0.5) / 5
    loss, m = ppo_clip_loss(logp, old, adv, mask, num_tokens=5, clip_eps=0.6)
    assert loss.item() == pytest.approx(-1.0 / 5, abs=1e-6)
    assert m["clip_frac"].item() == 0.0


def test_masked_positions_do_not_affect_the_loss_or_get_gradient():
    logp, old, adv, mask = inputs()
    base, base_m = ppo_clip_loss(logp, old, adv, mask, num_tokens=5)
    for fn in (ppo_clip_loss, pg_loss):
        ref, _ = fn(logp, old, adv, mask, num_tokens=5)
        logp2 = logp.detach().clone()
        logp2[0, 5] = -7.0
        logp2.requires_grad_(True)
        old2, adv2 = old.clone(), adv.clone()
        old2[0, 5], adv2[0, 5] = -4.0, -123.0
        loss, _ = fn(logp2, old2, adv2, mask, num_tokens=5)
        assert loss.item() == pytest.approx(ref.item(), abs=1e-7)
        loss.backward()
        assert logp2.grad[0, 5].item() == 0.0
    _, m2 = ppo_clip_loss(logp, old, adv, torch.tensor([[1, 1, 1, 1, 1, 0]]), num_tokens=5)  # int mask works too
    assert m2["clip_frac"].item() == base_m["clip_frac"].item()


def test_pg_loss_by_hand():
    logp = torch.tensor([[-0.5, -2.0, -1.0], [-0.1, -3.0, -9.0]], requires_grad=True)  # [2, 3]
    old = torch.zeros(2, 3)
    adv = torch.tensor([[2.0, 2.0, 2.0], [-1.0, -1.0, -1.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    loss, m = pg_loss(logp, old, adv, mask, num_tokens=4)
    # -(2*-0.5 + 2*-2.0 + -1*-0.1 + -1*-3.0) / 4 = -(-1 - 4 + 0.1 + 3) / 4 = 0.475
    assert loss.item() == pytest.approx(0.475, abs=1e-6)
    assert m["clip_frac"].item() == 0.0
    loss.backward()
    assert logp.grad.flatten().tolist() == pytest.approx([-0.5, -0.5, 0.0, 0.25, 0.25, 0.0])


def test_ppo_and_pg_have_the_same_gradient_on_policy():
    # With one update per batch the ratio is 1, so PPO-clip is the plain policy gradient.
    logp = torch.tensor([[-0.3, -1.2, -2.0, -0.7]], requires_grad=True)
    adv = torch.tensor([[0.5, 0.5, -1.5, -1.5]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    ppo, m = ppo_clip_loss(logp, logp.detach(), adv, mask, num_tokens=3)
    assert m["ratio_mean"].item() == 1.0 and m["clip_frac"].item() == 0.0 and m["approx_kl"].item() == 0.0
    (g_ppo,) = torch.autograd.grad(ppo, logp)
    pg, _ = pg_loss(logp, logp.detach(), adv, mask, num_tokens=3)
    (g_pg,) = torch.autograd.grad(pg, logp)
    assert g_ppo[0].tolist() == pytest.approx(g_pg[0].tolist())
    assert g_pg[0].tolist() == pytest.approx([-0.5 / 3, -0.5 / 3, 1.5 / 3, 0.0])


def test_registry():
    assert get_loss("ppo_clip") is ppo_clip_loss and get_loss("pg") is pg_loss
    assert {"ppo_clip", "pg"} <= set(LOSSES)
    with pytest.raises(KeyError, match="unknown policy loss 'nope'"):
        get_loss("nope")
