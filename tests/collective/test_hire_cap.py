"""The hire cap: fire and re-hire in a loop cannot make agents without end."""

from __future__ import annotations

import numpy as np

from swarmrl.collective.org import Org
from swarmrl.collective.runtime import RuntimeLimits
from swarmrl.config import Config
from swarmrl.policy.tokenizer import build_tokenizer
from swarmrl.build import make_runtime
from tests.collective.runtime_helpers import run_script

LOOP = "".join(f'<hire role="expert"/><fire who="expert-{i}"/>' for i in range(1, 9))


def test_org_counts_rehires_against_the_cap():
    org = Org(max_experts=1, max_hires=2)
    assert org.hire("ceo") == ("expert-1", None)
    assert org.fire("ceo", "expert-1") is None
    assert org.hire("ceo") == ("expert-2", None)
    assert org.fire("ceo", "expert-2") is None
    assert org.hire("ceo") == (None, "error: hire limit reached (max 2 hires per rollout)")
    assert org.hired_total == 2 and org.rejected_hires == 1 and org.size() == 1


def test_fire_rehire_loop_stops_at_the_cap():
    r, _ = run_script({("ceo", 0): LOOP}, max_experts=3, max_hires_per_rollout=5)
    assert sorted(r.agents) == ["ceo"] + [f"expert-{i}" for i in range(1, 6)]
    assert r.counters["hires"] == 5 and r.counters["fires"] == 5 and r.counters["rejected_hires"] == 3
    cap = "error: hire limit reached (max 5 hires per rollout)"
    assert r.turns[0].errors == [x for i in (6, 7, 8) for x in (cap, f"error: no active expert named expert-{i}")]

def test_default_cap_is_the_configs_and_make_runtime_passes_it():
    cfg = Config()
    limits = RuntimeLimits()
    assert limits.max_hires_per_rollout == cfg.workflow.max_hires_per_rollout == 16
    assert limits.max_new_tokens_per_turn == cfg.sampler.max_new_tokens_per_turn
    assert limits.max_turns_per_agent == cfg.sampler.max_turns_per_agent
    assert limits.max_context_tokens == cfg.model.max_context_tokens
    cfg.workflow.max_hires_per_rollout = 2
    runtime, _ = make_runtime(cfg, build_tokenizer())
    assert runtime.limits.max_hires_per_rollout == 2
    problem = runtime.task.sample(np.random.default_rng(0), 1)[0]
    assert runtime.new_rollout(0, 0, problem, 1e9, 2).org.max_hires == 2
    # An evaluation cap above the hire budget (village to city) raises the budget to the cap.
    assert runtime.new_rollout(0, 0, problem, 1e9, 40).org.max_hires == 40
