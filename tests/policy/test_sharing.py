"""PolicySet: per-role adapters sample in one mixed batch exactly as they would alone, train
only their own weights, and save / refuse checkpoints by slot; each sharing mode is its own
class behind the one interface."""

from __future__ import annotations

import pytest
import torch

from swarmrl.config import ModelConfig
from swarmrl.policy.model import build_tiny_policy
from swarmrl.policy.sharing import (FullCopyPolicies, LoraPolicies, PolicySet, SharedPolicies, make_policy_set,
                                    policy_class)

TINY = ModelConfig(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)
PROMPTS = [[5, 6, 7], [8, 9, 10, 11, 12], [5, 6, 7], [40, 41]]
ROLES = ["generator", "aggregator", "aggregator", "generator"]


def isolated() -> PolicySet:
    torch.manual_seed(0)
    ps = make_policy_set(build_tiny_policy(TINY), "isolated", ["generator", "aggregator"], lora_rank=4)
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
    fresh = make_policy_set(build_tiny_policy(TINY), "isolated", ["generator", "aggregator"], lora_rank=4)
    fresh.load_state_tensors(groups, "ckpt")
    a = fresh.generate(PROMPTS, ROLES, 5, seed=1, greedy=True)
    b = ps.generate(PROMPTS, ROLES, 5, seed=1, greedy=True)
    assert [s.ids for s in a] == [s.ids for s in b]
    del groups["adapter_aggregator"]
    with pytest.raises(KeyError, match="adapter_aggregator"):
        fresh.load_state_tensors(groups, "ckpt")


def test_isolated_full_copies_the_model_per_role_and_shared_is_one_slot():
    base = build_tiny_policy(TINY)
    full = make_policy_set(base, "isolated_full", ["generator", "aggregator"])
    assert full.slots == ["generator", "aggregator"]
    assert full.policies["generator"].model is not full.policies["aggregator"].model
    assert set(full.state_tensors()) == {"policy_generator", "policy_aggregator"}
    shared = make_policy_set(base, "shared", ["generator", "aggregator"])
    assert shared.slots == ["shared"] and shared.slot("aggregator") == "shared"
    with pytest.raises(ValueError, match="unknown policy.sharing 'private'"):
        make_policy_set(base, "private", ["generator"])
    with pytest.raises(ValueError, match="at least one role type"):
        make_policy_set(base, "shared", [])


@pytest.mark.parametrize("sharing, cls", [("shared", SharedPolicies), ("isolated", LoraPolicies),
                                          ("isolated_full", FullCopyPolicies)])
def test_each_mode_is_a_policy_set_class_and_the_constructor_dispatches(sharing, cls):
    """`PolicySet(policy, sharing, roles)` builds the same class as the factory."""
    roles = ["generator", "aggregator"]
    for ps in (make_policy_set(build_tiny_policy(TINY), sharing, roles, lora_rank=4),
               PolicySet(build_tiny_policy(TINY), sharing, roles, lora_rank=4)):
        assert type(ps) is cls and isinstance(ps, PolicySet) and ps.sharing == sharing
        assert policy_class(sharing) is cls
        want = "aggregator" if sharing == "isolated" else None  # only LoRA rows name an adapter
        assert ps.adapter_for("aggregator") == want
    with pytest.raises(ValueError, match="unknown policy.sharing 'private'"):
        PolicySet(build_tiny_policy(TINY), "private", roles)
    with pytest.raises(TypeError):
        PolicySet.__new__(PolicySet)  # abstract: only the modes are built


def test_isolated_full_samples_each_copy_on_its_slot_seed():
    """Full copies sample one batch per slot, seeded by seeds.seed_for("slot", seed, k)."""
    torch.manual_seed(0)
    full = make_policy_set(build_tiny_policy(TINY), "isolated_full", ["generator", "aggregator"])
    out = full.generate(PROMPTS, ROLES, 5, seed=4)
    for k, slot in enumerate(full.slots):
        idx = [i for i, r in enumerate(ROLES) if r == slot]
        alone = full.samplers[slot].generate([PROMPTS[i] for i in idx], 5, 4 * 31 + k)
        assert [out[i].ids for i in idx] == [s.ids for s in alone]


@pytest.mark.parametrize("sharing", ["shared", "isolated", "isolated_full"])
def test_policies_start_in_sampling_mode_so_decode_steps_switch_nothing(sharing, monkeypatch):
    base = build_tiny_policy(TINY)  # a fresh model is in train mode, and so is a new PEFT model
    ps = make_policy_set(base, sharing, ["generator", "aggregator"], lora_rank=4)
    assert not any(m.training for model in ps.modules() for m in model.modules())
    switches = []
    monkeypatch.setattr(torch.nn.Module, "train", lambda self, mode=True: switches.append(mode) or self)
    ps.generate(PROMPTS, ROLES, 4, seed=0)
    assert switches == []
