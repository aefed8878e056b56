"""The trainer runs under the deadline and reward its shaping mode says (tiny untrained model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from swarmrl.config import load_config
from swarmrl.policy.model import build_tiny_policy
from swarmrl.rl.trainer import Trainer

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny_test.yaml"


@pytest.mark.parametrize("mode", ["time_limit", "penalty", "none"])
def test_step_uses_the_modes_deadline_and_reward(mode):
    cfg = load_config(TINY, [f"shaping.mode={mode}", "shaping.safety_cap_s=9", "shaping.penalty_per_s=0.05",
                             "rl.problems_per_step=1"])
    m, rollouts = Trainer(cfg, build_tiny_policy(cfg.model)).step()
    assert m["time_limit"] == (cfg.time_limit.start if mode == "time_limit" else 9.0)
    assert all(r.time_limit == m["time_limit"] for r in rollouts)
    lat = sum(r.finished_at for r in rollouts) / len(rollouts)
    want = m["score_mean"] - (0.05 * lat if mode == "penalty" else 0.0)  # the mean is linear
    assert m["reward_mean"] == pytest.approx(want, abs=1e-6)
    assert m["ref/limit_s"] == cfg.time_limit.start


def test_a_wrong_answers_cost_reaches_the_reward_not_the_score():
    from swarmrl.collective.grading import wrong_by_deadline
    cfg = load_config(TINY, ["shaping.wrong_cost=2", "rl.problems_per_step=1"])
    m, rollouts = Trainer(cfg, build_tiny_policy(cfg.model)).step()
    cost = sum(2 * wrong_by_deadline(r) / r.problem.num_items for r in rollouts) / len(rollouts)
    assert m["shaping/wrong_cost"] == pytest.approx(cost, abs=1e-6)
    assert m["reward_mean"] == pytest.approx(m["score_mean"] - cost, abs=1e-6)
