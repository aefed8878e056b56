"""The workflow study's failure mechanisms, on constructed inputs through the real Updater.

- Gradient amplification (isolated policies): three generators with identical outputs and
  rewards push their shared adapter three times as hard as a single-agent role with the same
  data; `multiplicity_normalized` brings it back to 1x.
- Unequal gradient mass (shared policy): a role that writes 10x the tokens of another gets
  10x the gradient under token-mean aggregation; `role_balanced` makes their shares equal.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from swarmrl.config import ModelConfig, RLConfig
from swarmrl.policy.model import build_tiny_policy
from swarmrl.policy.sharing import PolicySet
from swarmrl.rl.batch import TrainSeq
from swarmrl.rl.losses import get_loss
from swarmrl.rl.update import Updater

TINY = ModelConfig(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)


def seq(role: str, n_gen: int, multiplicity: int = 1, adv: float = 1.0, offset: int = 0) -> TrainSeq:
    prompt = [5 + offset, 6, 7, 8]
    gen = [(11 + 3 * i + offset) % 200 + 10 for i in range(n_gen)]
    return TrainSeq(ids=prompt + gen, gen_mask=[0] * len(prompt) + [1] * n_gen, old_logp=[0.0] * (len(prompt) + n_gen),
                    advantage=adv, role=role, rollout=0, group=0, multiplicity=multiplicity)


def role_norms(sharing: str, seqs: list[TrainSeq], **rl) -> dict[str, float]:
    torch.manual_seed(0)
    policy = build_tiny_policy(TINY)
    roles = sorted({s.role for s in seqs})
    ps = PolicySet(policy, sharing, roles, lora_rank=4)
    if sharing == "isolated":  # identical adapters, so identical data gives identical gradients
        params = dict(ps.policies[roles[0]].model.named_parameters())
        with torch.no_grad():
            for name, p in params.items():
                for other in roles[1:]:
                    if f".{other}." in name:
                        p.copy_(params[name.replace(f".{other}.", f".{roles[0]}.")])
    cfg = dataclasses.replace(RLConfig(), loss="pg", grad_clip=1e9, role_grad_interval=1, **rl)
    out = Updater(cfg, ps, get_loss("pg"), policy.pad_id, seed=0).update(seqs, step=0, measure_roles=True)
    return {r: out[f"role/{r}/grad_norm"] for r in roles}


def test_isolated_voting_amplifies_the_generator_adapter_three_times():
    gens = [seq("generator", 6, multiplicity=3) for _ in range(3)]  # same output, same reward
    batch = gens + [seq("aggregator", 6)]  # the single-agent role sees exactly the same data once
    norms = role_norms("isolated", batch)
    assert norms["generator"] / norms["aggregator"] == pytest.approx(3.0, rel=1e-3)
    fixed = role_norms("isolated", batch, multiplicity_normalized=True)
    assert fixed["generator"] / fixed["aggregator"] == pytest.approx(1.0, rel=1e-3)


def adapter_updates(seqs: list[TrainSeq], **rl) -> dict[str, float]:
    """One isolated-policy step: the size of each role adapter's parameter change."""
    torch.manual_seed(0)
    policy = build_tiny_policy(TINY)
    roles = sorted({s.role for s in seqs})
    ps = PolicySet(policy, "isolated", roles, lora_rank=4)
    for p in ps.parameters("generator"):  # LoRA B starts at 0: give the update a nonzero path
        torch.nn.init.normal_(p, std=0.02)
    for p in ps.parameters("aggregator"):
        torch.nn.init.normal_(p, std=0.02)
    before = {r: [p.detach().clone() for p in ps.parameters(r)] for r in roles}
    cfg = dataclasses.replace(RLConfig(), loss="pg", grad_clip=1e9, lr=1e-3, **rl)
    Updater(cfg, ps, get_loss("pg"), policy.pad_id, seed=0).update(seqs, step=0, measure_roles=False)
    return {r: float(torch.sqrt(sum(((p - b) ** 2).sum() for p, b in zip(ps.parameters(r), before[r]))))
            for r in roles}


def test_multiplicity_normalized_leaves_an_isolated_adamw_step_unchanged_and_lr_scaling_does_not():
    batch = [seq("generator", 6, multiplicity=3) for _ in range(3)] + [seq("aggregator", 6)]
    plain = adapter_updates(batch)
    normalized = adapter_updates(batch, multiplicity_normalized=True)
    # AdamW's first step is lr * g / (|g| + eps) per parameter: a loss divided by 3 moves the
    # generator adapter exactly as far (up to eps against gradients of ~1e-4 and up)
    assert normalized["generator"] == pytest.approx(plain["generator"], rel=1e-3)
    scaled = adapter_updates(batch, multiplicity_lr_scaled=True)
    assert scaled["generator"] == pytest.approx(plain["generator"] / 3, rel=1e-3)  # lr / multiplicity
    assert scaled["aggregator"] == pytest.approx(plain["aggregator"], rel=1e-6)   # multiplicity 1: as before


def test_role_balanced_gives_a_verbose_role_the_same_gradient_mass():
    # The generator role emits 10x the tokens of the aggregator: ten copies of exactly the
    # aggregator's sequence, so per token their gradients are identical and only the mass differs.
    batch = [seq("generator", 4) for _ in range(10)] + [seq("aggregator", 4)]
    tm = role_norms("shared", batch, aggregation="token_mean")
    assert tm["generator"] / tm["aggregator"] == pytest.approx(10.0, rel=1e-3)
    rb = role_norms("shared", batch, aggregation="role_balanced")
    assert rb["generator"] / rb["aggregator"] == pytest.approx(1.0, rel=1e-3)


def test_shared_role_norms_cost_no_extra_pass_and_leave_the_step_as_one_backward():
    """On a diagnostic step the shared model's gradient is built role by role: each role's norm
    is the norm of a backward over that role's sequences alone (weights from the whole
    minibatch), and the optimizer step equals the step of one backward over everything."""
    batch = [seq("ceo", 5, adv=1.0), seq("expert", 7, adv=-0.5, offset=3), seq("expert", 4, adv=0.8, offset=9)]
    cfg = dataclasses.replace(RLConfig(), loss="pg", grad_clip=1e9, lr=1e-2)

    def run(measure: bool):
        torch.manual_seed(0)
        policy = build_tiny_policy(TINY)
        ps = PolicySet(policy, "shared", ["ceo", "expert"])
        upd = Updater(cfg, ps, get_loss("pg"), policy.pad_id, seed=0)
        out = upd.update(batch, step=0, measure_roles=measure)
        return out, [p.detach().clone() for p in policy.model.parameters()], upd, policy

    plain, w_plain, _, _ = run(False)
    measured, w_measured, upd, policy = run(True)
    for a, b in zip(w_plain, w_measured):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)  # the roles' sum, rounded differently
    assert plain["loss"] == pytest.approx(measured["loss"], rel=1e-6)
    torch.manual_seed(0)
    fresh = build_tiny_policy(TINY)  # the same weights as before the step
    upd.policies = PolicySet(fresh, "shared", ["ceo", "expert"])
    w = upd.weights(batch)
    for role in ("ceo", "expert"):
        fresh.model.zero_grad(set_to_none=True)
        sel = [i for i, s in enumerate(batch) if s.role == role]
        upd.backward([batch[i] for i in sel], w[sel])
        by_hand = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in fresh.model.parameters() if p.grad is not None))
        assert measured[f"role/{role}/grad_norm"] == pytest.approx(float(by_hand), rel=1e-6)
