"""PolicySet: per-role adapters sample in one mixed batch exactly as they would alone, train
only their own weights, and save / refuse checkpoints by slot."""

from __future__ import annotations

import pytest
import torch

from swarmrl.config import ModelConfig
from swarmrl.policy.model import build_tiny_policy
from swarmrl.policy.sharing import PolicySet

TINY = ModelConfig(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)
PROMPTS = [[5, 6, 7], [8, 9, 10, 11, 12], [5, 6, 7], [40, 41]]
ROLES = ["generator", "aggregator", "aggregator", "generator"]


def isolated() -> PolicySet:
    torch.manual_seed(0)
    ps = PolicySet(build_tiny_policy(TINY), "isolated", ["generator", "aggregator"], lora_rank=4)
    with torch.no_grad():  # make the adapters matter (LoRA B starts at 0) and differ
        for n, p in ps.policies["generator"].model.named_parameters():
            if "lora_B" in n:
                p.normal_(0.0, 0.8)
    return ps


def test_mixed_adapter_batch_equals_each_adapter_alone():
    ps = isolated()
    mixed = ps.generate(PROMPTS, ROLES, 6, seed=0, greedy=True)
    for role in ("generator", "aggregator"):
        idx = [i for i, r in enumerate(ROLES) if r == role]
        alone = ps.generate([PROMPTS[i] for i in idx], [role] * len(idx), 6, seed=0, greedy=True)
        for i, s in zip(idx, alone):
            assert mixed[i].ids == s.ids
            assert mixed[i].logprobs == pytest.approx(s.logprobs, abs=1e-4)
    # same prompt, different role -> different policy
    assert mixed[0].ids != mixed[2].ids


def test_each_slot_trains_only_its_own_adapter():
    ps = isolated()
    gen, agg = ps.parameters("generator"), ps.parameters("aggregator")
    assert gen and agg and not {id(p) for p in gen} & {id(p) for p in agg}
    with ps.model_for("aggregator") as model:
        model(input_ids=torch.tensor([PROMPTS[1]])).logits.sum().backward()
    assert all(p.grad is None or p.grad.abs().sum() == 0 for p in gen)
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in agg)
    base = [p for n, p in ps.policies["generator"].model.named_parameters() if "lora_" not in n]
    assert all(not p.requires_grad for p in base)  # the base model is frozen under LoRA


def test_checkpoint_groups_roundtrip_and_a_missing_adapter_is_refused():
    ps = isolated()
    groups = {k: {n: t.clone() for n, t in v.items()} for k, v in ps.state_tensors().items()}
    assert set(groups) == {"adapter_generator", "adapter_aggregator"}
    fresh = PolicySet(build_tiny_policy(TINY), "isolated", ["generator", "aggregator"], lora_rank=4)
    fresh.load_state_tensors(groups, "ckpt")
    a = fresh.generate(PROMPTS, ROLES, 5, seed=1, greedy=True)
    b = ps.generate(PROMPTS, ROLES, 5, seed=1, greedy=True)
    assert [s.ids for s in a] == [s.ids for s in b]
    del groups["adapter_aggregator"]
    with pytest.raises(KeyError, match="adapter_aggregator"):
        fresh.load_state_tensors(groups, "ckpt")


def test_isolated_full_copies_the_model_per_role_and_shared_is_one_slot():
    base = build_tiny_policy(TINY)
    full = PolicySet(base, "isolated_full", ["generator", "aggregator"])
    assert full.slots == ["generator", "aggregator"]
    assert full.policies["generator"].model is not full.policies["aggregator"].model
    assert set(full.state_tensors()) == {"policy_generator", "policy_aggregator"}
    shared = PolicySet(base, "shared", ["generator", "aggregator"])
    assert shared.slots == ["shared"] and shared.slot("aggregator") == "shared"
    with pytest.raises(ValueError, match="unknown policy.sharing 'private'"):
        PolicySet(base, "private", ["generator"])
