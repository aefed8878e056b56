"""`swarmrl experiment credit`: flat, contribution and leave-one-out credit through the shared
experiment machinery; the report's steps-to-a-score table read against hand-built curves."""

from __future__ import annotations

from pathlib import Path

from swarmrl.config import load_config, resolve_config
from swarmrl.experiments.latency_shaping import arm_configs, load_experiment
from swarmrl.experiments.report import steps_to_reach

TINY = str(Path(__file__).resolve().parents[2] / "configs" / "tiny_test.yaml")


def test_the_packaged_credit_experiment_compares_three_estimators():
    exp = load_experiment(resolve_config("experiments/credit.yaml"))
    cfgs = arm_configs(exp, resolve_config)
    assert {a: c.rl.advantage for a, c in cfgs.items()} == {
        "flat": "collective", "contribution": "contribution", "leave_one_out": "leave_one_out"}
    assert {c.rl.steps for c in cfgs.values()} == {40} and {c.shaping.mode for c in cfgs.values()} == {"time_limit"}
    assert cfgs["contribution"].rl.contribution_coef == 0.5


def test_steps_to_reach_reads_the_trailing_mean():
    rows = [{"step": i, "s": v} for i, v in enumerate([0.1, 0.3, 0.5, 0.2, 0.6, 0.7])]
    # trailing 2-step means: 0.1, 0.2, 0.4, 0.35, 0.4, 0.65
    assert steps_to_reach(rows, "s", 0.4, window=2) == 2
    assert steps_to_reach(rows, "s", 0.5, window=2) == 5
    assert steps_to_reach(rows, "s", 0.9, window=2) is None
    assert steps_to_reach([{"step": 0}], "s", 0.0) is None  # never logged: never reached


def test_credit_arms_train_and_report(tmp_path):
    import json
    from swarmrl.experiments.latency_shaping import ExperimentConfig, run_experiment
    from swarmrl.policy.model import build_tiny_policy, save_policy
    from swarmrl.scaling.scale import ScaleSpec

    init = tmp_path / "init"
    save_policy(build_tiny_policy(load_config(TINY).model, seed=0), init)
    # one arm, one step: the machinery (training, scaling) is the division smoke test's; here the
    # report's credit parts
    exp = ExperimentConfig(base=TINY, title="Credit smoke", overrides=["rl.steps=1", "run.checkpoint_every=0"],
                           arms={"contribution": ["rl.advantage=contribution", "rl.contribution_coef=0.5"]},
                           scale=ScaleSpec(team_sizes=[1], time_limits_s=[2], problems=1))
    out = tmp_path / "exp"
    text = run_experiment(exp, out, resolve_config, init=init, log=lambda *a: None).read_text()
    assert "## Checks" not in text  # no time_limit arm: the RLCR checks do not apply
    assert "## Training: steps to reach a score" in text and "| contribution |" in text
    assert (out / "figures" / "training_credit.png").exists()
    metrics = [json.loads(x) for x in (out / "arms" / "contribution" / "metrics.jsonl").read_text().splitlines()]
    assert "role/ceo/idle_share" in metrics[-1] and "role/ceo/multiplicity" in metrics[-1]
