"""The LLM actor's three ways of decoding a runtime's turns give the same rollouts:
continuous batching with per-agent KV reuse (default), without it, and wave by wave."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from swarmrl.config import load_config
from swarmrl.policy.actor import LLMActor
from swarmrl.policy.model import build_tiny_policy
from swarmrl.build import make_runtime, max_experts_for

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny_test.yaml"


def rollouts_with(policy, cfg, **sampler):
    cfg = load_config(TINY, [f"sampler.{k}={v}" for k, v in sampler.items()])
    runtime, task = make_runtime(cfg, policy.tokenizer)
    problems = task.sample(np.random.default_rng(0), 3)
    rollouts = [runtime.new_rollout(i, i, p, 30.0, max_experts_for(cfg)) for i, p in enumerate(problems)]
    actor = LLMActor.from_config(cfg.sampler, policy)
    runtime.run(rollouts, actor, seed=5)
    return rollouts


@pytest.fixture(scope="module")
def policy():
    cfg = load_config(TINY)
    pol = build_tiny_policy(cfg.model)
    torch.manual_seed(1)
    with torch.no_grad():  # sharper than a fresh init, so that tokens differ when positions do
        for p in pol.model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.2)
    return pol


def test_decoding_modes_give_the_same_rollouts(policy):
    cfg = load_config(TINY)
    default = rollouts_with(policy, cfg)
    assert max(a.turns for r in default for a in r.agents.values()) >= 2  # KV reuse was exercised
    for other in (rollouts_with(policy, cfg, prefix_cache=False), rollouts_with(policy, cfg, batching="waves")):
        for a, b in zip(default, other):
            assert [t.reply for t in a.turns] == [t.reply for t in b.turns]
            for name, agent in a.agents.items():
                assert agent.ids == b.agents[name].ids
                assert np.allclose(agent.logprobs, b.agents[name].logprobs, atol=1e-4)
