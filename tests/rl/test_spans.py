"""`rl.spans`: under a span of control, each problem of an RL step draws its own span."""

from __future__ import annotations

from pathlib import Path

import pytest

from swarmrl.build import check_plugins, step_spans
from swarmrl.config import ConfigError, load_config
from swarmrl.policy.model import build_tiny_policy
from swarmrl.rl.trainer import Trainer
from swarmrl.seeds import rng_for

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny_test.yaml"  # max_experts 3


def test_spans_are_drawn_per_problem_from_the_list_and_seeded():
    cfg = load_config(TINY, ["rl.problems_per_step=4", "workflow.span=3", "rl.spans=1,2,3"])
    picks = rng_for("spans", cfg.seed, 5).integers(0, 3, size=4)
    assert step_spans(cfg, 5) == [[1, 2, 3][int(i)] for i in picks] == step_spans(cfg, 5)
    assert {s for step in range(30) for s in step_spans(cfg, step)} == {1, 2, 3}
    assert step_spans(load_config(TINY, ["workflow.span=3"]), 5) is None  # no list: no draw


def test_a_step_gives_each_group_its_span():
    cfg = load_config(TINY, ["rl.problems_per_step=4", "rl.rollouts_per_problem=2", "workflow.span=3",
                             "rl.spans=1,2"])
    rollouts, _ = Trainer(cfg, build_tiny_policy(cfg.model)).step_rollouts(2)
    spans = step_spans(cfg, 2)
    assert [r.org.span for r in rollouts] == [s for s in spans for _ in range(2)]
    assert [r.org.quota("ceo") for r in rollouts] == [min(3, s) for s in spans for _ in range(2)]
    plain = load_config(TINY, ["rl.problems_per_step=2", "workflow.span=2"])
    rollouts, _ = Trainer(plain, build_tiny_policy(plain.model)).step_rollouts(0)
    assert {r.org.span for r in rollouts} == {2}


@pytest.mark.parametrize("override, match", [
    (["rl.spans=1,2"], "needs workflow.span > 0"),
    (["workflow.span=2", "rl.spans=0,2"], "spans >= 1"),
    (["workflow.span=2", "rl.spans=two"], "comma-separated integers"),
])
def test_bad_spans_fail_before_anything_is_built(override, match):
    with pytest.raises(ConfigError, match=match):
        check_plugins(load_config(TINY, override))
