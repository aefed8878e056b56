"""Placement (model.device), autocast (model.mixed_precision) and gradient checkpointing.

This machine has no GPU: CUDA is simulated where only the decision is tested (monkeypatched
`torch.cuda.is_available`), and the bf16 path runs on the CPU's autocast. What needs a real GPU
(tensors on cuda, peak memory) is covered by benchmarks/gpu_check.sh and the `gpu` test below.
"""

from __future__ import annotations

import pytest
import torch

from swarmrl.build import check_hardware, make_policy_set, place_policy
from swarmrl.config import ConfigError, load_config
from swarmrl.policy.device import (autocast, autocast_dtype, checkpointing_on, cpu_groups, enable_gradient_checkpointing,
                                   model_device, peak_memory_metrics, resolve_device, rollout_device)
from swarmrl.policy.model import build_tiny_policy
from swarmrl.policy.sampler import HFSampler
from swarmrl.rl.batch import token_logprobs

TINY = ["model.hidden_size=32", "model.num_layers=2", "model.num_heads=2", "model.num_kv_heads=1",
        "model.intermediate_size=64"]
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="the error path of a machine without a GPU")


def _fake_cuda(monkeypatch, count: int = 2, current: int = 0) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current)


def test_resolve_device_decides_from_the_spec_and_the_machine(monkeypatch):
    assert resolve_device("cpu") == torch.device("cpu")
    _fake_cuda(monkeypatch)
    assert resolve_device("auto") == torch.device("cuda", 0)
    assert resolve_device("cuda") == torch.device("cuda", 0)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(ConfigError, match=r"model\.device=cuda:2: this machine has 2 CUDA"):
        resolve_device("cuda:2")
    _fake_cuda(monkeypatch, current=1)  # torchrun's second process: its own GPU
    assert resolve_device("auto") == resolve_device("cuda") == torch.device("cuda", 1)
    assert resolve_device("cuda:0") == torch.device("cuda", 0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")


@pytest.mark.parametrize("spec", ["gpu", "cuda:", "cuda:x", "CUDA", "cuda0", "mps", ""])
def test_a_bad_device_string_is_refused(spec):
    with pytest.raises(ConfigError, match=r"model\.device=.*use auto, cpu, cuda or cuda:N"):
        resolve_device(spec)
    with pytest.raises(ConfigError):
        rollout_device(spec)


@no_cuda
@pytest.mark.parametrize("spec", ["cuda", "cuda:0", "cuda:3"])
def test_cuda_without_a_gpu_names_the_key_and_the_fix(spec):
    with pytest.raises(ConfigError, match=rf"model\.device={spec} needs a CUDA GPU.*model\.device=cpu or model\.device=auto"):
        resolve_device(spec)
    assert rollout_device(spec) == torch.device("cpu")  # a Ray worker without a GPU samples on the CPU


@no_cuda
@pytest.mark.parametrize("override,cause", [("model.device=cuda", r"model\.device=cuda"),
                                            ("sampler.engine=vllm", "needs a CUDA GPU")])
def test_gpu_config_on_a_cpu_machine_fails_before_any_model(override, cause):
    cfg = load_config(None, TINY + [override])  # a valid config: the machine decides
    with pytest.raises(ConfigError, match=cause):
        check_hardware(cfg)
    from swarmrl import api
    with pytest.raises(ConfigError, match=cause):  # before a warm start or a model load
        api.train(cfg, out="unused-never-created", overrides=None)


def test_autocast_bf16_on_cuda_by_default_and_on_the_cpu_only_when_asked():
    cpu, cuda = torch.device("cpu"), torch.device("cuda", 0)
    assert autocast_dtype(cuda, "auto") is torch.bfloat16 and autocast_dtype(cuda, "bf16") is torch.bfloat16
    assert autocast_dtype(cuda, "no") is None
    assert autocast_dtype(cpu, "auto") is None and autocast_dtype(cpu, "no") is None
    assert autocast_dtype(cpu, "bf16") is torch.bfloat16
    x = torch.randn(4, 4)
    with autocast(cpu, "bf16"):
        assert (x @ x).dtype is torch.bfloat16
    with autocast(cpu, "auto"):
        assert (x @ x).dtype is torch.float32
    with pytest.raises(ConfigError):
        autocast_dtype(cpu, "fp16")


def test_bf16_learner_log_probs_stay_float32_and_close_with_float32_weights():
    policy = build_tiny_policy(load_config(None, TINY).model)
    ids = torch.randint(0, len(policy.tokenizer), (2, 12), generator=torch.Generator().manual_seed(0))
    attn = torch.ones_like(ids)
    ref, _ = token_logprobs(policy.model, ids, attn, with_entropy=False)
    with autocast(torch.device("cpu"), "bf16"):
        lp, _ = token_logprobs(policy.model, ids, attn, with_entropy=False)
    lp.sum().backward()
    assert lp.dtype is torch.float32
    assert all(p.dtype is torch.float32 and (p.grad is None or p.grad.dtype is torch.float32)
               for p in policy.model.parameters())  # master weights and gradients stay float32
    assert torch.allclose(lp, ref, atol=0.1) and not torch.equal(lp, ref)  # bf16 rounding, nothing worse


def test_gradient_checkpointing_keeps_gradients_and_the_samplers_kv_cache():
    cfg = load_config(None, TINY)
    plain, ckpt = build_tiny_policy(cfg.model, seed=0), build_tiny_policy(cfg.model, seed=0)
    enable_gradient_checkpointing(ckpt.model)
    assert checkpointing_on(ckpt.model) and not checkpointing_on(plain.model)
    ids = torch.randint(0, len(plain.tokenizer), (2, 16), generator=torch.Generator().manual_seed(1))
    for p in (plain, ckpt):
        p.model.train()
        lp, _ = token_logprobs(p.model, ids, torch.ones_like(ids), with_entropy=False)
        lp.sum().backward()
    for a, b in zip(plain.model.parameters(), ckpt.model.parameters()):
        assert torch.allclose(a.grad, b.grad, rtol=1e-5, atol=1e-7)
    # The learner leaves the model in train mode here, where HF turns use_cache off under
    # checkpointing; the sampler decodes in eval mode, so it still reads its KV cache: the same
    # tokens as the plain model, and a saved prefix (only a cache holds one).
    prompts = [[5, 6, 7, 8, 9], [10, 11, 12]]
    out = {}
    for name, p in (("plain", plain), ("ckpt", ckpt)):
        stream = HFSampler(p).stream(6, seed=3)
        for i, x in enumerate(prompts):
            stream.add(i, x, row_seed=i, key=("agent", i))
        got = {}
        while stream.busy():
            got.update(dict(stream.step()))
        out[name] = [got[i].ids for i in range(len(prompts))]
        assert stream.peak_cached_bytes > 0 and p.model.training  # cache used; train mode restored
    assert out["ckpt"] == out["plain"]


@pytest.mark.parametrize("sharing", ["shared", "isolated", "isolated_full"])
def test_place_policy_puts_every_slot_on_the_device(sharing):
    cfg = load_config(None, TINY + ["workflow.name=voting", f"policy.sharing={sharing}", "model.device=cpu",
                                    "model.gradient_checkpointing=true"])
    policy = build_tiny_policy(cfg.model)
    assert place_policy(cfg, policy) == torch.device("cpu")
    policies = make_policy_set(cfg, policy)
    for m in policies.modules():
        assert model_device(m) == torch.device("cpu")
        assert checkpointing_on(m)
    assert place_policy(cfg, policies, role="eval") == torch.device("cpu")


def test_weights_cross_processes_on_the_cpu_and_peak_memory_is_cuda_only():
    t = torch.ones(3, requires_grad=True)
    out = cpu_groups({"policy": {"w": t * 2}})
    assert out["policy"]["w"].device.type == "cpu" and not out["policy"]["w"].requires_grad
    assert peak_memory_metrics(torch.device("cpu")) == {}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_cuda_the_policy_trains_on_the_gpu_and_its_checkpoint_resumes_on_the_cpu(tmp_path):
    from swarmrl.rl.trainer import Trainer
    from swarmrl.runs.checkpoint import load_checkpoint, save_checkpoint
    small = ["rl.steps=2", "rl.problems_per_step=2", "rl.rollouts_per_problem=2", "eval.val_interval=0"]

    def opt_devices(tr) -> set[str]:
        return {v.device.type for opt in tr.updater.optimizers.values() for st in opt.state.values()
                for k, v in st.items() if k != "step"}

    gpu_cfg = load_config(None, TINY + small + ["model.device=cuda"])
    with Trainer(gpu_cfg, build_tiny_policy(gpu_cfg.model)) as tr:
        metrics, _ = tr.step()
        assert model_device(tr.policy.model).type == "cuda" and opt_devices(tr) == {"cuda"}
        assert metrics["gpu/peak_mem_gb"] > 0 and 0 <= metrics["learner/pad_fraction"] < 1
        path = save_checkpoint(tmp_path, 1, tensors=tr.policies.state_tensors(),
                               optimizers={f"optim_{s}": sd for s, sd in tr.updater.state_dict().items()}, state={})
    ckpt = load_checkpoint(path)
    for name, cfg in (("cpu", load_config(None, TINY + small + ["model.device=cpu"])), ("cuda", gpu_cfg)):
        with Trainer(cfg, build_tiny_policy(cfg.model)) as tr:  # GPU -> CPU, and CPU files -> GPU
            tr.policies.load_state_tensors(ckpt.tensors, str(path))
            for slot, opt in tr.updater.optimizers.items():
                opt.load_state_dict(ckpt.optimizers[f"optim_{slot}"])
            assert opt_devices(tr) == {name}  # optimizer state follows the parameters
            tr.step()
