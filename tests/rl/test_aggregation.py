"""Loss aggregation: per-sequence weights by hand, the gradient-mass mechanism on a real gradient,
and the step metrics through the Updater (plain token means under every mode)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from swarmrl.config import ModelConfig, RLConfig
from swarmrl.policy.model import build_tiny_policy
from swarmrl.policy.sharing import PolicySet
from swarmrl.registry import PluginError
from swarmrl.rl.aggregation import sequence_weights, token_weights
from swarmrl.rl.batch import TrainSeq, token_logprobs
from swarmrl.rl.losses import get_loss, ppo_clip_loss
from swarmrl.rl.update import Updater

# Four sequences: role 0 (a "generator") writes 6 and 2 tokens, role 1 writes 4, role 2 writes 0.
COUNTS = torch.tensor([6, 2, 4, 0])
ROLES = torch.tensor([0, 0, 1, 2])
BUILTIN_MODES = ("token_mean", "seq_mean", "role_balanced")


def test_token_mean_by_hand():
    w = sequence_weights(COUNTS, ROLES, "token_mean")
    assert w.tolist() == pytest.approx([1 / 12, 1 / 12, 1 / 12, 0.0])


def test_seq_mean_by_hand():
    # S = 3 sequences with tokens: 1/(3*6), 1/(3*2), 1/(3*4); the empty one gets 0 and does not count
    w = sequence_weights(COUNTS, ROLES, "seq_mean")
    assert w.tolist() == pytest.approx([1 / 18, 1 / 6, 1 / 12, 0.0])


def test_role_balanced_by_hand():
    # R = 2 roles with tokens (role 2 has none); role 0 has 8 tokens, role 1 has 4:
    # 1/(2*8), 1/(2*8), 1/(2*4), 0
    w = sequence_weights(COUNTS, ROLES, "role_balanced")
    assert w.tolist() == pytest.approx([1 / 16, 1 / 16, 1 / 8, 0.0])


@pytest.mark.parametrize("mode", BUILTIN_MODES)
def test_every_mode_has_total_mass_one_and_no_nan(mode):
    w = sequence_weights(COUNTS, ROLES, mode)
    assert torch.isfinite(w).all()
    assert (w * COUNTS).sum().item() == pytest.approx(1.0)


def test_role_balanced_gives_each_role_equal_mass():
    w = sequence_weights(COUNTS, ROLES, "role_balanced")
    mass = [float((w * COUNTS)[ROLES == r].sum()) for r in (0, 1)]
    assert mass == pytest.approx([0.5, 0.5])


def test_multiplicity_divides_the_weight():
    # role 0 has multiplicity 2 (two generators), the others 1
    mult = torch.tensor([2, 2, 1, 1])
    w = sequence_weights(COUNTS, ROLES, "role_balanced", multiplicity=mult)
    assert w.tolist() == pytest.approx([1 / 32, 1 / 32, 1 / 8, 0.0])
    w = sequence_weights(COUNTS, ROLES, "token_mean", multiplicity=mult)
    assert w.tolist() == pytest.approx([1 / 24, 1 / 24, 1 / 12, 0.0])
    with pytest.raises(ValueError, match=">= 1"):
        sequence_weights(COUNTS, ROLES, "token_mean", multiplicity=torch.tensor([0, 1, 1, 1]))
    with pytest.raises(ValueError, match="shape"):
        sequence_weights(COUNTS, ROLES, "token_mean", multiplicity=torch.tensor([1, 1]))


def test_all_empty_and_no_sequences():
    for mode in BUILTIN_MODES:
        assert sequence_weights(torch.tensor([0, 0]), torch.tensor([0, 1]), mode).tolist() == [0.0, 0.0]
        assert sequence_weights(torch.zeros(0), torch.zeros(0, dtype=torch.long), mode).shape == (0,)


def test_unknown_mode_is_an_error_listing_the_valid_ones():
    with pytest.raises(PluginError, match="unknown loss aggregation 'nope'.*role_balanced.*seq_mean.*token_mean"):
        sequence_weights(COUNTS, ROLES, "nope")


def test_token_weights_by_hand():
    mask = torch.tensor([[0, 1, 1], [1, 0, 0]])
    assert token_weights(mask, torch.tensor([0.5, 2.0])).tolist() == [[0.0, 0.5, 0.5], [2.0, 0.0, 0.0]]


# --- the mechanism (Zeng et al. 2026, role capture): gradient mass on an actual gradient ------------

def _role_gradient_norms(mode: str, multiplicity: torch.Tensor | None = None) -> tuple[float, float]:
    """A linear "policy" over an 8-token vocabulary. Role 0 writes a 5-token pattern 10 times
    (50 tokens), role 1 writes the same pattern once; both get advantage +1. Returns the norm
    of each role's gradient contribution through ppo_clip with the mode's weights."""
    torch.manual_seed(0)
    policy = torch.nn.Linear(4, 8)
    feats = torch.randn(5, 4)  # [5, 4] the contexts of the pattern
    targets = torch.tensor([1, 5, 2, 7, 0])  # [5] the tokens it emits
    long_x, long_y = feats.repeat(10, 1), targets.repeat(10)  # [50, 4], [50]
    x = torch.zeros(2, 50, 4)  # [B=2, T=50, 4]
    y = torch.zeros(2, 50, dtype=torch.long)  # [2, 50]
    mask = torch.zeros(2, 50)  # [2, 50]
    x[0], y[0], mask[0] = long_x, long_y, 1.0
    x[1, :5], y[1, :5], mask[1, :5] = feats, targets, 1.0
    w_seq = sequence_weights(mask.sum(1), torch.tensor([0, 1]), mode, multiplicity)  # [2]
    norms = []
    for role in (0, 1):
        policy.zero_grad()
        logp = torch.log_softmax(policy(x), -1).gather(-1, y[..., None]).squeeze(-1)  # [2, 50]
        only = torch.zeros(2, 1)
        only[role] = 1.0  # this role's rows only
        weights = token_weights(mask, w_seq) * only  # [2, 50]
        loss, _ = ppo_clip_loss(logp, logp.detach(), torch.ones(2, 50), weights)
        loss.backward()
        norms.append(float(torch.cat([p.grad.flatten() for p in policy.parameters()]).norm()))
    return norms[0], norms[1]


def test_token_mean_gives_the_verbose_role_ten_times_the_gradient():
    long_role, short_role = _role_gradient_norms("token_mean")
    assert short_role > 0
    assert long_role / short_role == pytest.approx(10.0, rel=1e-4)


def test_role_balanced_gives_both_roles_the_same_gradient():
    long_role, short_role = _role_gradient_norms("role_balanced")
    assert long_role / short_role == pytest.approx(1.0, rel=1e-4)


def test_seq_mean_also_equalises_one_sequence_per_role():
    long_role, short_role = _role_gradient_norms("seq_mean")
    assert long_role / short_role == pytest.approx(1.0, rel=1e-4)


def test_multiplicity_scales_a_roles_gradient_down():
    # the 50-token role declared as 10 agents under token_mean: 10x the tokens, 1/10 the weight
    long_role, short_role = _role_gradient_norms("token_mean", multiplicity=torch.tensor([10, 1]))
    assert long_role / short_role == pytest.approx(1.0, rel=1e-4)


# --- the step's metrics through the real Updater: plain token means in every mode --------------
#
# Three sequences (4 prompt tokens each), old log-probs set so that the ratios are exactly:
#   seq  role  mult  adv  ratios                 per-token -min(A r, A clip(r)), eps 0.2
#   A    gen   2     +1   1.5, 1.0               -1.2, -1.0              (1.5 clipped)
#   B    gen   2     -1   0.5, 1.5, 1.0, 1.0     +0.8, +1.5, +1.0, +1.0  (0.5 clipped)
#   C    agg   1     +1   1.0, 0.5, 1.5          -1.0, -0.5, -1.2        (1.5 clipped)
# 9 tokens: ratio_mean 9.5 / 9, clip_frac 3 / 9 (|r - 1| > eps would say 5 / 9),
# approx_kl = (3 (0.5 - ln 1.5) + 2 (ln 2 - 0.5)) / 9. Per-sequence loss sums -2.2, 4.3, -2.7.
RATIOS = {"A": [1.5, 1.0], "B": [0.5, 1.5, 1.0, 1.0], "C": [1.0, 0.5, 1.5]}
SEQ_ROLE = {"A": ("gen", 2, 1.0), "B": ("gen", 2, -1.0), "C": ("agg", 1, 1.0)}
KL_BY_HAND = (3 * (0.5 - math.log(1.5)) + 2 * (math.log(2.0) - 0.5)) / 9
# the minibatch objective sum_s w_s sum_t loss[s, t], by mode and multiplicity_normalized:
#   token_mean     w = 1/9:                 -0.6 / 9               mult (A, B halved): -1.65 / 9
#   seq_mean       w = 1/(3 n_s):           (-1.1 + 1.075 - 0.9) / 3      mult: (-0.55 + 0.5375 - 0.9) / 3
#   role_balanced  gen 1/(2*6), agg 1/(2*3): 2.1 / 12 - 2.7 / 6           mult: 1.05 / 12 - 2.7 / 6
LOSS_BY_HAND = {("token_mean", False): -0.6 / 9, ("token_mean", True): -1.65 / 9,
                ("seq_mean", False): -0.925 / 3, ("seq_mean", True): -0.9125 / 3,
                ("role_balanced", False): 2.1 / 12 - 2.7 / 6, ("role_balanced", True): 1.05 / 12 - 2.7 / 6}


def _updater_seqs(policy, ratios):
    seqs = []
    for k, (name, rs) in enumerate(ratios.items()):
        role, mult, adv = SEQ_ROLE[name]
        ids = [5 + k, 6, 7, 8] + [(20 + 7 * k + 3 * i) % 200 + 10 for i in range(len(rs))]
        t = torch.tensor([ids])
        with torch.no_grad():
            logp, _ = token_logprobs(policy.model, t, torch.ones_like(t), with_entropy=False)  # [1, L]
        old = logp[0].tolist()[:4] + [lp - math.log(r) for lp, r in zip(logp[0, 4:].tolist(), rs)]
        seqs.append(TrainSeq(ids=ids, gen_mask=[0] * 4 + [1] * len(rs), old_logp=old, advantage=adv, role=role,
                             rollout=0, multiplicity=mult))
    return seqs


def _update(policy, seqs, sharing="shared", loss="ppo_clip", **rl):
    # lr 0: every minibatch sees the initial weights, so the ratios stay the ones set above;
    # 16-token micro-batches split the three sequences in two.
    cfg = dataclasses.replace(RLConfig(), loss=loss, lr=0.0, weight_decay=0.0, clip_eps=0.2,
                              micro_batch_tokens=16, **rl)
    ps = PolicySet(policy, sharing, ["agg", "gen"], lora_rank=4)
    return Updater(cfg, ps, get_loss(loss), policy.pad_id, seed=0).update(seqs, step=0, measure_roles=False)


TINY = ModelConfig(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)


@pytest.fixture(scope="module")
def tiny():
    return build_tiny_policy(TINY)


@pytest.mark.parametrize("minibatches", [1, 2])
@pytest.mark.parametrize("mult", [False, True])
@pytest.mark.parametrize("mode", BUILTIN_MODES)
def test_step_metrics_are_token_means_in_every_mode(tiny, mode, mult, minibatches):
    out = _update(tiny, _updater_seqs(tiny, RATIOS), aggregation=mode, multiplicity_normalized=mult,
                  minibatches_per_step=minibatches)
    assert out["ratio_mean"] == pytest.approx(9.5 / 9, abs=1e-5)
    assert out["clip_frac"] == pytest.approx(3 / 9, abs=1e-6)
    assert out["approx_kl"] == pytest.approx(KL_BY_HAND, abs=1e-5)
    if minibatches == 1:  # `loss` is the weighted objective itself (its scale is the aggregation's)
        assert out["loss"] == pytest.approx(LOSS_BY_HAND[(mode, mult)], abs=1e-5)
    on = _update(tiny, _updater_seqs(tiny, {k: [1.0] * len(v) for k, v in RATIOS.items()}), aggregation=mode,
                 multiplicity_normalized=mult, minibatches_per_step=minibatches)
    assert on["ratio_mean"] == pytest.approx(1.0, abs=1e-6)
    assert on["clip_frac"] == 0.0 and on["approx_kl"] == pytest.approx(0.0, abs=1e-6)


def test_step_metrics_pool_over_slots():
    """Isolated adapters (two slots, each its own forward): still one token mean over both."""
    policy = build_tiny_policy(TINY)
    seqs = _updater_seqs(policy, RATIOS)  # fresh LoRA adapters leave the base model's log-probs unchanged
    out = _update(policy, seqs, sharing="isolated", aggregation="role_balanced", multiplicity_normalized=True)
    assert out["ratio_mean"] == pytest.approx(9.5 / 9, abs=1e-5)
    assert out["clip_frac"] == pytest.approx(3 / 9, abs=1e-6)
    assert out["approx_kl"] == pytest.approx(KL_BY_HAND, abs=1e-5)


def test_a_loss_that_does_not_clip_reports_no_clipped_tokens_overall_or_per_role(tiny):
    out = _update(tiny, _updater_seqs(tiny, RATIOS), loss="pg")
    assert out["clip_frac"] == 0.0 and out["role/gen/clip_frac"] == 0.0 and out["role/agg/clip_frac"] == 0.0
    assert out["ratio_mean"] == pytest.approx(9.5 / 9, abs=1e-5)
    clipping = _update(tiny, _updater_seqs(tiny, RATIOS))  # per role, ppo_clip: gen 2 of 6, agg 1 of 3
    assert clipping["role/gen/clip_frac"] == pytest.approx(2 / 6)
    assert clipping["role/agg/clip_frac"] == pytest.approx(1 / 3)


@pytest.mark.parametrize("minibatches", [1, 2, 3])
def test_per_role_ratio_and_clip_pool_every_minibatch(tiny, minibatches):
    # gen (A, B): ratios 1.5 1.0 0.5 1.5 1.0 1.0 -> 6.5 / 6, clipped 2 of 6; agg (C): 3 / 3, 1 of 3.
    # Minibatch 0 alone would hold only some of the sequences.
    out = _update(tiny, _updater_seqs(tiny, RATIOS), aggregation="token_mean", minibatches_per_step=minibatches)
    assert out["role/gen/ratio_mean"] == pytest.approx(6.5 / 6, abs=1e-5)
    assert out["role/agg/ratio_mean"] == pytest.approx(1.0, abs=1e-5)
    assert out["role/gen/clip_frac"] == pytest.approx(2 / 6) and out["role/agg/clip_frac"] == pytest.approx(1 / 3)
    assert out["role/gen/tokens"] == 6 and out["role/agg/tokens"] == 3
