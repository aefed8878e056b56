"""Per-role token statistics and grad norm, checked by hand."""

from __future__ import annotations

import math

import pytest
import torch

from swarmrl.diagnostics.roles import finalize_role_stats, grad_norm, merge_sums, role_token_sums
from swarmrl.rl.losses import ppo_clip_loss

# Two rows: row 0 = "gen", row 1 = "agg". Ratios chosen by hand, clip_eps 0.2.
#   row 0: logp (-1, -2, -3) old (-1, -2.5, -3) -> ratio (1, e^0.5=1.6487, 1); mask (1, 1, 0); adv +1
#   row 1: logp (-0.5, -0.1, -4) old (-0.5, -0.1, -4) -> ratio 1; mask (1, 1, 1); adv -1
LOGP = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -0.1, -4.0]])
OLD = torch.tensor([[-1.0, -2.5, -3.0], [-0.5, -0.1, -4.0]])
ENT = torch.tensor([[0.2, 0.4, 9.0], [1.0, 2.0, 3.0]])
MASK = torch.tensor([[1, 1, 0], [1, 1, 1]])
ADV = torch.tensor([[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0]])


def test_role_token_sums_by_hand():
    s = role_token_sums(LOGP, OLD, ENT, MASK, ["gen", "agg"], clip_eps=0.2, adv=ADV)
    assert s["gen"] == pytest.approx({"tokens": 2, "nll": 3.0, "entropy": 0.6, "ratio": 1 + math.exp(0.5),
                                      "clipped": 1.0})
    assert s["agg"] == pytest.approx({"tokens": 3, "nll": 4.6, "entropy": 6.0, "ratio": 3.0, "clipped": 0.0})


def test_clipped_counts_only_tokens_whose_gradient_the_clip_removes():
    # ratios (1.5, 1.5, 0.5, 0.5) with advantages (+1, -1, +1, -1), eps 0.2: the clip removes the
    # gradient of the first (r > 1.2, A > 0) and the last (r < 0.8, A < 0) only, as in the loss.
    old = torch.zeros(1, 4)
    logp = torch.log(torch.tensor([[1.5, 1.5, 0.5, 0.5]]))
    adv = torch.tensor([[1.0, -1.0, 1.0, -1.0]])
    mask = torch.ones(1, 4)
    s = role_token_sums(logp, old, torch.zeros(1, 4), mask, ["gen"], clip_eps=0.2, adv=adv)
    assert s["gen"]["clipped"] == 2.0
    _, m = ppo_clip_loss(logp, old, adv, mask / 4, clip_eps=0.2)
    assert finalize_role_stats(s)["role/gen/clip_frac"] == pytest.approx(m["clip_frac"].item()) == 0.5
    # a loss that does not clip (clip_eps None) counts nothing
    assert role_token_sums(logp, old, torch.zeros(1, 4), mask, ["gen"], None, adv=adv)["gen"]["clipped"] == 0.0


def test_rows_of_one_role_add_up_and_empty_rows_are_skipped():
    s = role_token_sums(LOGP, OLD, ENT, torch.tensor([[1, 1, 0], [0, 0, 0]]), ["gen", "agg"], clip_eps=0.2, adv=ADV)
    assert set(s) == {"gen"}
    s = role_token_sums(LOGP, OLD, ENT, MASK, ["gen", "gen"], clip_eps=0.2, adv=ADV)
    assert s["gen"]["tokens"] == 5 and s["gen"]["nll"] == pytest.approx(7.6)
    with pytest.raises(ValueError, match="1 entries for 2 rows"):
        role_token_sums(LOGP, OLD, ENT, MASK, ["gen"], clip_eps=0.2, adv=ADV)


def test_merge_and_finalize_by_hand():
    a = role_token_sums(LOGP, OLD, ENT, MASK, ["gen", "agg"], clip_eps=0.2, adv=ADV)
    b = {"gen": {"tokens": 2.0, "nll": 1.0, "entropy": 1.4, "ratio": 2.0, "clipped": 1.0},
         "ceo": {"tokens": 1.0, "nll": 0.0, "entropy": 0.5, "ratio": 1.0, "clipped": 0.0}}
    merged = merge_sums(a, b)
    assert a["gen"]["tokens"] == 2  # inputs untouched
    out = finalize_role_stats(merged)
    # gen: 4 tokens, nll 4, entropy 2.0, ratio 3 + e^0.5, clipped 2
    assert out["role/gen/tokens"] == 4
    assert out["role/gen/perplexity"] == pytest.approx(math.e)
    assert out["role/gen/entropy"] == pytest.approx(0.5)
    assert out["role/gen/ratio_mean"] == pytest.approx((3 + math.exp(0.5)) / 4)
    assert out["role/gen/clip_frac"] == pytest.approx(0.5)
    # agg: perplexity exp(4.6 / 3)
    assert out["role/agg/perplexity"] == pytest.approx(math.exp(4.6 / 3))
    assert out["role/ceo/perplexity"] == 1.0 and out["role/ceo/entropy"] == 0.5
    assert finalize_role_stats({}) == {}


def test_grad_norm_by_hand():
    a = torch.nn.Parameter(torch.zeros(2))
    b = torch.nn.Parameter(torch.zeros(1))
    c = torch.nn.Parameter(torch.zeros(3))  # never gets a grad
    a.grad = torch.tensor([3.0, 0.0])
    b.grad = torch.tensor([4.0])
    assert grad_norm([a, b, c]) == pytest.approx(5.0)
    assert grad_norm([c]) == 0.0
    # matches torch's own norm on a real backward
    lin = torch.nn.Linear(3, 2)
    lin(torch.ones(1, 3)).pow(2).sum().backward()
    expected = torch.nn.utils.get_total_norm([p.grad for p in lin.parameters()])
    assert grad_norm(lin.parameters()) == pytest.approx(float(expected), rel=1e-6)


def test_role_clip_counts_follow_clip_higher_and_dual_clip():
    """ratio 1.25 with A > 0 is clipped at eps 0.2 but not under clip-higher 0.28; ratio 4 with
    A < 0 is clipped only by the dual clip (c = 3)."""
    import math

    import torch

    from swarmrl.diagnostics.roles import role_token_sums
    logp = torch.tensor([[math.log(1.25), math.log(4.0)]])
    old, ent, mask = torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1, 2)
    adv = torch.tensor([[1.0, -1.0]])
    clipped = lambda **kw: role_token_sums(logp, old, ent, mask, ["r"], 0.2, adv=adv, **kw)["r"]["clipped"]  # noqa: E731
    assert clipped() == 1.0
    assert clipped(clip_eps_high=0.28) == 0.0
    assert clipped(clip_eps_high=0.28, dual_clip=3.0) == 1.0



def test_observed_multiplicity_is_the_mean_team_per_rollout():
    from types import SimpleNamespace as NS
    from swarmrl.diagnostics.roles import observed_multiplicity
    agent = lambda role, gen=1: NS(role=role, gen_mask=[0, gen])  # noqa: E731
    # rollout 0: ceo + 3 experts (+ one hired that never generated); rollout 1: ceo + 1 expert;
    # rollout 2: the ceo alone -> experts (3 + 1) / 2 = 2 (a rollout without experts is not a 0)
    rollouts = [NS(agents={"c": agent("ceo"), **{f"e{i}": agent("expert") for i in range(3)}, "x": agent("expert", 0)}),
                NS(agents={"c": agent("ceo"), "e": agent("expert")}), NS(agents={"c": agent("ceo")})]
    assert observed_multiplicity(rollouts) == {"ceo": 1.0, "expert": 2.0}
    assert observed_multiplicity([]) == {}
