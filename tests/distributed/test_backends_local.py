"""Distributed pieces that need no Ray cluster: config checks, shards, per-turn sampling seeds,
the local backend, and the clear errors of bad distributed / vLLM setups."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from swarmrl.config import ConfigError, load_config
from swarmrl.distributed import DistributedError, shard_groups
from swarmrl.distributed.ray_backend import check_reachable
from swarmrl.policy.model import build_tiny_policy
from swarmrl.policy.sampler import HFSampler
from swarmrl.policy.sampling import sample_tokens
from swarmrl.rl.trainer import Trainer

from dist_helpers import TINY, timeless, tiny_cfg


def test_distributed_config_defaults_and_validation():
    cfg = load_config(TINY)
    assert (cfg.distributed.backend, cfg.distributed.rollout_workers, cfg.distributed.max_staleness) == ("local", 1, 0)
    with pytest.raises(ConfigError, match="rollout_workers"):
        load_config(TINY, ["distributed.rollout_workers=0"])
    with pytest.raises(ConfigError, match="problems_per_step"):  # 2 problems cannot fill 3 workers
        load_config(TINY, ["distributed.rollout_workers=3"])
    with pytest.raises(ConfigError, match="max_staleness"):
        load_config(TINY, ["distributed.max_staleness=1"])  # async needs the ray backend
    with pytest.raises(ConfigError, match="not one of"):
        load_config(TINY, ["distributed.backend=slurm"])
    with pytest.raises(ConfigError, match="address"):
        load_config(TINY, ["distributed.address=nowhere"])
    assert load_config(TINY, ["sampler.engine=vllm"]).sampler.engine == "vllm"  # valid config; the hardware decides


def test_shards_are_contiguous_whole_groups():
    class R:
        def __init__(self, i, g):
            self.index, self.group = i, g
    rollouts = [R(i, i // 3) for i in range(5 * 3)]  # 5 groups of 3
    shards = shard_groups(rollouts, 2)
    assert [[r.group for r in s] for s in shards] == [[0] * 3 + [1] * 3 + [2] * 3, [3] * 3 + [4] * 3]
    assert [len(s) for s in shard_groups(rollouts, 5)] == [3] * 5
    assert len(shard_groups(rollouts[:3], 4)) == 1  # more shards than groups: no empty shard


def test_gumbel_rows_sample_the_softmax():
    """Per-row generators (Gumbel-max) draw from softmax(logits / T): frequencies within 4 sigma."""
    logits = torch.tensor([2.0, 1.0, 0.0, -1.0])
    n = 4000
    gens = [torch.Generator().manual_seed(s) for s in range(n)]
    tok, lp = sample_tokens(logits.expand(n, 4), 1.0, False, gens)
    p = torch.softmax(logits, -1)
    freq = torch.bincount(tok, minlength=4).float() / n
    assert ((freq - p).abs() <= 4 * (p * (1 - p) / n).sqrt()).all(), (freq, p)
    assert torch.allclose(lp, p.log()[tok])
    tok2, _ = sample_tokens(logits.expand(n, 4), 1.0, False, [torch.Generator().manual_seed(s) for s in range(n)])
    assert torch.equal(tok, tok2)


def test_row_seeds_make_a_prompt_sample_the_same_alone_or_in_a_batch():
    pol = build_tiny_policy(tiny_cfg().model)
    torch.manual_seed(0)
    with torch.no_grad():
        for p in pol.model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.3)
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(0, 250, (n,), generator=g).tolist() for n in (5, 17, 3, 9)]
    sampler = HFSampler(pol)
    batch = sampler.generate(prompts, 12, seed=0, row_seeds=[11, 22, 33, 44])
    for k, (x, rs) in enumerate(zip(prompts, [11, 22, 33, 44])):
        (alone,) = sampler.generate([x], 12, seed=999, row_seeds=[rs])
        assert alone.ids == batch[k].ids
        assert np.allclose(alone.logprobs, batch[k].logprobs, atol=1e-5)
    other = sampler.generate(prompts, 12, seed=0, row_seeds=[12, 22, 33, 44])
    assert other[0].ids != batch[0].ids and other[1].ids == batch[1].ids  # a row's seed moves only that row


def test_rollouts_pickle_with_identical_content():
    cfg = tiny_cfg()
    tr = Trainer(cfg, build_tiny_policy(cfg.model))
    rollouts, _ = tr.backend.run(0, tr.step_rollouts)
    back = pickle.loads(pickle.dumps(rollouts))
    for a, b in zip(rollouts, back):
        assert a.to_json() == b.to_json()
        assert {n: (x.ids, x.gen_mask, x.logprobs) for n, x in a.agents.items()} == \
               {n: (x.ids, x.gen_mask, x.logprobs) for n, x in b.agents.items()}


def test_local_shards_change_only_the_batching(run_match):
    """One shard or two: the same rollouts (per-turn seeds), up to float noise of batched matmuls."""
    cfg1, cfg2 = tiny_cfg(), tiny_cfg("distributed.rollout_workers=2")
    with Trainer(cfg1, build_tiny_policy(cfg1.model)) as t1, Trainer(cfg2, build_tiny_policy(cfg2.model)) as t2:
        m1, r1 = t1.step()
        m2, r2 = t2.step()
    run_match.rollouts(r1, r2)
    run_match.metrics(timeless(m1, ("distributed/",)), timeless(m2, ("distributed/",)))
    assert m2["distributed/workers"] == 2 and m2["distributed/worker_restarts"] == 0


def test_unreachable_ray_address_is_a_clear_error():
    with pytest.raises(DistributedError, match="unreachable"):
        check_reachable("127.0.0.1:1")
    with pytest.raises(DistributedError, match="unreachable"):
        check_reachable("ray://127.0.0.1:1")
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("a Ray cluster is already up in this process")
    cfg = tiny_cfg("distributed.backend=ray", "distributed.address=127.0.0.1:1")
    with pytest.raises(DistributedError, match="127.0.0.1:1"):
        Trainer(cfg, build_tiny_policy(cfg.model))  # before any training


@pytest.mark.parametrize("override,cause", [
    ("policy.sharing=isolated_full", "isolated_full"),
    ("policy.lora_rank=3", "lora_rank=3"),
    ("policy.lora_targets=q_proj,embed_tokens", "embed_tokens"),
])
def test_vllm_rejects_adapters_it_cannot_serve(override, cause):
    sharing = [] if "sharing" in override else ["policy.sharing=isolated"]
    cfg = tiny_cfg("workflow.name=voting", "sampler.engine=vllm", *sharing, override)
    with pytest.raises(ConfigError, match=cause):
        Trainer(cfg, build_tiny_policy(cfg.model))


@pytest.mark.skipif(torch.cuda.is_available(), reason="the error path of a machine without a GPU")
def test_vllm_without_a_gpu_is_a_clear_error():
    cfg = tiny_cfg("sampler.engine=vllm")
    with pytest.raises(ConfigError, match="needs a CUDA GPU"):
        Trainer(cfg, build_tiny_policy(cfg.model))


def test_run_match_takes_cross_thread_noise_and_rejects_real_differences(run_match):
    """The tolerances of tests/conftest.py: the noise measured between 1 and 2 threads passes, a
    change a real bug makes (a 1e-4 relative metric shift, one token, a moved weight) fails."""
    m = {"step": 1, "loss": -1.05e-08, "grad_norm": 0.3191620060, "alerts": ["a"]}
    run_match.metrics(m, {**m, "loss": -1.37e-08, "grad_norm": 0.3191620074})  # measured: local vs ray
    for bad in ({"grad_norm": 0.3191620060 * (1 + 1e-4)}, {"loss": 1e-5}, {"step": 2}, {"alerts": []}):
        with pytest.raises(AssertionError):
            run_match.metrics(m, {**m, **bad})
    w = {"w": torch.linspace(-0.05, 0.05, 101)}
    run_match.weights(w, {"w": w["w"] + 7.5e-9})
    with pytest.raises(AssertionError):
        run_match.weights(w, {"w": w["w"] + 1e-5})  # far below one Adam step (~1e-3)
    lora_b = {"w": torch.tensor([-4.131603e-05, 6e-4])}  # measured: local vs ray, isolated adapters, 2 steps
    run_match.weights(lora_b, {"w": lora_b["w"] + torch.tensor([-2.2e-7, 0.0])}, lr=3e-4, steps=2)
    with pytest.raises(AssertionError):
        run_match.weights(lora_b, {"w": lora_b["w"] + 1e-4}, lr=3e-4, steps=2)  # a third of one step
    cfg = tiny_cfg()
    with Trainer(cfg, build_tiny_policy(cfg.model)) as tr:
        rollouts, _ = tr.backend.run(0, tr.step_rollouts)
    other = pickle.loads(pickle.dumps(rollouts))
    agent = next(iter(other[0].agents.values()))
    agent.logprobs = [x + 9.5e-7 for x in agent.logprobs]
    run_match.rollouts(rollouts, other)
    agent.ids = agent.ids[:-1] + [agent.ids[-1] + 1]
    with pytest.raises(AssertionError):
        run_match.rollouts(rollouts, other)
