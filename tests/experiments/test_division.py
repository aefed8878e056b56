"""`swarmrl experiment division`: the division-of-labour arms run through the shared experiment
machinery (orchestrator-only arms with per-role adapters, grouped arms with their own variants)."""

from __future__ import annotations

import json
from pathlib import Path

from swarmrl.config import load_config, resolve_config
from swarmrl.experiments.latency_shaping import arm_configs, load_experiment

TINY = str(Path(__file__).resolve().parents[2] / "configs" / "tiny_test.yaml")


def test_the_packaged_division_experiment_has_the_four_priors():
    exp = load_experiment(resolve_config("experiments/division.yaml"))
    cfgs = arm_configs(exp, resolve_config)
    assert list(cfgs) == ["time_limit", "penalty", "orchestrator", "groups"]
    assert cfgs["orchestrator"].policy.frozen_roles == "expert" and cfgs["orchestrator"].policy.sharing == "isolated"
    assert cfgs["orchestrator"].shaping.instantiation_coef > 0 and cfgs["orchestrator"].shaping.finish_coef > 0
    assert cfgs["groups"].workflow.groups == 2 and cfgs["penalty"].shaping.mode == "penalty"
    assert {c.rl.steps for c in cfgs.values()} == {40} and exp.title.startswith("Division of labour")


def test_orchestrator_and_group_arms_train_and_scale(tmp_path):
    from swarmrl.experiments.latency_shaping import ExperimentConfig, run_experiment
    from swarmrl.policy.model import build_tiny_policy, save_policy
    from swarmrl.scaling.scale import ScaleSpec

    init = tmp_path / "init"
    save_policy(build_tiny_policy(load_config(TINY).model, seed=0), init)
    exp = ExperimentConfig(base=TINY, title="Division smoke", overrides=["rl.steps=1", "run.checkpoint_every=0"],
                           arms={"orchestrator": ["policy.sharing=isolated", "policy.frozen_roles=expert",
                                                  "shaping.instantiation_coef=0.2", "shaping.finish_coef=0.2"],
                                 "groups": ["workflow.groups=2"]},
                           scale=ScaleSpec(team_sizes=[1, 2], time_limits_s=[2, 6], problems=2))
    out = tmp_path / "exp"
    text = run_experiment(exp, out, resolve_config, init=init, log=lambda *a: None).read_text()
    assert text.startswith("# Division smoke") and "critical steps @" in text and "idle agents @" in text
    metrics = [json.loads(x) for x in (out / "arms" / "orchestrator" / "metrics.jsonl").read_text().splitlines()]
    assert "shaping/instantiation_coef" in metrics[-1]
    for arm in ("orchestrator", "groups"):
        rows = json.loads((out / "scaling" / f"{arm}.json").read_text())["rows"]
        assert {r["team_size"] for r in rows} == {1, 2} and "critical_steps" in rows[0]
