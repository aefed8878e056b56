"""vLLM engine on a GPU (marked `gpu`: skipped here; benchmarks/gpu_check.sh runs it)."""

from __future__ import annotations

import pytest
import torch

from swarmrl.policy.model import build_tiny_policy
from swarmrl.rl.batch import token_logprobs
from swarmrl.build import make_policy_set

from dist_helpers import tiny_cfg

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="vLLM needs a CUDA GPU")]


def test_vllm_serves_every_role_adapter_with_exact_logprobs_and_takes_new_weights():
    pytest.importorskip("vllm")
    from swarmrl.policy.vllm_engine import VLLMSampler
    cfg = tiny_cfg("workflow.name=voting", "policy.sharing=isolated", "sampler.engine=vllm")
    policies = make_policy_set(cfg, build_tiny_policy(cfg.model))
    with torch.no_grad():  # distinct adapters, so serving the wrong one would show
        for i, (n, p) in enumerate(policies.policies[policies.role_types[0]].model.named_parameters()):
            if "lora_B" in n:
                p.normal_(0.0, 0.5)
    from swarmrl.policy.vllm_engine import check_vllm_version, installed_vllm_version
    check_vllm_version(installed_vllm_version())  # the installed vLLM is one the extra allows
    engine = VLLMSampler(cfg, policies)
    engine.load_weights(policies.state_tensors(), version=0)
    ids0 = {r: req.lora_int_id for r, req in engine.requests.items()}
    prompts = [[5, 6, 7, 8], [9, 10, 11], [12, 13, 14, 15, 16]]
    roles = ["generator", "aggregator", "generator"]
    out = engine.generate(prompts, 8, seed=0, adapters=roles, row_seeds=[1, 2, 3])
    for prompt, role, s in zip(prompts, roles, out):
        assert 1 <= len(s.ids) <= 8 and len(s.logprobs) == len(s.ids)
        with policies.model_for(role) as model, torch.no_grad():
            ids = torch.tensor([prompt + s.ids])
            want, _ = token_logprobs(model, ids, torch.ones_like(ids), with_entropy=False)
        assert torch.allclose(torch.tensor(s.logprobs), want[0, len(prompt):].float(), atol=5e-2)  # bf16 engine
    again = engine.generate(prompts, 8, seed=0, adapters=roles, row_seeds=[1, 2, 3])
    assert [s.ids for s in again] == [s.ids for s in out]  # per-request seeds
    with torch.no_grad():
        for n, p in policies.policies["generator"].model.named_parameters():
            if "lora_B" in n and ".generator." in n:
                p.mul_(-3.0)
    engine.load_weights(policies.state_tensors(), version=1)
    moved = engine.generate(prompts, 8, seed=0, adapters=roles, row_seeds=[1, 2, 3])
    assert moved[0].logprobs != out[0].logprobs and moved[1].ids == out[1].ids  # only the generator changed
    assert not set(ids0.values()) & {req.lora_int_id for req in engine.requests.values()}  # new ids per version
    assert engine.version == 1
    engine.close()
    engine.close()  # idempotent: Trainer.close and the backend may both reach it


def test_vllm_shared_policy_takes_full_weights_in_place():
    pytest.importorskip("vllm")
    from swarmrl.policy.vllm_engine import VLLMSampler
    cfg = tiny_cfg("workflow.name=voting", "policy.sharing=shared", "sampler.engine=vllm")
    policies = make_policy_set(cfg, build_tiny_policy(cfg.model))
    engine = VLLMSampler(cfg, policies)
    try:
        engine.load_weights(policies.state_tensors(), version=0)
        prompts = [[5, 6, 7, 8], [9, 10, 11]]
        out = engine.generate(prompts, 8, seed=0, greedy=True, adapters=["a", "b"])
        with torch.no_grad():  # a large change to the (tied) embedding must show in the engine
            policies.base.model.model.embed_tokens.weight.mul_(-2.0)
        engine.load_weights(policies.state_tensors(), version=1)
        moved = engine.generate(prompts, 8, seed=0, greedy=True, adapters=["a", "b"])
        assert [s.logprobs for s in moved] != [s.logprobs for s in out]
        for prompt, s in zip(prompts, moved):
            with torch.no_grad():
                ids = torch.tensor([prompt + s.ids])
                want, _ = token_logprobs(policies.base.model, ids, torch.ones_like(ids), with_entropy=False)
            assert torch.allclose(torch.tensor(s.logprobs), want[0, len(prompt):].float(), atol=5e-2)
    finally:
        engine.close()
