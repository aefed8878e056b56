"""Collective metrics on scripted rollouts whose numbers are known by construction."""

import numpy as np
import pytest

from swarmrl.config import Config, TaskConfig
from swarmrl.diagnostics.collective import collective_metrics, team_size_histogram
from swarmrl.policy.tokenizer import END, build_tokenizer
from swarmrl.rl.trainer import make_runtime
from swarmrl.tasks.arith_scripts import ScriptedActor, Strategy


def _run(strategy: Strategy, n: int = 3, time_limit: float = 1e9, dep_rate: float = 0.0):
    cfg = Config(task=TaskConfig(items_per_problem=4, dependency_rate=dep_rate))
    tok = build_tokenizer()
    runtime, task = make_runtime(cfg, tok)
    problems = task.sample(np.random.default_rng(0), n)
    rollouts = [runtime.new_rollout(i, i, p, time_limit, 8) for i, p in enumerate(problems)]
    runtime.run(rollouts, ScriptedActor(tok, tok.convert_tokens_to_ids(END), {i: strategy for i in range(n)}), seed=0)
    return rollouts


def test_solo_metrics():
    m = collective_metrics(_run(Strategy(0, share="recompute")))
    assert m["score_mean"] == 1.0 and m["useful_work"] == 4.0
    assert m["team_size_mean"] == 1.0 and m["expert_work_share"] == 0.0
    assert m["messages_per_rollout"] == 0.0 and m["accuracy"] == 1.0
    assert m["useful_work_per_agent"] == 4.0


def test_team_of_two_with_block_briefs():
    rollouts = _run(Strategy(2, share="recompute"))
    m = collective_metrics(rollouts)
    assert m["team_size_mean"] == 3.0 and m["hires_per_rollout"] == 2.0
    assert m["expert_work_share"] == 1.0  # the CEO only manages
    assert m["direct_messages_per_rollout"] == 2.0 and m["channel_posts_per_rollout"] == 0.0
    assert m["useful_work_per_agent"] == pytest.approx(4 / 3)
    # briefs are "A-B" and "C-D": 3 tokens each (letter, dash, letter)
    assert m["message_tokens_per_rollout"] == 6.0
    assert team_size_histogram(rollouts, 9)[3] == 1.0


def test_deadline_counts_only_work_before_it():
    full = _run(Strategy(0, share="recompute"))
    first_end = min(min(r.solved.values()) for r in full)
    assert all(min(r.solved.values()) == first_end for r in full)  # same token counts per item
    cut = _run(Strategy(0, share="recompute"), time_limit=first_end + 1e-6)
    m = collective_metrics(cut)
    assert m["useful_work"] == 1.0 and m["score_mean"] == 0.25
    assert m["latency_mean"] == pytest.approx(first_end + 1e-6)
