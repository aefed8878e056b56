"""Latency shaping: each mode computes the reward it claims, on hand-built rollouts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from swarmrl.collective.bus import MessageBus
from swarmrl.collective.org import Org
from swarmrl.collective.state import Rollout
from swarmrl.config import ConfigError, ShapingConfig, TaskConfig, load_config
from swarmrl.rl.shaping import deadline_s, rollout_rewards, shape, shaped_scores, staged_scores, wrong_fractions
from swarmrl.tasks.arith import ArithTask

PROBLEM = ArithTask(TaskConfig(items_per_problem=4)).sample(np.random.default_rng(0), 1)[0]


def rollout(time_limit: float, solved: dict[int, float], finished_at: float, end_reason: str = "idle") -> Rollout:
    r = Rollout(index=0, group=0, problem=PROBLEM, time_limit=time_limit, agents={}, org=Org(), bus=MessageBus())
    r.solved = dict(solved)
    r.solved_by = {i: "ceo" for i in solved}
    r.item_scores = {i: 1.0 for i in solved}
    r.finished_at, r.end_reason = finished_at, end_reason
    return r


def test_shape_penalty_by_hand():
    rewards, lat = torch.tensor([0.5, 1.0, 0.0]), torch.tensor([10.0, 4.0, 2.0])  # [3], [3]
    got = shape("penalty", rewards, lat, penalty_per_s=0.05)
    assert got.tolist() == pytest.approx([0.5 - 0.5, 1.0 - 0.2, 0.0 - 0.1])
    assert shape("none", rewards, lat, 0.05).tolist() == [0.5, 1.0, 0.0]
    assert shape("time_limit", rewards, lat, 0.05).tolist() == [0.5, 1.0, 0.0]
    with pytest.raises(ValueError, match="shaping.mode"):
        shape("bogus", rewards, lat, 0.05)


def test_time_limit_counts_only_reward_before_the_deadline():
    # 4 items; the deadline is 4 s: items landed at 2.0 and 3.5 count, 4.5 does not.
    r = rollout(4.0, {1: 2.0, 2: 3.5, 3: 4.5}, finished_at=4.0, end_reason="deadline")
    assert shaped_scores(ShapingConfig(mode="time_limit"), [r]).tolist() == [0.5]
    # Landing exactly at the deadline still counts (reward at or before it).
    r = rollout(4.0, {1: 4.0}, finished_at=4.0, end_reason="deadline")
    assert shaped_scores(ShapingConfig(mode="time_limit"), [r]).tolist() == [0.25]


def test_penalty_and_none_on_the_same_rollouts():
    fast = rollout(24.0, {1: 1.0, 2: 2.0, 3: 3.0, 4: 5.0}, finished_at=5.0, end_reason="solved")
    slow = rollout(24.0, {1: 4.0, 2: 8.0, 3: 12.0, 4: 16.0}, finished_at=16.0, end_reason="solved")
    half = rollout(24.0, {1: 1.0, 2: 2.0}, finished_at=3.0, end_reason="idle")  # gave up at 3 s
    rs = [fast, slow, half]
    rewards, lat = rollout_rewards(rs)
    assert rewards.tolist() == [1.0, 1.0, 0.5] and lat.tolist() == [5.0, 16.0, 3.0]
    pen = shaped_scores(ShapingConfig(mode="penalty", penalty_per_s=0.02), rs)
    assert pen.tolist() == pytest.approx([1.0 - 0.10, 1.0 - 0.32, 0.5 - 0.06])
    # none: both full solutions score the same however long they took.
    assert shaped_scores(ShapingConfig(mode="none"), rs).tolist() == [1.0, 1.0, 0.5]


def _sub(item: int, t: float, correct: bool, agent: str = "ceo", seq: int = 0) -> dict:
    return {"t": t, "agent": agent, "item": item, "answer": "?", "seq": seq, "correct": correct,
            "score": float(correct), "status": "graded"}


def test_a_wrong_answer_costs_wrong_cost_items_when_it_landed_by_the_deadline():
    # 4 items, deadline 4 s. Item 1 right at 1 s; item 2 wrong at 2 s (decides it; the right one
    # at 2.5 s comes too late); item 3 wrong at 5 s, after the deadline (costs nothing); item 4
    # wrong at exactly 4 s (by the deadline: it costs).
    r = rollout(4.0, {1: 1.0}, finished_at=4.0, end_reason="deadline")
    r.submissions = [_sub(1, 1.0, True), _sub(2, 2.0, False, seq=1), _sub(2, 2.5, True, seq=2),
                     _sub(3, 5.0, False, seq=3), _sub(4, 4.0, False, seq=4)]
    clean = rollout(4.0, {1: 1.0, 2: 2.0}, finished_at=4.0, end_reason="deadline")
    clean.submissions = [_sub(1, 1.0, True), _sub(2, 2.0, True, seq=1)]
    assert wrong_fractions([r, clean]).tolist() == [0.5, 0.0]  # 2 of 4 items; none
    off = ShapingConfig(mode="time_limit")
    scores, metrics = staged_scores(off, [r, clean], step=0)
    assert scores.tolist() == [0.25, 0.5] and metrics == {}  # off: the score before the deadline
    scores, metrics = staged_scores(ShapingConfig(mode="time_limit", wrong_cost=1.0), [r, clean], step=0)
    assert scores.tolist() == [0.25 - 0.5, 0.5]
    assert metrics == {"shaping/wrong_cost": pytest.approx(0.25)}  # the mean cost over the two
    half, _ = staged_scores(ShapingConfig(mode="penalty", penalty_per_s=0.0, wrong_cost=0.5), [r], step=0)
    assert half.tolist() == [0.25 - 0.25]  # every mode
    # the score evaluations report is the task's own
    assert r.score == 0.25


def test_a_negative_wrong_cost_is_refused():
    with pytest.raises(ConfigError, match="shaping.wrong_cost must be >= 0"):
        load_config(None, ["shaping.wrong_cost=-0.5"])


def test_deadline_choice():
    assert deadline_s(ShapingConfig(mode="time_limit", safety_cap_s=30.0), 6.5) == 6.5
    assert deadline_s(ShapingConfig(mode="penalty", safety_cap_s=30.0), 6.5) == 30.0
    assert deadline_s(ShapingConfig(mode="none", safety_cap_s=30.0), 6.5) == 30.0


@pytest.mark.parametrize("override, msg", [
    ("shaping.safety_cap_s=0", "safety_cap_s must be > 0"),
    ("shaping.penalty_per_s=-1", "penalty_per_s must be >= 0"),
    ("shaping.mode=fast", "not one of"),
    ("time_limit.start=0", "time_limit.start must be > 0"),
    ("time_limit.end=-2", "time_limit.end must be > 0"),
])
def test_bad_shaping_config(override, msg):
    with pytest.raises(ConfigError, match=msg):
        load_config(None, [override])
