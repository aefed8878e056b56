"""One trainer step with the whole GRPO-family menu, the contribution estimator and the PARL
staged terms switched on (tiny untrained model): the options reach the step and its metrics."""

from __future__ import annotations

from pathlib import Path

import torch

from swarmrl.config import load_config
from swarmrl.policy.model import build_tiny_policy
from swarmrl.rl.trainer import Trainer

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny_test.yaml"


def test_a_step_with_every_option_on():
    cfg = load_config(TINY, ["rl.problems_per_step=1", "rl.advantage=contribution", "rl.contribution_coef=0.5",
                             "rl.scale_rewards=none", "rl.clip_eps_high=0.28", "rl.dual_clip=3",
                             "rl.aggregation=dr_grpo", "rl.drop_zero_spread_groups=true",
                             "shaping.instantiation_coef=0.2", "shaping.instantiation_anneal_end=10",
                             "shaping.finish_coef=0.1"])
    policy = build_tiny_policy(cfg.model)
    before = [p.detach().clone() for p in policy.model.parameters()]
    trainer = Trainer(cfg, policy)
    m, rollouts = trainer.step()
    assert m["shaping/instantiation_coef"] == 0.2 and m["shaping/finish_coef"] == 0.1
    assert "critical_steps" in m and m["critical_steps"] >= 1
    assert m["adv/groups_dropped"] in (0.0, 1.0)
    # the org fixes no multiplicity: the detectors get the team the step ran (the CEO: one)
    assert m["perf/mfu_generation"] > 0 and m["perf/peak_tflops"] > 0 and m["perf/update_s"] > 0
    assert m["role/ceo/multiplicity"] == 1.0 and 0.0 <= m["role/ceo/idle_share"] <= 1.0
    changed = any(not torch.equal(a, b.detach()) for a, b in zip(before, policy.model.parameters()))
    # a dropped group (no reward spread: an untrained model's usual case) leaves no gradient at all
    assert changed == (m["adv/groups_dropped"] == 0.0)
