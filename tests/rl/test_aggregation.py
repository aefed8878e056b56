"""Loss aggregation: per-sequence weights by hand, and the gradient-mass mechanism on a real gradient."""

from __future__ import annotations

import pytest
import torch

from swarmrl.rl.aggregation import AGGREGATION_MODES, sequence_weights, token_weights
from swarmrl.rl.losses import ppo_clip_loss

# Four sequences: role 0 (a "generator") writes 6 and 2 tokens, role 1 writes 4, role 2 writes 0.
COUNTS = torch.tensor([6, 2, 4, 0])
ROLES = torch.tensor([0, 0, 1, 2])


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


@pytest.mark.parametrize("mode", AGGREGATION_MODES)
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
    for mode in AGGREGATION_MODES:
        assert sequence_weights(torch.tensor([0, 0]), torch.tensor([0, 1]), mode).tolist() == [0.0, 0.0]
        assert sequence_weights(torch.zeros(0), torch.zeros(0, dtype=torch.long), mode).shape == (0,)


def test_unknown_mode_is_an_error_listing_the_valid_ones():
    with pytest.raises(ValueError, match="'nope'.*token_mean.*seq_mean.*role_balanced"):
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
